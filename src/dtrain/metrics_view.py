"""How a job's metrics are shown: `dtrain metrics` (text, json, csv), the final values that end
`submit --wait`, and the columns of `watch`. Pure formatting: no backend, no terminal state.

The text plot is drawn here as plain characters (one `*` per cell a point falls in, axes of `|` and
`-`), so it reads the same with NO_COLOR, in a CI log and at 80 columns.
"""
from __future__ import annotations

import csv
import difflib
import io
import json
import math
import re

from .backends.base import MetricPoint

CSV_HEADER = ("job", "key", "step", "value", "timestamp")
_PER_RANK = re.compile(r"_rank\d+$")
THROUGHPUT = "samples_per_s"


def natural_key(key: str) -> list:
    """Sort key that compares digit runs as numbers: samples_per_s_rank2 before samples_per_s_rank10."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", key)]


def ordered(metrics: dict) -> list[tuple]:
    """metrics.items() in natural key order: the one order of the table, JSON and CSV."""
    return sorted(metrics.items(), key=lambda kv: natural_key(kv[0]))


def unknown_keys(keys, points: dict, every: dict) -> tuple[list[str], list[str]] | None:
    """For `metrics --key`: (the keys asked for with no point in `points`, every key the job logged, in
    natural order; `every` is all its metrics) when it logged others; None when every key was found or
    the job logged none at all (that is "no metrics", not a wrong key)."""
    logged = [k for k, pts in ordered(every) if pts]
    missing = [k for k in dict.fromkeys(keys or ()) if not points.get(k)]
    return (missing, logged) if missing and logged else None


def unknown_keys_message(name: str, missing: list[str], logged: list[str]) -> tuple[str, str]:
    """(message, hint) for keys a job never logged: a did-you-mean for each, then the keys that exist."""
    what = ", ".join(f"'{k}'" for k in missing)
    close = [m for k in missing for m in difflib.get_close_matches(k, logged, n=1, cutoff=0.6)]
    shown = ", ".join(logged[:12]) + (f", ... ({len(logged)} in all)" if len(logged) > 12 else "")
    hint = (f"did you mean {' or '.join(repr(c) for c in dict.fromkeys(close))}? " if close else "") \
        + f"{name} logged: {shown}"
    return f"{name}: no metric named {what}", hint


def json_safe(obj):
    """`obj` with every NaN and infinite float replaced by None (JSON null), in dicts, lists and tuples:
    JSON has no NaN or Infinity, and Python's json would write them as such (not JSON). Call it on any
    document holding metric values before printing it (`metrics -o json`, `submit --wait -o json`)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def to_json(job: str, metrics: dict) -> dict:
    """{"job": NAME, "metrics": {key: [{"step", "value", "timestamp"}, ...]}} (documented, stable); a NaN
    or infinite value is null (json_safe)."""
    return json_safe({"job": job, "metrics": {k: [p.to_dict() for p in pts] for k, pts in ordered(metrics)}})


def _json_number(v) -> str:
    """A value as json.dumps writes it; NaN and infinities as null (json_safe)."""
    v = float(v)
    return repr(v) if math.isfinite(v) else "null"


CHUNK = 5000          # points per piece of streamed output: memory stays flat whatever a job logged


def json_chunks(job: str, metrics: dict):
    """to_json's document as text, piece by piece: one point per line, never the whole document (or a dict
    per point) in memory at once."""
    yield '{"job": ' + json.dumps(job) + ', "metrics": {'
    for i, (key, pts) in enumerate(ordered(metrics)):
        yield ("," if i else "") + "\n  " + json.dumps(key) + ": ["
        for j in range(0, len(pts), CHUNK):
            yield ("," if j else "") + ",".join(
                f'\n    {{"step": {int(p.step)}, "value": {_json_number(p.value)}, "timestamp": {int(p.timestamp)}}}'
                for p in pts[j:j + CHUNK])
        yield "\n  ]" if pts else "]"
    yield "\n}}"


def csv_chunks(job: str, metrics: dict, header: bool = True):
    """csv_text, CHUNK rows at a time."""
    if header:
        yield ",".join(CSV_HEADER) + "\n"
    for key, pts in ordered(metrics):
        for j in range(0, len(pts), CHUNK):
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerows((job, key, p.step, repr(float(p.value)), p.timestamp) for p in pts[j:j + CHUNK])
            yield buf.getvalue()


def csv_text(job: str, metrics: dict, header: bool = True) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if header:
        w.writerow(CSV_HEADER)
    for key, pts in ordered(metrics):
        for p in pts:
            w.writerow((job, key, p.step, repr(float(p.value)), p.timestamp))
    return buf.getvalue()


def fmt(v: float) -> str:
    if v != v or v in (math.inf, -math.inf):
        return str(v)
    a = abs(v)
    if a >= 1e5 or (0 < a < 1e-3):
        return f"{v:.3e}"
    if a >= 100:
        return f"{v:.1f}"
    return f"{v:.4f}"


def summary(metrics: dict) -> list[tuple]:
    """(key, last, min, max, steps) per metric, keys in natural order. min and max leave NaN out (Python's min and
    max over NaN depend on the order); they are NaN only when every value is (nan_counts says how many)."""
    rows = []
    for key, pts in ordered(metrics):
        if not pts:
            continue
        vals = [p.value for p in pts if p.value == p.value] or [math.nan]
        rows.append((key, pts[-1].value, min(vals), max(vals), len({p.step for p in pts})))
    return rows


def nan_counts(metrics: dict) -> dict:
    """key -> how many NaN values it has (keys without any left out)."""
    out = {k: sum(1 for p in pts if p.value != p.value) for k, pts in ordered(metrics)}
    return {k: n for k, n in out.items() if n}


def final_values(metrics: dict) -> dict:
    """key -> the last point (highest step) of each metric."""
    return {k: pts[-1] for k, pts in ordered(metrics) if pts}


def final_line(metrics: dict) -> str | None:
    """`loss 0.0123, learning_rate 0.1000, samples_per_s 1234.5 (step 19)` for submit --wait: the job-wide
    metrics (per-rank keys are in `dtrain metrics`)."""
    last = {k: p for k, p in final_values(metrics).items() if not _PER_RANK.search(k)}
    if not last:
        return None
    step = max(p.step for p in last.values())
    return ", ".join(f"{k} {fmt(p.value)}" for k, p in last.items()) + f" (step {step})"


def plot(points: list[MetricPoint], width: int = 60, height: int = 10) -> list[str]:
    """A scatter of value over step on a character grid; y labels at the top and bottom, steps below."""
    pts = [p for p in points if p.value == p.value and abs(p.value) != math.inf]
    if not pts:
        return ["(no finite values)"]
    xs, ys = [p.step for p in pts], [p.value for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    grid = [[" "] * width for _ in range(height)]
    for x, y in zip(xs, ys):
        c = 0 if x1 == x0 else round((x - x0) / (x1 - x0) * (width - 1))
        r = height // 2 if y1 == y0 else round((y1 - y) / (y1 - y0) * (height - 1))
        grid[r][c] = "*"
    top, bottom = fmt(y1), fmt(y0)
    lw = max(len(top), len(bottom))
    lines = []
    for i, row in enumerate(grid):
        label = top if i == 0 else bottom if i == height - 1 else ""
        lines.append(f"{label.rjust(lw)} |{''.join(row)}")
    lines.append(" " * lw + " +" + "-" * width)
    left, right = f"step {x0}", str(x1)
    lines.append(" " * (lw + 2) + left + right.rjust(max(width - len(left), len(right) + 1)))
    return lines


def render_text(job: str, metrics: dict, keys=None, width: int = 80) -> str:
    """The summary table, then a plot of each chosen metric (the chosen keys; else loss, throughput
    and learning rate when logged; else every job-wide metric), at most `width` columns."""
    rows = summary(metrics)
    kw = max([len(r[0]) for r in rows] + [6])
    out = [f"{'metric'.ljust(kw)}  {'last':>10}  {'min':>10}  {'max':>10}  {'steps':>6}"]
    for key, last, lo, hi, steps in rows:
        out.append(f"{key.ljust(kw)}  {fmt(last):>10}  {fmt(lo):>10}  {fmt(hi):>10}  {steps:>6}")
    for key, n in nan_counts(metrics).items():
        out.append(f"({key}: {n} NaN value{'s' if n != 1 else ''} left out of min and max)")
    chosen = list(keys) if keys else [k for k in ("loss", THROUGHPUT, "learning_rate") if k in metrics]
    if not chosen:
        chosen = [k for k in sorted(metrics, key=natural_key) if not _PER_RANK.search(k)][:3]
    plot_w = max(20, min(width, 100) - 14)
    for key in chosen:
        if metrics.get(key):
            out += ["", f"{job}: {key}", *plot(metrics[key], width=plot_w)]
    return "\n".join(out)


def watch_cells(latest: dict, metric: str) -> tuple[str, str]:
    """(the chosen metric's latest value, throughput) for one job's row in watch, '-' when not logged."""
    m, t = latest.get(metric), latest.get(THROUGHPUT)
    return (fmt(m.value) if m else "-"), (fmt(t.value) if t else "-")
