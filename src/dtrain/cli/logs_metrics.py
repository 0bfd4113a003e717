"""What a job wrote: logs (every rank's lines) and metrics (what it logged through MLflow)."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

from ..errors import UsageError
from ..exitcodes import ExitCode
from .app import app
from .options import (JobName, Local, ResourceGroup, Subscription, WorkspaceName, check_output, check_positive,
                      runner, useless, workspace)


@app.command()
def logs(
    name: JobName,
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends."),
    rank: Optional[int] = typer.Option(None, "--rank", help="Only this rank's lines."),
    member: Optional[int] = typer.Option(None, "--member", metavar="K", help="NAME is a grid: the logs of its "
                                         "K-th job (0-based, in the order `dtrain status NAME` lists them)."),
    output: str = typer.Option("text", "--output", "-o", help="text or jsonl (one object per line)."),
    local: Local = False,
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Print every rank's logs, each line prefixed with its node and rank."""
    from ..output import log_prefix, out_jsonl, out_log

    check_output(output, ("text", "jsonl"),
                 hint="logs stream, so they come as jsonl: one JSON object per line" if output == "json" else None)
    ws = workspace(subscription, resource_group, workspace_, local)
    r = runner(ws)
    name = _one_job(r, name, member, local)
    for line in r.logs(name, follow=follow, rank=rank, local=local):
        if output == "jsonl":
            out_jsonl({"event": "log", "job": name, "rank": line.rank, "node": line.node, "text": line.text})
        else:
            out_log(log_prefix(line, 5), line.text)


@app.command()
def metrics(
    name: JobName,
    follow: bool = typer.Option(False, "--follow", "-f", help="Redraw as new points arrive; end when the job ends."),
    key: Optional[List[str]] = typer.Option(None, "--key", "-k", metavar="K", help="Only this metric (repeatable)."),
    output: str = typer.Option("text", "--output", "-o", help="text (a table and a plot per metric), json "
                               "({\"job\", \"metrics\": {key: [{step, value, timestamp}]}}) or csv "
                               "(job,key,step,value,timestamp)."),
    interval: Optional[float] = typer.Option(None, "--interval", help="With --follow: seconds between polls "
                                             "(default 2)."),
    local: Local = False,
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Show the metrics a job logged through MLflow (loss, learning rate, samples/s, ...): last, min, max
    and steps per metric and a plot of each, or every point as JSON or CSV. Exit 0 (also with none); exit 2
    when --key names a metric the job did not log while it logged others."""
    from ..metrics_view import csv_chunks, json_chunks, render_text, to_json
    from ..output import err, out, out_chunks, out_json, shown

    check_output(output, ("text", "json", "csv"))
    useless("--interval", interval is not None and not follow, "only applies with --follow")
    check_positive("--interval", interval, "a positive number of seconds")
    ws = workspace(subscription, resource_group, workspace_, local)
    keys, r = (list(key) if key else None), runner(ws)
    if not follow:
        points = r.metrics(name, keys=keys, local=local)
    else:
        points = _follow(r, name, keys, local, output, interval or 2.0)
    if keys and not all(points.get(k) for k in keys):
        _refuse_unknown_keys(r, name, keys, points, local)
    if not any(points.values()):
        err(f"{name}: no metrics" + (f" named {', '.join(keys)}" if keys else "") + " logged"
            + (" (scripts log them with mlflow.log_metric; docs/monitoring.md)" if not keys else ""))
        if output == "json":
            out_json(to_json(name, {}))
        return
    if output == "json":                     # streamed: a million points never sit in memory as text
        out_chunks(json_chunks(name, points), end="\n", json_text=True)
    elif output == "csv":
        if not follow:                       # --follow has streamed the rows already
            out_chunks(csv_chunks(name, points))
    elif not (follow and sys.stdout.isatty()):   # a live view has drawn the last frame already
        out(shown(render_text(name, points, keys, width=_width()), sys.stdout))


def _one_job(r, name: str, member, local: bool) -> str:
    """The job `logs` reads: NAME itself, or with --member the K-th job of the grid NAME."""
    jobs = r.expand([name], local=local)
    if member is None and jobs == [name]:
        return name
    if member is None or not 0 <= member < len(jobs):
        listing = "; ".join(f"{k}: {n}" for k, n in enumerate(jobs))
        raise UsageError(f"{name} is a grid of {len(jobs)} jobs" if member is None else
                         f"--member {member}: {name} has jobs 0..{len(jobs) - 1}",
                         hint=f"pick one with --member K ({listing})")
    return jobs[member]


def _refuse_unknown_keys(r, name, keys, points, local) -> None:
    """A --key the job never logged, while it logged others, is a wrong key (exit 2): say which exist."""
    from ..errors import UsageError
    from ..metrics_view import unknown_keys, unknown_keys_message

    found = unknown_keys(keys, points, r.metrics(name, local=local))
    if found:
        message, hint = unknown_keys_message(name, *found)
        raise UsageError(message, hint=hint)


def _width() -> int:
    import shutil

    return shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80


def _follow(r, name, keys, local, output, interval) -> dict:
    """metrics --follow: csv streams each new row; text redraws in place on a terminal; json prints
    once at the end. Returns every point read."""
    from ..metrics_view import csv_text, render_text
    from ..output import err, out, shown

    live = None
    if output == "text" and sys.stdout.isatty():
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        live = Live(Text(""), console=Console(markup=False, highlight=False), auto_refresh=False)
        live.start()
    points: dict = {}
    header = True
    try:
        for new, points, _info in r.follow_metrics(name, keys=keys, local=local, interval=interval):
            if output == "csv" and any(new.values()):
                out(csv_text(name, new, header=header).rstrip("\n"))
                header = False
            elif live is not None and any(new.values()):
                live.update(Text(shown(render_text(name, points, keys, width=_width()), sys.stdout)), refresh=True)
    except KeyboardInterrupt:
        err("interrupted; the job keeps running")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    finally:
        if live is not None:
            live.stop()
    return points
