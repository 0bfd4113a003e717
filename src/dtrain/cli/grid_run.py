"""What running a grid prints (submit --matrix, scale): names (or JSON) as jobs are submitted; with --wait
a live table on a terminal (else a line per change) on stderr, then the final table on stdout, each
failure, the CI summary."""
from __future__ import annotations

import sys

import typer

from .. import follow as fl
from ..exitcodes import ExitCode
from ..output import err, note, out, out_json, out_jsonl
from . import show


class GridPrinter:
    def __init__(self, g, *, wait: bool, output: str, stream_status: bool, metric_key: str | None):
        self.g, self.wait, self.output, self.stream_status = g, wait, output, stream_status
        self.metric_key = metric_key
        self.infos: dict = {}
        self.metrics: dict = {}
        self.live = None
        if wait and output == "text" and stream_status and sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            from ..output import PipeSafe

            console = Console(file=PipeSafe(sys.stderr), markup=False, emoji=False, highlight=False)  # type: ignore[arg-type]  # a stream
            self.live = Live(console=console, refresh_per_second=4, transient=True)
            self.live.start()

    def event(self, ev) -> None:
        if isinstance(ev, fl.Submitted):
            self.infos[ev.info.name] = ev.info
            self._submitted(ev)
        elif isinstance(ev, fl.Retrying):
            if self.output == "jsonl":
                out_jsonl({"event": "retrying", "job": ev.name, "delay_s": ev.delay_s, "reason": ev.reason})
            else:
                note(f"{ev.name}: {ev.reason}; asking again in {ev.delay_s:g} s")
        elif isinstance(ev, fl.StatusChanged):
            self.infos[ev.info.name] = ev.info
            if self.output == "jsonl":
                out_jsonl({"event": "status", "job": ev.info.name, "status": ev.info.status})
            elif self.output == "text" and self.live is None and self.stream_status:
                err(f"{ev.info.name}: {ev.info.status}")
        elif isinstance(ev, (fl.Polled, fl.Ended)):
            self.infos.update(ev.infos)
            k = self.metric_key          # the grid shows one metric: name -> its latest point
            self.metrics = {n: pts[k] for n, pts in ev.metrics.items() if k and pts.get(k) is not None}
        if self.live is not None:
            from ..grid_view import rich_table

            self.live.update(rich_table(self.g, self.infos, self.key, self.metrics))

    def _submitted(self, ev) -> None:
        combo = ev.member.combination
        if self.output == "jsonl":
            out_jsonl({"event": "submitted", "job": ev.info.name, "status": ev.info.status, "group": self.g.group,
                       "combination": combo})
        elif self.output == "text" and not self.wait:
            out(ev.info.name)
        elif self.output == "text" and self.live is None and self.stream_status:
            err(f"{ev.info.name}: {ev.info.status} ({', '.join(f'{p}={v}' for p, v in combo.items())})")

    @property
    def key(self):
        """The metric column, once any job has logged the metric."""
        return self.metric_key if self.metrics else None

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()

    def final(self) -> None:
        from .. import grid_view

        g, infos, key, metrics = self.g, self.infos, self.key, self.metrics
        if self.output == "json":
            out_json(grid_view.json_rows(g, infos, key, metrics))
        elif self.output == "jsonl" and self.wait:
            for row in grid_view.json_rows(g, infos, key, metrics):
                out_jsonl({"event": "end", **row})
        elif self.output == "text" and self.wait:
            for line in grid_view.text_lines(g, infos, key, metrics):
                out(line)


def run_grid(r, g, *, local: bool, wait: bool, output: str, timeout, max_parallel, inputs, tags=None,
             metric_key: str | None = "loss", stream_status: bool = True, show_final: bool = True) -> dict:
    """Run a grid through the runner, printing its events; name -> final JobInfo."""
    p = GridPrinter(g, wait=wait, output=output, stream_status=stream_status, metric_key=metric_key)
    try:
        for ev in r.run_grid(g, local=local, max_parallel=max_parallel, wait=wait, input_paths=inputs, tags=tags,
                             timeout=timeout, metric=metric_key if wait else None):
            p.event(ev)
    except fl.WaitTimeout as exc:
        p.stop()
        p.infos.update(exc.infos)
        err(f"timed out after {timeout:g} s waiting; the jobs keep running")
        note(f"re-attach with the same command and --name {g.group} (it submits nothing twice)")
        raise typer.Exit(ExitCode.TIMEOUT) from None
    except KeyboardInterrupt:
        p.stop()
        err("interrupted; the jobs submitted keep running")
        note(f"re-attach (and submit the rest) with the same command and --name {g.group}; "
             f"`dtrain list --tag dtrain.group={g.group}` lists them")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    p.stop()
    if show_final:
        p.final()
    if wait:
        _ended(p)
    return p.infos


def _ended(p: GridPrinter) -> None:
    from .. import ci, grid_view

    members = [p.infos[m.name] for m in p.g.members]
    for info in members:
        if info.failure and p.output != "json":
            err(f"{info.name}:")
            show.failure(info)
    if p.output == "text":
        show.total_cost(members)              # each combination's cost: -o json and the CI summary
    key = p.key
    ci.report(members, columns=grid_view.markdown_columns(p.g),
              metrics={n: {key: pt} for n, pt in p.metrics.items()} if key else None)
