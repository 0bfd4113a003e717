"""What `wait` and `submit --wait` print while jobs are followed (the runner's events), and how they end:
the final statuses, each failure, the CI summary and the exit code."""
from __future__ import annotations

import time

import typer

from .. import follow as fl
from ..exitcodes import ExitCode
from ..output import err, log_prefix, note, out_jsonl, out_log, shown
from ..status import exit_code, worst
from . import show
from .options import check_timeout, emit


class _Printer:
    """Renders one follow's events. submitted: the job submit --wait just sent (start-up progress, the
    closing summary and final metrics); None for `wait`."""

    def __init__(self, output: str, submitted, stream: bool):
        self.output, self.submitted = output, submitted
        self.shown: dict = {}       # name -> last status printed, so the final status is not printed twice
        self.progress = None
        if stream and submitted is not None:
            from ..progress import StartProgress

            self.progress = StartProgress(submitted)

    def event(self, ev) -> dict | None:
        """Print one event; the final infos when it is Ended."""
        if isinstance(ev, fl.Ended):
            return ev.infos
        if isinstance(ev, fl.StatusChanged):
            self.status(ev.info)
        elif isinstance(ev, fl.Quiet) and self.progress is not None:
            self.progress.tick()
        elif isinstance(ev, fl.LogReceived):
            self.log(ev)
        elif isinstance(ev, fl.NoLogs):
            from ..output import warning

            warning(f"{ev.error.message}; following its status without logs", ev.error.hint)
        return None

    def status(self, info) -> None:
        if self.progress is not None:
            self.progress.status(info)
        elif self.output != "json":
            self.shown[info.name] = info.status
            if self.output == "jsonl":
                out_jsonl({"event": "status", "job": info.name, "status": info.status})
            else:
                err(f"{info.name}: {shown(info.status)}" + (f" ({shown(info.waiting)})" if info.waiting else ""))

    def log(self, ev) -> None:
        if self.progress is not None and not self.progress.done:
            self.progress.first_output()
        line = ev.line
        if self.output == "jsonl":
            out_jsonl({"event": "log", "job": ev.job, "rank": line.rank, "node": line.node, "text": line.text})
        elif self.output == "text":
            out_log(log_prefix(line, 5), line.text)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.finish()

    def final(self, info) -> None:
        if self.output == "jsonl" and self.shown.get(info.name) != info.status:
            out_jsonl({"event": "status", "job": info.name, "status": info.status})
        elif self.output == "text" and (info.timed_out or (self.shown.get(info.name) != info.status
                                                           and self.submitted is None)):
            err(f"{info.name}: {info.status}" + (" (timed out: limits.timeout)" if info.timed_out else ""))
        if self.output == "text":
            show.attempts(info)
        show.failure(info)
        if self.output == "text":
            show.cost(info, f"{info.name}: cost ")


def follow_jobs(runner, names, *, output: str, timeout, stream: bool, submitted=None):
    """Print what following jobs yields, then exit by the worst outcome."""
    check_timeout(timeout)
    t0 = time.monotonic()
    p = _Printer(output, submitted, stream and len(names) == 1)
    final: dict = {}
    try:
        for ev in runner.follow(names, timeout=timeout, stream=stream, submitted=submitted):
            final = p.event(ev) or final
    except fl.WaitTimeout:
        p.stop()
        err(f"timed out after {timeout:g} s waiting; the job{'s keep' if len(names) > 1 else ' keeps'} running")
        note("re-attach with `dtrain wait " + " ".join(names) + "`")
        raise typer.Exit(ExitCode.TIMEOUT) from None
    except KeyboardInterrupt:
        p.stop()
        err(f"interrupted; the job{'s keep' if len(names) > 1 else ' keeps'} running")
        note("re-attach with `dtrain wait " + " ".join(names) + "`, stop "
             + ("them" if len(names) > 1 else "it") + " with `dtrain cancel " + names[0] + "`")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    p.stop()
    _ended(runner, p, list(final.values()), output, submitted, time.monotonic() - t0)


def _ended(runner, p: _Printer, infos: list, output: str, submitted, wall_s: float):
    from .. import ci

    from .why import show_top_cause, top_causes

    metrics = runner.final_metrics(infos[0].name) if submitted is not None else None
    causes = top_causes(runner, infos)
    ci.report(infos, metrics={infos[0].name: metrics} if metrics else None, causes=causes)
    if output == "json":
        if submitted is not None:
            from ..metrics_view import json_safe

            emit({**show.as_dict(infos[0]), "metrics": json_safe({k: pt.to_dict() for k, pt in (metrics or {}).items()})},
                 "json")
        else:
            emit([show.as_dict(i) for i in infos], "json")
    for info in infos:
        p.final(info)
        if info.name in causes:                   # failed, preempted or lost: why
            show_top_cause(info.name, causes[info.name])
    if submitted is not None:
        from ..metrics_view import final_line
        from ..progress import summary_line

        from .top import print_findings

        err(summary_line(infos[0], wall_s))
        print_findings(runner, infos[0])       # how the hardware was used (dtrain top); the metrics stay last
        last = final_line({k: [pt] for k, pt in (metrics or {}).items()})
        if last:
            err(f"{infos[0].name}: final metrics: {last}")
    raise typer.Exit(worst(exit_code(i) for i in infos))
