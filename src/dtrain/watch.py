"""`dtrain watch`: a live table of many jobs. One backend.list() call per poll whatever the number of
jobs, so watching 100 Azure jobs costs what watching one does."""
from __future__ import annotations

import sys
import time
from datetime import datetime, timezone

from .backends.base import JobInfo
from .chain import attempt_label
from .errors import JobNotFound
from .output import PipeSafe, out_json, out_jsonl


def _duration(info: JobInfo) -> str:
    def parse(s):
        try:
            return datetime.fromisoformat(s.replace("Z", "+00:00")) if s else None
        except ValueError:
            return None
    start = parse(info.started) or parse(info.created)
    if start is None:
        return "-"
    end = parse(info.ended) or datetime.now(timezone.utc)
    secs = int((end - start).total_seconds())
    return f"{secs // 3600}:{secs % 3600 // 60:02d}:{secs % 60:02d}" if secs >= 3600 else f"{secs // 60}:{secs % 60:02d}"


def _table(infos, metric: str | None = None, latest: dict | None = None):
    from rich.table import Table
    from rich.text import Text

    from .metrics_view import watch_cells

    t = Table(box=None, pad_edge=False, header_style="bold")
    widest = max([len(i.name) for i in infos] + [3])
    # Name, status, duration and shape never shrink; only the last line gives way on a narrow screen.
    t.add_column("job", no_wrap=True, min_width=widest)
    t.add_column("status", no_wrap=True, min_width=20)
    t.add_column("duration", no_wrap=True, min_width=8)
    t.add_column("nodes x procs", no_wrap=True)
    if metric:
        t.add_column(metric, no_wrap=True, justify="right")
        t.add_column("samples/s", no_wrap=True, justify="right")
    t.add_column("last line", overflow="ellipsis", no_wrap=True, max_width=80)
    colors = {"Completed": "green", "Failed": "red", "Canceled": "yellow", "Running": "cyan"}
    for i in infos:
        st = i.status + (" (timeout)" if i.timed_out else "")
        if i.chain:                          # a retry chain's row: which attempt it is on (docs/retries.md)
            st += ", " + attempt_label(i.chain)
        # Every cell is a Text, never a str: rich would read `[rank0]` or `[/mnt/ckpt]` in a log line
        # (or a tag, or a name) as markup. Log text is shown as it is.
        cells = [Text(i.name), Text(st, style=colors.get(i.status, "white")), Text(_duration(i)),
                 Text(f"{i.nodes} x {i.processes_per_node}")]
        if metric:
            cells += [Text(c) for c in watch_cells((latest or {}).get(i.name) or {}, metric)]
        t.add_row(*cells, Text((i.last_line or "").strip()))
    return t


def _console():
    from rich.console import Console

    # Piped output has no width: use a wide one rather than truncating names.
    return Console(file=PipeSafe(sys.stdout), width=None if sys.stdout.isatty() else 200, markup=False, emoji=False,
                   highlight=False)


def _poll(backend, names, experiment, tags):
    infos = backend.list(experiment=experiment, tags=tags or None, limit=None if names else 200, names=names)
    if names:
        by = {i.name: i for i in infos}
        missing = [n for n in names if n not in by]
        if missing:
            raise JobNotFound(f"no job named {', '.join(missing)}", hint="`dtrain list` shows job names")
        infos = [by[n] for n in names]
    return infos


def _latest(backend, infos, metric):
    """Each job's latest metrics for the table: one batched read for all jobs (Backend.latest_metrics);
    a failed read shows '-' this poll rather than ending the watch."""
    if not metric or not hasattr(backend, "latest_metrics"):
        return {}
    from .errors import DtrainError

    try:
        return backend.latest_metrics(infos)
    except DtrainError:
        return {}


def watch_jobs(backend, names, experiment, tags, interval: float, output: str, once: bool,
               metric: str | None = None):
    """Show the jobs until every one has ended (or once). Returns (final infos, judged): the jobs the
    exit code is about. Named jobs are all judged; without names, only the jobs still active when
    the watch began, i.e. those seen ending while it ran (a job that ended last week says nothing
    about this run). Nothing active at the start: nothing judged, exit 0."""
    infos = _poll(backend, names, experiment, tags)
    judged = set(names) if names else {i.name for i in infos if not i.terminal}
    if once or not infos:
        _print_once(infos, output, metric, _latest(backend, infos, metric) if output == "text" else {})
        return infos, []
    seen: dict = {}
    if output in ("jsonl", "json"):
        while True:
            for i in infos:
                if output == "jsonl" and seen.get(i.name) != i.status:
                    seen[i.name] = i.status
                    out_jsonl({"event": "status", "job": i.name, "status": i.status, "timed_out": i.timed_out})
            if all(i.terminal for i in infos):
                break
            time.sleep(interval)
            infos = _poll(backend, names or [i.name for i in infos], experiment, tags)
        if output == "json":
            out_json([i.to_dict() for i in infos])
        return infos, [i for i in infos if i.name in judged]
    from rich.live import Live

    console = _console()
    with Live(_table(infos, metric, _latest(backend, infos, metric)), console=console, refresh_per_second=4,
              transient=False) as live:
        while not all(i.terminal for i in infos):
            time.sleep(interval)
            infos = _poll(backend, names or [i.name for i in infos], experiment, tags)
            live.update(_table(infos, metric, _latest(backend, infos, metric)))
    return infos, [i for i in infos if i.name in judged]


def _print_once(infos, output: str, metric: str | None = None, latest: dict | None = None) -> None:
    if output == "jsonl":
        for i in infos:
            out_jsonl({"event": "status", "job": i.name, "status": i.status})
    elif output == "json":
        out_json([i.to_dict() for i in infos])
    else:
        _console().print(_table(infos, metric, latest))
