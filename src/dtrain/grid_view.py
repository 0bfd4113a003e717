"""How a grid of jobs is shown: one row per combination (job, status, duration, the values, the latest
metric when the jobs log one), as a rich table for terminals, as text lines, as JSON rows for CI, and as
a Markdown table for the GitHub / Azure Pipelines summaries. Formatting only: no backend, no printing."""
from __future__ import annotations

from datetime import datetime, timezone

from .backends.base import JobInfo
from .timestamps import parse_time

def duration(info: JobInfo) -> str:
    """How long the job has run (or ran), from its start (or creation) to its end (or now): m:ss or h:mm:ss."""
    start = parse_time(info.started) or parse_time(info.created)
    if start is None:
        return "-"
    end = parse_time(info.ended) or datetime.now(timezone.utc)
    secs = int((end - start).total_seconds())
    return f"{secs // 3600}:{secs % 3600 // 60:02d}:{secs % 60:02d}" if secs >= 3600 else f"{secs // 60}:{secs % 60:02d}"


STATUS_COLORS = {"Completed": "green", "Failed": "red", "Canceled": "yellow", "Running": "cyan"}


def _status(info: JobInfo | None) -> str:
    if info is None:
        return "Waiting"                 # not submitted yet (throttled)
    return info.status + (" (timeout)" if info.timed_out else "")


def _metric(point) -> str:
    """The latest point of the metric (a MetricPoint), as the metrics views format a value."""
    if point is None:
        return "-"
    from .metrics_view import fmt

    return fmt(point.value)


def rows(grid, infos: dict, metrics: dict | None = None) -> list[dict]:
    """One dict per member, in the grid's order: name, status, duration, the combination, the metric."""
    out = []
    for m in grid.members:
        info = infos.get(m.name)
        out.append({"job": m.name, "status": _status(info), "duration": duration(info) if info else "-",
                    "combination": dict(m.combination), "metric": (metrics or {}).get(m.name)})
    return out


def headers(grid, metric_key: str | None) -> list[str]:
    return ["job", "status", "duration", *(a.path for a in grid.axes)] + ([metric_key] if metric_key else [])


def cells(row: dict, grid, metric_key: str | None) -> list[str]:
    return ([row["job"], row["status"], row["duration"], *(row["combination"][a.path] for a in grid.axes)]
            + ([_metric(row["metric"])] if metric_key else []))


def rich_table(grid, infos: dict, metric_key: str | None = None, metrics: dict | None = None):
    from rich.table import Table
    from rich.text import Text

    t = Table(box=None, pad_edge=False, header_style="bold")
    for h in headers(grid, metric_key):
        t.add_column(h, no_wrap=True)
    for r in rows(grid, infos, metrics):
        cs = cells(r, grid, metric_key)
        # every cell a Text: a value such as [1,2] must not be read as rich markup
        t.add_row(*(Text(c, style=STATUS_COLORS.get(r["status"], "")) if i == 1 else Text(c)
                    for i, c in enumerate(cs)))
    return t


def text_lines(grid, infos: dict, metric_key: str | None = None, metrics: dict | None = None) -> list[str]:
    """The final table as aligned plain text (stdout, also when piped)."""
    body = [cells(r, grid, metric_key) for r in rows(grid, infos, metrics)]
    head = headers(grid, metric_key)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head, *body]]


def json_rows(grid, infos: dict, metric_key: str | None = None, metrics: dict | None = None) -> list[dict]:
    """`--output json`: each job as `dtrain status -o json` shows it, with its group and combination."""
    out = []
    for m in grid.members:
        info = infos.get(m.name)
        d = info.to_dict() if info else {"name": m.name, "status": "NotSubmitted"}
        d.update(group=grid.group, combination=dict(m.combination))
        if info is not None and info.terminal:     # what it cost (cost.py: price x nodes x run time)
            from .cost import job_cost

            c = job_cost(info)
            if c:
                d["cost"] = c
        if metric_key:
            p = (metrics or {}).get(m.name)
            d["metrics"] = {metric_key: None if p is None else {"step": p.step, "value": p.value,
                                                                  "timestamp": p.timestamp}}
        out.append(d)
    return out


def markdown_columns(grid) -> dict:
    """name -> {matrix path: value}: the extra columns of the CI summary table."""
    return {m.name: dict(m.combination) for m in grid.members}
