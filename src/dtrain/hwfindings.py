"""What a job's system metrics say is wrong (`dtrain top`, the end of `submit --wait`, `dtrain why`).

Pure functions over a SysMetrics (sysmetrics.py), each finding with its numbers and a hint:
- NCCL on sockets: a multi-node job of a VM size with InfiniBand whose IB traffic is about zero (NCCL
  fell back to TCP, Azure/azureml-examples#3561: the job runs, at a fraction of its speed);
- idle GPUs: every GPU below IDLE_PCT for most of the run;
- a straggler: one device (or every device of one node) far below the others (a slow GPU, a data
  loader bottleneck, a node that waits);
- memory near the limit: a GPU's memory, or a node's resident memory, close to what it has.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from .sysmetrics import SysMetrics

IDLE_PCT = 10.0          # a GPU below this is idle
MOST_OF_RUN = 0.8        # ... for this share of its samples
STRAGGLER_RATIO = 0.5    # a device below this share of the others' median is a straggler
BUSY_MEDIAN = 20.0       # ... when the others are busy at all
IB_ZERO_MB = 1.0         # IB traffic per node below this (MB over the run) is none
NEAR_LIMIT = 0.95        # memory at this share of the limit is near it
MIN_POINTS = 3           # fewer samples than this say nothing


@dataclass
class Finding:
    kind: str                     # nccl-sockets | idle-gpus | straggler | memory-near-limit
    message: str
    hint: str
    node: str | None = None
    device: str | None = None
    numbers: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _where(node, device) -> str:
    """`node X GPU 3` (Azure's DeviceId is the GPU's index), `node 1 rank2` (a local rank)."""
    if not device:
        return f"node {node}"
    return f"node {node} " + (f"GPU {device}" if str(device).isdigit() else str(device))


def nccl_on_sockets(sm: SysMetrics) -> list:
    from .spec.vmsizes import lookup

    size = lookup(sm.vm_size) if sm.vm_size else None
    ib = sm.of("ib_tx") + sm.of("ib_rx")
    if sm.nodes < 2 or size is None or not size.infiniband or not ib:
        return []
    if max(len(s.points) for s in ib) < MIN_POINTS:
        return []
    tx = sum(sum(s.values()) for s in sm.of("ib_tx"))
    rx = sum(sum(s.values()) for s in sm.of("ib_rx"))
    if tx + rx >= IB_ZERO_MB * sm.nodes:
        return []
    return [Finding("nccl-sockets",
                    f"{sm.nodes} nodes of {size.name}, a size with InfiniBand, sent {tx:.1f} MB and "
                    f"received {rx:.1f} MB over InfiniBand: NCCL is talking over TCP sockets",
                    "the job runs at a fraction of its speed; use an image with the InfiniBand drivers and NCCL's IB "
                    "support (Azure ML's ACPT / nvidia images), leave NCCL_IB_DISABLE unset, and look for "
                    "'NET/Socket' with NCCL_DEBUG=INFO (docs/monitoring.md)",
                    numbers={"nodes": sm.nodes, "ib_tx_mb": tx, "ib_rx_mb": rx, "vm_size": size.name})]


def _idle_share(values: list) -> float:
    return sum(1 for v in values if v < IDLE_PCT) / len(values) if values else 0.0


def idle_gpus(sm: SysMetrics) -> list:
    gpus = [s for s in sm.of("gpu_util") if len(s.values()) >= MIN_POINTS]
    if not gpus or not all(_idle_share(s.values()) >= MOST_OF_RUN for s in gpus):
        return []
    mean = statistics.fmean(v for s in gpus for v in s.values())
    return [Finding("idle-gpus",
                    f"all {len(gpus)} GPUs were below {IDLE_PCT:.0f}% for most of the run (mean {mean:.1f}%)",
                    "the job does not use its GPUs: check that the model and batches are moved to the GPU "
                    "(device='cuda'), that the framework sees them (CUDA_VISIBLE_DEVICES), and that the data "
                    "loader keeps up (num_workers, pin_memory)",
                    numbers={"gpus": len(gpus), "mean_pct": mean, "threshold_pct": IDLE_PCT})]


def stragglers(sm: SysMetrics) -> list:
    """Devices far below the median of all: by GPU utilization, else (no GPU: local CPU jobs) by CPU."""
    metric = "gpu_util" if sm.of("gpu_util") else "cpu_util"
    series = [s for s in sm.of(metric) if len(s.values()) >= MIN_POINTS]
    if len(series) < 2:
        return []
    means = {(s.node, s.device): s.mean() or 0.0 for s in series}
    median = statistics.median(means.values())
    if median < BUSY_MEDIAN:
        return []
    slow = {k: m for k, m in means.items() if m < STRAGGLER_RATIO * median}
    out = [_straggler(metric, node, None, m, median) for node, m in _slow_nodes(means, slow)]
    return out + [_straggler(metric, n, d, m, median) for (n, d), m in sorted(slow.items())]


def _slow_nodes(means: dict, slow: dict) -> list:
    """(node, mean) of each node of several whose every device is slow; their devices leave `slow`."""
    nodes = sorted({n for n, _ in means})
    out = []
    for node in nodes if len(nodes) > 1 else []:
        mine = [k for k in means if k[0] == node]
        if len(mine) > 1 and all(k in slow for k in mine):
            out.append((node, statistics.fmean(slow.pop(k) for k in mine)))
    return out


def _straggler(metric: str, node, device, mean: float, median: float) -> Finding:
    what = "GPU utilization" if metric == "gpu_util" else "CPU use"
    return Finding("straggler",
                   f"{_where(node, device)}: {what} {mean:.1f}% on average, the others' median {median:.1f}%",
                   "one device or node far below the others holds every step of a synchronous job back: a "
                   "failing or throttled GPU, a data loader bottleneck on that node, or uneven work per rank",
                   node=node, device=device, numbers={"mean_pct": mean, "median_pct": median, "metric": metric})


def memory_near_limit(sm: SysMetrics) -> list:
    out = []
    gpu_limit = float(sm.limits.get("gpu_mem") or 0.0)
    for s in sm.of("gpu_mem") if gpu_limit else []:
        peak = max(s.values(), default=0.0)
        if peak >= NEAR_LIMIT * gpu_limit:
            out.append(_memory(s.node, s.device, peak, gpu_limit, "MB"))
    for s in sm.of("gpu_mem_pct"):
        peak = max(s.values(), default=0.0)
        if peak >= NEAR_LIMIT * 100:
            out.append(_memory(s.node, s.device, peak, 100.0, "%"))
    node_limit = sm.limits.get("mem_rss")
    if node_limit:
        for node in sorted({s.node for s in sm.of("mem_rss")}):
            peak = _peak_sum([s for s in sm.of("mem_rss") if s.node == node])
            if peak >= NEAR_LIMIT * node_limit:
                out.append(_memory(node, None, peak, node_limit, "MB"))
    return out


def _peak_sum(series: list) -> float:
    """The highest total of several series at one time (points matched by their sample time)."""
    total: dict = {}
    for s in series:
        for t, v in s.points:
            if v is not None:
                total[t] = total.get(t, 0.0) + v
    return max(total.values(), default=0.0)


def _memory(node, device, peak: float, limit: float, unit: str) -> Finding:
    what = "GPU memory" if device and not str(device).startswith("rank") else "memory"
    return Finding("memory-near-limit",
                   f"{_where(node, device)}: {what} peaked at {peak:.0f} {unit} of {limit:.0f} {unit} "
                   f"({100 * peak / limit:.0f}%)",
                   "near the limit, one larger batch or a fragmented allocator runs out of memory: a smaller "
                   "batch, gradient accumulation or activation checkpointing leave room",
                   node=node, device=device, numbers={"peak": peak, "limit": limit, "unit": unit})


def findings(sm: SysMetrics | None) -> list:
    """Every finding, the most telling first."""
    if sm is None:
        return []
    return nccl_on_sockets(sm) + idle_gpus(sm) + stragglers(sm) + memory_near_limit(sm)
