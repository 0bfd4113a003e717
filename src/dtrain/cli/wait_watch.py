"""Following many jobs: wait (to the end, exit by the worst outcome) and watch (a live table)."""
from __future__ import annotations

from typing import List, Optional

import typer

from .. import follow as fl
from ..exitcodes import ExitCode
from .app import app
from .options import (Experiment, Local, OptionalJobNames, ResourceGroup, Subscription, Tags, WorkspaceName,
                      check_output, check_positive, check_timeout, pairs, runner, useless, workspace)


@app.command("wait")
def wait_(
    names: OptionalJobNames = None,
    tag: Tags = None,
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Stop waiting after S seconds (exit 4)."),
    local: Local = False,
    output: str = typer.Option("text", "--output", "-o", help="text, json (the jobs at the end) or jsonl "
                               "(a status event per change)."),
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Wait for jobs to end (each NAME a job, a retry chain or a grid; and every job --tag lists); exit with the
    worst outcome (Completed 0 < Canceled 3 < Failed 1 < timeout 4 < infrastructure 5 < lost 7)."""
    from .follow_view import follow_jobs
    from .jobs import _jobs

    check_output(output)
    check_timeout(timeout)                    # before any job is read
    ws = workspace(subscription, resource_group, workspace_, local)
    r = runner(ws)
    follow_jobs(r, _jobs(r, names, tag, local), output=output, timeout=timeout, stream=False)


@app.command()
def watch(
    names: Optional[List[str]] = typer.Argument(None, metavar="[NAME...]"),
    experiment: Experiment = None,
    tag: Tags = None,
    local: bool = typer.Option(False, "--local", help="Local jobs only."),
    interval: Optional[float] = typer.Option(None, "--interval", help="Seconds between polls (default 5)."),
    output: str = typer.Option("text", "--output", "-o", help="text (a live table), json (the jobs at the end) "
                               "or jsonl (status events)."),
    once: bool = typer.Option(False, "--once", help="Print the table once and exit 0."),
    metric: str = typer.Option("loss", "--metric", metavar="K", help="The metric whose latest value the table "
                               "shows, next to samples/s (one batched metrics read per poll)."),
    no_metrics: bool = typer.Option(False, "--no-metrics", help="No metric columns (and no metrics read)."),
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """A live table of jobs (status, duration, nodes x processes, latest loss and samples/s, last line),
    one list call (and one batched metrics read) per poll.
    Ends when every watched job has ended. Exits like `wait` over the named jobs; without names, over
    the jobs that were running when the watch began (0 when none was)."""
    from ..status import exit_code, worst

    check_output(output)
    useless("--interval", once and interval is not None, "does nothing with --once, which polls once")
    check_positive("--interval", interval, "a positive number of seconds")
    ws = workspace(subscription, resource_group, workspace_, local)
    shown_metric = None if no_metrics or output != "text" else metric
    r = runner(ws)
    w = r.watch(names or None, local=local, experiment=experiment, tags=pairs(tag, "--tag", bare_ok=True),
                         interval=interval or 5.0, metric=shown_metric)
    try:
        final = _show(w.events(once), output, shown_metric, live=not once and bool(w.first))
    except KeyboardInterrupt:
        from ..output import err

        err("interrupted; the jobs keep running")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    judged = [] if once else [i for i in final.values() if i.name in w.judged]
    if judged:
        from .. import ci
        from ..untrusted import in_ci
        from .why import top_causes

        ci.report(judged, causes=top_causes(r, judged) if in_ci() else None)   # logs are read only for CI
    raise typer.Exit(worst(exit_code(i) for i in judged))


def _show(events, output: str, metric: str | None, live: bool) -> dict:
    """Print a watch's events: jsonl a status event per change, json the jobs at the end, text a table
    (live, redrawn each poll, or once). Returns the jobs as last seen."""
    from ..output import out_json, out_jsonl
    from . import watch_view

    view = None
    if output == "text" and live:
        from rich.live import Live

        view = Live(console=watch_view.console(), refresh_per_second=4, transient=False)
        view.start()
    last: fl.Polled | fl.Ended = fl.Ended({})
    try:
        for ev in events:
            if isinstance(ev, fl.StatusChanged) and output == "jsonl":
                i = ev.info
                out_jsonl({"event": "status", "job": i.name, "status": i.status, "timed_out": i.timed_out})
            elif isinstance(ev, (fl.Polled, fl.Ended)):
                last = ev
                if view is not None:
                    view.update(watch_view.table(list(ev.infos.values()), metric, ev.metrics))
    finally:
        if view is not None:
            view.stop()
    if output == "json":
        out_json([i.to_dict() for i in last.infos.values()])
    elif output == "text" and view is None:
        watch_view.console().print(watch_view.table(list(last.infos.values()), metric, last.metrics))
    return last.infos
