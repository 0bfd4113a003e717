"""Following jobs to the end, for any backend: wait for one or many, stream every rank's logs, and
turn the outcome into the exit-code contract."""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Iterator, Union

from .backends.backoff import Backoff
from .backends.base import Backend, JobInfo, LogLine
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


# --- what following jobs yields: the CLI prints these, tests assert on them --------------------

@dataclass(frozen=True)
class StatusChanged:
    """A job was seen for the first time, or its status changed."""
    info: JobInfo


@dataclass(frozen=True)
class LogReceived:
    job: str
    line: LogLine


@dataclass(frozen=True)
class Quiet:
    """No log line for a tick (about a second): a progress display redraws its clock."""
    job: str


@dataclass(frozen=True)
class Ended:
    """Every followed job is terminal: name -> its final JobInfo. Always the last event."""
    infos: dict


Event = Union[StatusChanged, LogReceived, Quiet, Ended]


def wait_events(backends: dict, timeout: float | None = None) -> Iterator[Event]:
    """Wait until every job is terminal. backends: name -> Backend. Yields StatusChanged on each change,
    then Ended. Raises WaitTimeout when `timeout` passes."""
    deadline = time.monotonic() + timeout if timeout else None
    last: dict = {}
    # Each backend says how often it is worth asking: a local state file is cheap, Azure is not.
    poll = Backoff(0.2, cap=min(getattr(b, "poll_cap_s", 5.0) for b in backends.values()))
    while True:
        pending = [n for n in backends if n not in last or not last[n].terminal]
        for name, info in _snapshot(backends, pending).items():
            changed = name not in last or last[name].status != info.status
            last[name] = info
            if changed:
                poll.reset()
                yield StatusChanged(info)
        if all(i.terminal for i in last.values()):
            yield Ended(dict(last))
            return
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeout(last)
        poll.sleep(deadline)


def wait_all(backends: dict, timeout: float | None = None) -> dict:
    """wait_events without the events: name -> final JobInfo."""
    for event in wait_events(backends, timeout):
        if isinstance(event, Ended):
            return event.infos
    raise AssertionError("wait_events ends with Ended")  # pragma: no cover


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


def stream_events(backend: Backend, name: str, timeout: float | None = None, rank: int | None = None,
                  tick_s: float = 1.0, start_poll_s: float = 3.0, first: JobInfo | None = None) -> Iterator[Event]:
    """Every rank's lines while the job runs (LogReceived), what is left drained, then Ended.

    Until the first line comes, a Quiet event about every tick_s and the status asked at most every
    start_poll_s (StatusChanged when it moves: a job takes 20-50 s to print anything); `first` is the
    status already known (submit's). The log reader runs in a thread so that `timeout` holds even while
    a job prints nothing. The queue between them is bounded: a fast log waits for the reader of the
    events instead of piling up."""
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
    status = first.status if first is not None else None
    polled = time.monotonic()
    started = False
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise WaitTimeout({name: backend.status(name)})
        try:
            item = q.get(timeout=tick_s if remaining is None else min(remaining, tick_s))
        except queue.Empty:
            if not started:
                if time.monotonic() - polled >= start_poll_s:
                    polled = time.monotonic()
                    info = _status_or_none(backend, name)
                    if info is not None and info.status != status:
                        status = info.status
                        yield StatusChanged(info)
                yield Quiet(name)
            continue
        if item is done:
            break
        if isinstance(item, BaseException):
            raise item
        started = True
        yield LogReceived(name, item)
    info = backend.status(name)
    if not info.terminal:  # logs ended early (e.g. no logs at all): keep waiting on status
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        info = wait_all({name: backend}, remaining)[name]
    yield Ended({name: info})


def _status_or_none(backend: Backend, name: str) -> JobInfo | None:
    try:
        return backend.status(name)
    except Exception:  # noqa: BLE001 - a progress line is not worth failing the follow for
        return None
