"""What `submit --wait` says while a job starts (before its first log line), and the line it ends with.

A job takes 20-50 s to print anything (nodes allocated, images pulled, torch imported). On a terminal
one stderr line is rewritten in place with the phase and the time so far; elsewhere (CI logs) a line
per change of status, never a line per second. It ends with how long the start took.
"""
from __future__ import annotations

import sys
import time
from datetime import datetime, timezone

from .backends.base import JobInfo
from .timestamps import parse_time


def clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _shape(info: JobInfo) -> str:
    procs = info.nodes * info.processes_per_node
    return (f"{procs} process{'es' if procs != 1 else ''} on {info.nodes} node{'s' if info.nodes != 1 else ''}")


class StartProgress:
    """A renderer of follow's events: status() on each StatusChanged, tick() on each Quiet, first_output()
    on the first log line, finish() at the end. It asks no backend anything."""

    def __init__(self, info: JobInfo, *, stream=None, tty: bool | None = None):
        self.name, self.info = info.name, info
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.t0 = time.monotonic()
        self._status: str | None = None
        self._waiting: str | None = None
        self._drawn = False
        self.done = False
        self._change(info.status)

    def _phase(self) -> str:
        st = self._status
        if self.info.backend == "local" and st in ("Queued", "NotStarted", "Starting", "Running"):
            return f"starting {_shape(self.info)} ({st})"
        if st == "Running":
            return f"{st}: waiting for the first log line"
        if self.info.waiting:                  # why it is not running yet (backends/azure/capacity.py)
            from .output import shown

            return f"{st}: {shown(self.info.waiting, self.stream)}"
        return st or "submitted"

    def _write(self, text: str) -> None:
        from .output import _write

        _write(self.stream, text)

    def _draw(self) -> None:
        if self.tty:
            self._write(f"\r\033[K{self.name}: {self._phase()}  {clock(time.monotonic() - self.t0)}")
            self._drawn = True

    def _change(self, status: str) -> None:
        if (status, self.info.waiting) == (self._status, self._waiting):
            return
        self._status, self._waiting = status, self.info.waiting
        if self.tty:
            self._draw()
        else:
            self._write(f"{self.name}: {self._phase()} after {time.monotonic() - self.t0:.0f} s\n")

    def status(self, info: JobInfo) -> None:
        if not self.done:
            self.info = info
            self._change(info.status)

    def tick(self) -> None:
        if not self.done:
            self._draw()

    def first_output(self, why: str = "first log line") -> None:
        """Stop: print how long the start took (once)."""
        if self.done:
            return
        self.done = True
        took = time.monotonic() - self.t0
        prefix = "\r\033[K" if self._drawn else ""
        self._write(f"{prefix}{self.name}: {why} after {took:.1f} s\n")


    def finish(self) -> None:
        """The job ended before any output: clear the in-place line."""
        if not self.done and self._drawn:
            self._write("\r\033[K")
        self.done = True


def since_submit(info: JobInfo, followed_s: float, now: datetime | None = None) -> float:
    """Seconds from the job's submit to now: a re-attached follow (the same submit run again) counts from
    when the job was created, not from when this command started following it."""
    created = parse_time(info.created)
    if created is None:
        return followed_s
    now = now or datetime.now(timezone.utc)
    now = now if now.tzinfo else now.replace(tzinfo=timezone.utc)
    return max(followed_s, (now - created).total_seconds())


def summary_line(info: JobInfo, wall_s: float) -> str:
    """`submit --wait`'s last line: outcome, wall time since submit, shape, and where the logs are."""
    wall_s = since_submit(info, wall_s)
    status = info.status + (" (timed out)" if info.timed_out else "")
    ran = ""
    started, ended = parse_time(info.started), parse_time(info.ended)
    if started and ended:
        ran = f", ran {clock(max((ended - started).total_seconds(), 0))}"
    if info.backend == "local" and info.url:
        where = f"logs in {info.url.rstrip('/')}/user_logs"
    elif info.url:
        where = f"logs in Azure ML studio: {info.url}"
    else:
        where = f"logs: dtrain logs {info.name}"
    return (f"{info.name}: {status} in {clock(wall_s)}{ran}; {info.nodes} node{'s' if info.nodes != 1 else ''}"
            f" x {info.processes_per_node} process{'es' if info.processes_per_node != 1 else ''}; {where}")
