"""Following jobs to the end, for any backend: wait for one or many, stream every rank's logs, and
turn the outcome into the exit-code contract."""
from __future__ import annotations

import queue
import threading
import time

from .backends.backoff import Backoff
from .backends.base import Backend, JobInfo
from .exitcodes import ExitCode, exit_code_for_status

# Worst last: `dtrain wait A B` exits with the worst outcome of all.
_SEVERITY = [ExitCode.OK, ExitCode.CANCELED, ExitCode.JOB_FAILED, ExitCode.TIMEOUT, ExitCode.INFRA,
             ExitCode.LOST]


def worst(codes) -> ExitCode:
    codes = list(codes) or [ExitCode.OK]
    return max(codes, key=lambda c: _SEVERITY.index(c) if c in _SEVERITY else len(_SEVERITY))


def outcome(info: JobInfo) -> ExitCode:
    if info.timed_out:
        return ExitCode.TIMEOUT
    return exit_code_for_status(info.status)


class WaitTimeout(Exception):
    def __init__(self, infos):
        self.infos = infos


def wait_all(backends: dict, timeout: float | None = None, on_change=None) -> dict:
    """Wait until every job is terminal. backends: name -> Backend. Returns name -> final JobInfo.
    on_change(info) is called on each status change. Raises WaitTimeout when `timeout` passes."""
    deadline = time.monotonic() + timeout if timeout else None
    last: dict = {}
    # Each backend says how often it is worth asking: a local state file is cheap, Azure is not.
    poll = Backoff(0.2, cap=min(getattr(b, "poll_cap_s", 5.0) for b in backends.values()))
    while True:
        pending = [n for n in backends if n not in last or not last[n].terminal]
        for name, info in _snapshot(backends, pending).items():
            if name not in last or last[name].status != info.status:
                poll.reset()
                if on_change:
                    on_change(info)
            last[name] = info
        if all(i.terminal for i in last.values()):
            return last
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeout(last)
        poll.sleep(deadline)


def _snapshot(backends: dict, names: list) -> dict:
    """Current JobInfo of each name: one status() call for a lone job, one list() call per backend for
    several (so the cost per poll does not grow with the number of jobs); a job seen ending is read
    once more with status() for its failure details."""
    by_backend: dict = {}
    for n in names:
        by_backend.setdefault(id(backends[n]), (backends[n], []))[1].append(n)
    out = {}
    for backend, ns in by_backend.values():
        if len(ns) == 1:
            out[ns[0]] = backend.status(ns[0])
            continue
        listed = {i.name: i for i in backend.list(names=ns)}
        for n in ns:
            info = listed.get(n)
            out[n] = backend.status(n) if info is None or info.terminal else info
    return out


def stream_until_done(backend: Backend, name: str, on_line, timeout: float | None = None,
                      rank: int | None = None, on_tick=None, tick_s: float = 1.0) -> JobInfo:
    """Stream every rank's lines while the job runs, drain what is left, return the final status.

    The log reader runs in a thread so that `timeout` holds even while a job prints nothing, and
    on_tick() (progress while nothing is printed) is called about every tick_s while no line comes.
    The queue between them is bounded: a fast log waits for the printer instead of piling up."""
    deadline = time.monotonic() + timeout if timeout else None
    q: queue.Queue = queue.Queue(maxsize=1_000)
    done = object()

    def pump():
        try:
            for line in backend.logs(name, follow=True, rank=rank):
                q.put(line)
        except BaseException as exc:  # handed to the caller's thread, raised there
            q.put(exc)
        finally:
            q.put(done)

    threading.Thread(target=pump, name=f"logs-{name}", daemon=True).start()
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise WaitTimeout({name: backend.status(name)})
        wait_s = remaining if on_tick is None else (tick_s if remaining is None else min(remaining, tick_s))
        try:
            item = q.get(timeout=wait_s)
        except queue.Empty:
            if on_tick is not None:
                on_tick()
            continue
        if item is done:
            break
        if isinstance(item, BaseException):
            raise item
        on_line(item)
    info = backend.status(name)
    if not info.terminal:  # logs ended early (e.g. no logs at all): keep waiting on status
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        info = wait_all({name: backend}, remaining)[name]
    return info
