"""dtrain top: how a job uses its hardware (GPU, memory, InfiniBand, CPU per node and device), live until
the job ends, with what looks wrong; and the findings at the end of `submit --wait` and in `why`."""
from __future__ import annotations

import sys
import time
from typing import Optional

import typer

from ..exitcodes import ExitCode
from .app import app
from .checks import check_output, check_positive, useless
from .options import JobName, Local, ResourceGroup, Subscription, WorkspaceName, runner, workspace

MIN_RUN_S = 15.0      # a shorter run has too few samples to find anything in (hwfindings.MIN_POINTS)


@app.command()
def top(
    name: JobName,
    output: str = typer.Option("text", "--output", "-o", help="text (a live table per node x device, a plot, the "
                               "findings), json ({job, source, nodes, vm_size, limits, series: [{node, device, metric, "
                               "unit, points: [{timestamp, value}]}], findings}) or csv (job,node,device,metric,unit,"
                               "timestamp,value)."),
    once: bool = typer.Option(False, "--once", help="Show what is known now and exit (text on a terminal is "
                              "otherwise redrawn until the job ends)."),
    interval: Optional[float] = typer.Option(None, "--interval", help="Seconds between reads (default: 5 for "
                                             "a local job, 30 for an Azure job, whose metrics have a point a minute)."),
    local: Local = False,
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Show how a job uses its hardware: GPU utilization and memory, InfiniBand traffic, CPU and memory,
    per node and device (Azure: from Azure Monitor; local: sampled by the job's supervisor), and what looks
    wrong (NCCL on sockets, idle GPUs, a straggler, memory near the limit) with a hint. Exit 0."""
    from ..hwfindings import findings
    from ..metrics_view import json_safe
    from ..output import err, out, out_json
    from ..sysmetrics import SysMetrics, csv_text

    check_output(output, ("text", "json", "csv"))
    useless("--interval", once and interval is not None, "does nothing with --once, which reads once")
    check_positive("--interval", interval, "a positive number of seconds")
    r = runner(workspace(subscription, resource_group, workspace_, local))
    if output == "text" and not once and sys.stdout.isatty():
        _live(r, name, local, interval)
        return
    sm = r.sysmetrics(name, local=local)
    if sm is None:
        err(f"{name}: its backend records no system metrics")
        sm = SysMetrics(name, "none")                  # json and csv still get their (empty) document
    found = findings(sm)
    if output == "json":
        out_json(json_safe({**sm.to_dict(), "findings": [f.to_dict() for f in found]}))
    elif output == "csv":
        out(csv_text(sm).rstrip("\n"))
    elif sm.source != "none":
        out(_text(sm, found))


def _text(sm, found) -> str:
    from ..output import shown
    from ..sysmetrics_view import render_text

    return shown(render_text(sm, found, width=_width()), sys.stdout)


def _width() -> int:
    import shutil

    return shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80


def _live(r, name: str, local: bool, interval: float | None) -> None:
    """Redraw in place until the job has ended (and once more after that)."""
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from ..hwfindings import findings
    from ..output import err

    if interval is None:
        interval = 5.0 if r.status(name, local=local).backend == "local" else 30.0
    view = Live(Text(""), console=Console(markup=False, highlight=False), auto_refresh=False)
    view.start()
    try:
        while True:
            ended = r.status(name, local=local).terminal
            sm = r.sysmetrics(name, local=local)
            if sm is None:
                view.update(Text(f"{name}: its backend records no system metrics"), refresh=True)
                return
            view.update(Text(_text(sm, findings(sm))), refresh=True)
            if ended:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        err("interrupted; the job keeps running")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    finally:
        view.stop()


def hardware_lines(r, info) -> list:
    """The findings of a job that ran long enough to have some (the end of submit --wait, `why`)."""
    from datetime import datetime, timezone

    from ..timestamps import parse_time

    start, end = parse_time(info.started), parse_time(info.ended) or datetime.now(timezone.utc)
    if start is None or (end - start).total_seconds() < MIN_RUN_S:
        return []
    from ..sysmetrics_view import finding_lines

    return finding_lines(r.hw_findings(info.name))


def print_findings(r, info) -> None:
    from ..output import err, shown

    for line in hardware_lines(r, info):
        err(f"{info.name}: hardware: {shown(line.strip())}" if not line.startswith("  ") else shown(line))
