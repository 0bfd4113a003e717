"""The arithmetic and rendering of `dtrain scale`: pure functions over the metric points the jobs
logged (no backend, no printing), so each is tested on its own.

Throughput of one run: the mean of the metric's points over the steady part of the run. Warm-up is
excluded in two ways: the first logged point always (the shipped scripts log it after one step, which
holds start-up: CUDA/NCCL or gloo set-up, the first allocation), and every point in the first
`warmup` fraction (default 20%) of the steps logged. When that leaves nothing (a very short run), the
points after the first are used; a run that logged one point uses it, marked as not steady.

Scaling efficiency of a run against the smallest run (fewest processes) is measured / ideal linear:
(throughput / processes) / (base throughput / base processes). 1.0 is linear scaling.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

WARMUP_FRACTION = 0.2
THRESHOLD = 0.8


@dataclass(frozen=True)
class Steady:
    mean: float
    points: int          # points the mean is over
    skipped: int         # warm-up points left out
    steady: bool         # False when the run was too short to leave any warm-up out


def steady_mean(points, warmup: float = WARMUP_FRACTION) -> Steady | None:
    """The mean value over the steady part of a metric's points (anything with .step and .value); None
    when there is no point."""
    pts = sorted(points, key=lambda p: (p.step, getattr(p, "timestamp", 0)))
    if not pts:
        return None
    if len(pts) == 1:
        return Steady(float(pts[0].value), 1, 0, False)
    first, last = pts[0].step, pts[-1].step
    cut = first + warmup * (last - first)
    kept = [p for p in pts[1:] if p.step > cut]
    if not kept:
        kept = pts[1:]
    return Steady(sum(float(p.value) for p in kept) / len(kept), len(kept), len(pts) - len(kept),
                  len(pts) - len(kept) >= 1)


@dataclass
class Row:
    nodes: int
    processes: int
    job: str
    status: str
    throughput: float | None = None
    throughput_per_process: float | None = None
    efficiency: float | None = None
    points: int = 0
    skipped: int = 0
    last_step: int | None = None
    cost: dict | None = None             # what the run cost (cost.job_cost: price x nodes x run time)

    def to_dict(self) -> dict:
        return asdict(self)


def rows(runs, warmup: float = WARMUP_FRACTION) -> list[Row]:
    """runs: (nodes, processes, job name, status, metric points) per run. One row per run, by node count,
    with its throughput, per process and efficiency against the run with the fewest processes that has
    a throughput."""
    out = []
    for nodes, procs, job, status, points in sorted(runs, key=lambda r: (r[0], r[1])):
        s = steady_mean(points, warmup)
        r = Row(nodes, procs, job, status)
        if s is not None:
            r.throughput, r.points, r.skipped = s.mean, s.points, s.skipped
            r.throughput_per_process = s.mean / procs if procs else None
            r.last_step = max(p.step for p in points)
        out.append(r)
    base = next((r for r in sorted(out, key=lambda r: r.processes) if r.throughput_per_process), None)
    if base is not None:
        for r in out:
            if r.throughput_per_process is not None and base.throughput_per_process:
                r.efficiency = r.throughput_per_process / base.throughput_per_process
    return out


def first_below(rs: list[Row], threshold: float = THRESHOLD) -> Row | None:
    """The smallest run whose efficiency is under the threshold, if any."""
    return next((r for r in rs if r.efficiency is not None and r.efficiency < threshold), None)


def verdict(rs: list[Row], threshold: float = THRESHOLD) -> str:
    """The one line that says where efficiency falls under the threshold (80%)."""
    measured = [r for r in rs if r.efficiency is not None]
    if len(measured) < 2:
        return "efficiency needs at least two runs with the metric"
    low = first_below(rs, threshold)
    pct = f"{threshold:.0%}"
    if low is None:
        top = measured[-1]
        return f"efficiency stays at or above {pct} up to {_nodes(top.nodes)} ({top.processes} processes)"
    ok = [r for r in measured if r.processes < low.processes and (r.efficiency or 0) >= threshold]
    upto = f"; last at or above it: {_nodes(ok[-1].nodes)}" if ok else ""
    return (f"efficiency falls under {pct} at {_nodes(low.nodes)} ({low.processes} processes: "
            f"{low.efficiency:.0%}){upto}")


def _nodes(n: int) -> str:
    return f"{n} node{'s' if n != 1 else ''}"


def _num(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def table(rs: list[Row], metric: str) -> list[str]:
    """The report as aligned text lines (a header, then one line per run)."""
    head = ["nodes", "processes", metric, f"{metric}/process", "efficiency", "points", "job"]
    body = [[str(r.nodes), str(r.processes), _num(r.throughput), _num(r.throughput_per_process),
             "-" if r.efficiency is None else f"{r.efficiency:.0%}",
             f"{r.points} (+{r.skipped} warm-up)" if r.points else "-",
             r.job + ("" if r.status == "Completed" else f" ({r.status})")] for r in rs]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    right = {0, 1, 2, 3, 4}
    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(head), *(line(b) for b in body)]


def plot(rs: list[Row], width: int = 40, threshold: float = THRESHOLD) -> list[str]:
    """Efficiency as horizontal bars, 100% (linear) = `width` characters, with the threshold marked `|`
    on each bar and the ideal at its end; a bar past 100% runs on past it."""
    lines = ["efficiency per run (█ measured, | at " + f"{threshold:.0%}" + ", ideal linear = full width)"]
    label_w = max([len(_nodes(r.nodes)) for r in rs] + [5])
    mark = round(threshold * width)
    for r in rs:
        if r.efficiency is None:
            lines.append(f"{_nodes(r.nodes).rjust(label_w)} |" + " " * width + "|   -")
            continue
        filled = max(0, round(r.efficiency * width))
        bar = ["█" if i < filled else " " for i in range(max(width, filled))]
        if mark < len(bar) and bar[mark] == " ":
            bar[mark] = "|"
        end = "".join(bar[:width]) + "|" + "".join(bar[width:])
        lines.append(f"{_nodes(r.nodes).rjust(label_w)} |{end} {r.efficiency:.0%}")
    return lines


def report(rs: list[Row], metric: str, warmup: float = WARMUP_FRACTION, threshold: float = THRESHOLD) -> dict:
    """What `dtrain scale --output json` prints."""
    low = first_below(rs, threshold)
    return {"metric": metric, "warmup_fraction": warmup, "threshold": threshold,
            "first_below_threshold": None if low is None else {"nodes": low.nodes, "processes": low.processes,
                                                               "efficiency": low.efficiency},
            "verdict": verdict(rs, threshold), "rows": [r.to_dict() for r in rs]}


# --- the study: a grid over node counts, run by the runner ---------------------------------------

def node_counts(text: str) -> list[int]:
    """--nodes 1,2,4: distinct counts of at least 1, in increasing order."""
    from .errors import UsageError

    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--nodes '{text}' is not a list of node counts", hint="write --nodes 1,2,4") from None
    if any(c < 1 for c in counts) or len(set(counts)) != len(counts):
        raise UsageError(f"--nodes '{text}': each count at least 1, each once", hint="write --nodes 1,2,4")
    return sorted(counts)


def study(spec_path: str, counts: list[int], *, sets=None, steps: int | None = None, name: str | None = None):
    """The grid a scaling study runs: the spec at each node count (processes per node unchanged), with
    --steps setting the spec's input `steps`. Validated like any grid before anything runs."""
    from . import grid
    from .errors import UsageError

    sets = list(sets or [])
    if steps is not None:
        from .spec.validate import load_spec

        base, _ = load_spec(spec_path, sets)     # its warnings are shown with the runs'
        if "steps" not in base.inputs:
            raise UsageError(f"--steps sets the input `steps`, and {spec_path} declares none",
                             hint="add `steps: 0` to its inputs and pass `--steps ${{inputs.steps}}` to the script "
                                  "(as the shipped templates do), or leave --steps out")
        sets.append(f"inputs.steps={steps}")
    return grid.build_grid(spec_path, sets, [f"resources.instance_count={','.join(map(str, counts))}"], name)


def measure(runner, g, final: dict, metric: str, warmup: float) -> list[Row]:
    """Each run's row, from the points of `metric` it logged (read through the runner)."""
    runs = []
    for m in g.members:
        points = runner.metrics(m.name, keys=[metric]).get(metric, [])
        runs.append((m.spec.instance_count, m.spec.process_count, m.name, final[m.name].status, points))
    out = rows(runs, warmup)
    from .cost import job_cost

    for r in out:                              # each run's cost, from its measured run time
        r.cost = job_cost(final[r.job]) if final[r.job].terminal else None
    return out


def missing_metric(rs: list[Row]) -> list[str]:
    """Runs that completed without logging the metric: the study measured nothing there."""
    return [r.job for r in rs if r.throughput is None and r.status == "Completed"]
