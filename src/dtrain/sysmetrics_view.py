"""How `dtrain top` shows a job's system metrics: a table per node x device (the latest and the mean of
each metric), a plot over time (metrics_view.plot, the same characters as `dtrain metrics`), and the
findings (hwfindings.py). Pure formatting: no backend, no terminal state."""
from __future__ import annotations

from .backends.base import MetricPoint
from .metrics_view import fmt, plot
from .sysmetrics import SysMetrics

SHORT = {"gpu_util": "GPU%", "gpu_mem": "GPU MB", "gpu_mem_pct": "GPUmem%", "gpu_energy": "GPU J",
         "cpu_util": "CPU%", "mem_rss": "RSS MB", "ib_tx": "IB tx MB", "ib_rx": "IB rx MB", "disk_used": "disk MB"}


def _cell(v) -> str:
    return "-" if v is None else (f"{v:.1f}" if abs(v) < 1e5 else fmt(v))


def table(sm: SysMetrics) -> list:
    """One row per (node, device): `last (mean)` of each metric. A node-level metric (device "") shows on
    the node's own row."""
    metrics = sm.metrics()
    by = {(s.node, s.device, s.metric): s for s in sm.series if s.points}
    rows = [["node", "device", *[SHORT.get(m, m) for m in metrics]]]
    for node, device in sm.cells():
        row = [node, device or "(node)"]
        for m in metrics:
            s = by.get((node, device, m))
            row.append("" if s is None else f"{_cell(s.last())} ({_cell(s.mean())})")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


def over_time(sm: SysMetrics, metric: str) -> list:
    """The mean over every device of `metric` at each sample time, as points (step: seconds from the first)."""
    sums: dict = {}
    for s in sm.of(metric):
        for t, v in s.points:
            if v is not None:
                a = sums.setdefault(t, [0.0, 0])
                a[0] += v
                a[1] += 1
    if not sums:
        return []
    t0 = min(sums)
    return [MetricPoint(step=int((t - t0) / 1000), value=a[0] / a[1], timestamp=t) for t, a in sorted(sums.items())]


def finding_lines(found: list) -> list:
    out = []
    for f in found:
        out.append(f"{f.kind}: {f.message}")
        out.append(f"  hint: {f.hint}")
    return out


def render_text(sm: SysMetrics, found: list, width: int = 80) -> str:
    head = f"{sm.job}: system metrics from {'Azure Monitor' if sm.source == 'azure-monitor' else 'the local sampler'}"
    if sm.vm_size:
        head += f", {sm.nodes} x {sm.vm_size}"
    if not sm.cells():
        return head + "\n(no samples yet)"
    out = [head, "last (mean) of each metric per node and device", *table(sm)]
    metric = "gpu_util" if sm.of("gpu_util") else "cpu_util"
    pts = over_time(sm, metric)
    if len(pts) > 1:
        out += ["", f"{SHORT[metric]}, mean over devices, by second of the run",
                *plot(pts, width=max(20, min(width, 100) - 14), height=6)]
    if found:
        out += ["", *finding_lines(found)]
    return "\n".join(out)
