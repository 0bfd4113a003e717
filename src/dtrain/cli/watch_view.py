"""The table `dtrain watch` draws: one row per job (status, duration, nodes x processes, the latest
metric and samples/s, the last log line)."""
from __future__ import annotations

import sys

from ..output import PipeSafe

COLORS = {"Completed": "green", "Failed": "red", "Canceled": "yellow", "Running": "cyan"}


def table(infos, metric: str | None = None, latest: dict | None = None):
    from rich.table import Table

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
        t.add_column("GPU %", no_wrap=True, justify="right")     # Azure Monitor / the local sampler
    t.add_column("last line", no_wrap=True, max_width=80)   # cut by cut_for_terminal, never inside an escape
    for i in infos:
        t.add_row(*row(i, metric, (latest or {}).get(i.name) or {}))
    return t


def row(i, metric: str | None, latest: dict) -> list:
    """Every cell is a Text, never a str: rich would read `[rank0]` or `[/mnt/ckpt]` in a log line (or a
    tag, or a name) as markup. Log text is shown as it is."""
    from rich.text import Text

    from ..chain import attempt_label
    from ..grid_view import duration
    from ..metrics_view import watch_cells
    from ..sysmetrics import GPU_KEY
    from ..untrusted import cut_for_terminal, for_terminal, redact

    st = i.status + (" (timeout)" if i.timed_out else "")
    if i.chain:                          # a retry chain's row: which attempt it is on (docs/retries.md)
        st += ", " + attempt_label(i.chain)
    cells = [Text(i.name), Text(for_terminal(st), style=COLORS.get(i.status, "white")), Text(duration(i)),
             Text(f"{i.nodes} x {i.processes_per_node}")]
    if metric:
        cells += [Text(for_terminal(c)) for c in watch_cells(latest, metric)]
        gpu = latest.get(GPU_KEY)
        cells.append(Text(f"{gpu.value:.1f}" if gpu else "-"))
    return cells + [Text(cut_for_terminal(redact((i.last_line or "").strip()), 80))]


def console():
    from rich.console import Console

    # Piped output has no width: use a wide one rather than truncating names.
    out = PipeSafe(sys.stdout)            # a text stream that drops EPIPE (rich asks for an IO[str])
    return Console(file=out, width=None if sys.stdout.isatty() else 200,  # type: ignore[arg-type]
                   markup=False, emoji=False, highlight=False)
