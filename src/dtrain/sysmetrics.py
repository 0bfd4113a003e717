"""A job's system metrics (how the hardware is used), one schema for every backend.

A job's `SysMetrics` is a list of `Series`: one metric of one device of one node over time. Azure jobs
get theirs from Azure Monitor (backends/azure/monitor.py: the workspace's per-node, per-GPU metrics),
local jobs from the sampler their supervisor runs (backends/local/sysmetrics.py: each rank's processes).
The metric names are dtrain's own, the same for both; `METRICS` says each one's unit and meaning.
Pure data and arithmetic: no backend, no I/O.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field


# dtrain's name -> (unit, what it is). Azure's names for each: backends/azure/monitor.py.
METRICS = {
    "gpu_util": ("%", "GPU utilization"),
    "gpu_mem": ("MB", "GPU memory used"),
    "gpu_mem_pct": ("%", "GPU memory used, of the device's"),
    "gpu_energy": ("J", "GPU energy"),
    "cpu_util": ("%", "CPU utilization (100 = one core, local; of the node, Azure)"),
    "mem_rss": ("MB", "resident memory of the rank's processes"),
    "ib_tx": ("MB", "InfiniBand sent"),
    "ib_rx": ("MB", "InfiniBand received"),
    "disk_used": ("MB", "disk used"),
}
CSV_HEADER = ("job", "node", "device", "metric", "unit", "timestamp", "value")


@dataclass
class Series:
    """One metric of one device (a GPU, a rank, or "" for the node itself) of one node, over time."""

    node: str
    device: str
    metric: str
    unit: str
    points: list = field(default_factory=list)     # [(timestamp ms, value)], oldest first

    def values(self) -> list:
        return [v for _, v in self.points if v is not None and math.isfinite(v)]

    def mean(self) -> float | None:
        vals = self.values()
        return sum(vals) / len(vals) if vals else None

    def last(self) -> float | None:
        vals = self.values()
        return vals[-1] if vals else None

    def to_dict(self) -> dict:
        return {"node": self.node, "device": self.device, "metric": self.metric, "unit": self.unit,
                "points": [{"timestamp": t, "value": v if v is None or math.isfinite(v) else None}
                           for t, v in self.points]}


@dataclass
class SysMetrics:
    """Everything known of how one job used its hardware. limits: metric -> the most one device can hold
    (gpu_mem: the GPU's MB; mem_rss: the machine's memory in MB), for "memory near the limit"."""

    job: str
    source: str                         # "local" (sampled) | "azure-monitor"
    series: list = field(default_factory=list)
    nodes: int = 1
    vm_size: str | None = None          # Azure: the compute's VM size (spec/vmsizes.py knows its GPUs and IB)
    limits: dict = field(default_factory=dict)
    naming: str | None = None           # Azure Monitor: "current" or "legacy" metric names answered

    def of(self, metric: str) -> list:
        return [s for s in self.series if s.metric == metric and s.points]

    def metrics(self) -> list:
        order = list(METRICS)
        return sorted({s.metric for s in self.series if s.points},
                      key=lambda m: (order.index(m) if m in order else len(order), m))

    def cells(self) -> list:
        """(node, device) pairs in order: the rows of `top`."""
        return sorted({(s.node, s.device) for s in self.series if s.points}, key=lambda nd: (_nat(nd[0]), _nat(nd[1])))

    def to_dict(self) -> dict:
        return {"job": self.job, "source": self.source, "nodes": self.nodes, "vm_size": self.vm_size,
                "limits": self.limits, "naming": self.naming,
                "series": [s.to_dict() for s in sorted(self.series, key=_order)]}



def _nat(text: str) -> list:
    import re

    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text or "")]


def _order(s: Series) -> tuple:
    return (_nat(s.node), _nat(s.device), s.metric)


def csv_text(sm: SysMetrics) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_HEADER)
    for s in sorted(sm.series, key=_order):
        for t, v in s.points:
            w.writerow((sm.job, s.node, s.device, s.metric, s.unit, t, "" if v is None else repr(float(v))))
    return buf.getvalue()


def merge(series: list) -> list:
    """Series with the same (node, device, metric) joined into one, points in time order."""
    by: dict = {}
    for s in series:
        key = (s.node, s.device, s.metric)
        if key in by:
            by[key].points.extend(s.points)
        else:
            by[key] = Series(s.node, s.device, s.metric, s.unit, list(s.points))
    for s in by.values():
        s.points.sort(key=lambda p: p[0])
    return list(by.values())


GPU_KEY = "dtrain.sys/gpu_util"      # watch's GPU column, kept among a job's latest metrics (follow.Polled)


def with_gpu_util(metrics: dict, latest: dict) -> dict:
    """Adds each job's latest GPU utilization (Backend.latest_sysmetrics: name -> {"gpu_util": (ms, %)})
    to the follower's latest metrics (name -> key -> MetricPoint) under GPU_KEY."""
    from .backends.base import MetricPoint

    for name, got in latest.items():
        tv = got.get("gpu_util")
        if tv:
            metrics.setdefault(name, {})[GPU_KEY] = MetricPoint(step=0, value=float(tv[1]), timestamp=int(tv[0]))
    return metrics
