"""The one follower: one loop and one family of events for everything that follows jobs to their end:
`wait`, `submit --wait` (with every rank's log lines), grids (`submit --matrix`, `scale`), `watch`, and
retry chains.

The loop reads the jobs still running (one list call per backend per poll, whatever their number),
yields what changed, submits what is pending while there is room (grids: at most K in flight), and
drives retry chains as an explicit step: a chain between attempts is advanced (decide, then submit) by
the runner here, never as a side effect of reading its status. It prints nothing: the CLI renders the
events, and a program can consume them (docs/python-api.md).
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterator, Union

from .backends.backoff import Backoff
from .backends.base import JobInfo, LogLine
from .errors import BackendError, LogsUnavailable
from .status import JobStatus

if TYPE_CHECKING:
    from .runner import Runner

SUBMIT_TRIES = 6      # a submit the service throttles or fails is asked again this many times in all


class WaitTimeout(Exception):
    """`timeout` passed before every job ended; infos: the jobs as last seen (they keep running)."""

    def __init__(self, infos):
        super().__init__("timed out")
        self.infos = infos


# --- the events ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Submitted:
    info: JobInfo
    member: Any = None          # the grid member (grid.Member) it was submitted for, if any


@dataclass(frozen=True)
class Retrying:
    """A submit failed on the service's side (throttling past the SDK's own retries, 5xx): waiting and
    asking again under the same name, which never starts a job twice."""
    name: str
    delay_s: float
    reason: str
    member: Any = None


@dataclass(frozen=True)
class StatusChanged:
    """A job was seen for the first time, or its status changed."""
    info: JobInfo


@dataclass(frozen=True)
class Polled:
    """One poll is done: name -> JobInfo of every job seen so far, and (when asked for) name -> key ->
    the latest point of each metric it logged (one batched read per backend)."""
    infos: dict
    metrics: dict = field(default_factory=dict)


@dataclass(frozen=True)
class LogReceived:
    job: str
    line: LogLine


@dataclass(frozen=True)
class NoLogs:
    """The job's logs cannot be read (errors.LogsUnavailable): said once, then its status is followed."""
    job: str
    error: LogsUnavailable


@dataclass(frozen=True)
class Quiet:
    """No log line for a tick (about a second): a progress display redraws its clock."""
    job: str


@dataclass(frozen=True)
class Ended:
    """Every followed job is terminal (without wait: every pending job is submitted): name -> its
    JobInfo. Always the last event."""
    infos: dict
    metrics: dict = field(default_factory=dict)


Event = Union[Submitted, Retrying, StatusChanged, Polled, LogReceived, NoLogs, Quiet, Ended]


@dataclass
class Pending:
    """A job to submit: its planned name, the plan, and what it stands for (a grid member)."""
    name: str
    plan: Any
    member: Any = None
    resume_hint: str | None = None  # what to do when the service keeps refusing it


@dataclass
class Options:
    """How the loop follows. read(names) -> name -> JobInfo (default: the runner's snapshot); drive:
    advance retry chains; metrics: also read each job's latest metrics on each poll, at most every
    metrics_every seconds (and at the end)."""
    wait: bool = True
    timeout: float | None = None
    max_parallel: int | None = None
    drive: bool = True
    read: Callable[[list], dict] | None = None
    first_poll: float = 0.2
    cap: float | None = None
    metrics: bool = False
    metrics_every: float = 2.0
    sysmetrics: bool = False        # with metrics: each job's latest GPU utilization too (watch's column)
    initial: dict | None = None     # name -> JobInfo already read: shown first, read again after a poll interval
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic


# --- the loop -----------------------------------------------------------------------------------

class _Loop:
    def __init__(self, runner: "Runner", names, pending, opts: Options):
        self.runner, self.opts = runner, opts
        self.watched = list(names)
        self.queue = list(pending)
        self.limit = opts.max_parallel or max(1, len(self.queue))
        self.infos: dict = dict(opts.initial or {})
        self.metrics: dict = {}
        self.metrics_at: float | None = None
        self.metrics_fresh = False      # read on this pass already: the end needs no read of its own
        self.deadline = opts.clock() + opts.timeout if opts.timeout else None
        self.read = opts.read or runner.snapshot
        cap = opts.cap if opts.cap is not None else runner.poll_cap(self.watched, [p.plan for p in self.queue])
        self.poll = Backoff(opts.first_poll, cap=cap)

    def active(self) -> list:
        return [n for n in self.watched if n not in self.infos or not self.infos[n].terminal]

    def read_active(self) -> Iterator[Event]:
        active = self.active()
        if not active:
            return
        for name, info in self.read(active).items():
            if self.opts.drive and (info.status == JobStatus.RETRYING or _chain_ended_badly(info)):
                info = self.runner.advance(name)      # decide, then submit the next attempt when due
            changed = name not in self.infos or (self.infos[name].status, self.infos[name].waiting) != (
                info.status, info.waiting)                # a new reason why it waits is news too
            self.infos[name] = info
            if changed:
                self.poll.reset()
                yield StatusChanged(info)
        self.read_metrics(final=False)
        yield Polled(dict(self.infos), dict(self.metrics))

    def read_metrics(self, final: bool) -> None:
        now = self.opts.clock()
        if not self.opts.metrics or not self.infos or (final and self.metrics_fresh):
            return
        if not final and self.metrics_at is not None and now - self.metrics_at < self.opts.metrics_every:
            return
        self.metrics_at, self.metrics_fresh = now, True
        self.metrics.update(self.runner.latest_metrics(list(self.infos.values())))
        if self.opts.sysmetrics:
            from .sysmetrics import with_gpu_util

            with_gpu_util(self.metrics, self.runner.latest_sysmetrics(list(self.infos.values())))

    def submit_room(self) -> Generator[Event, None, bool]:
        """Submit pending jobs while fewer than max_parallel are not yet ended; returns whether any was."""
        progressed = False
        while self.queue and len([n for n in self.active() if n in self.infos]) < self.limit:
            p = self.queue.pop(0)
            info = yield from submit_patiently(self.runner, p, self.opts.sleep)
            self.infos[p.name] = info
            self.watched.append(p.name)
            progressed = True
            yield Submitted(info, p.member)
        return progressed

    def done(self) -> bool:
        if self.queue:
            return False
        return not self.opts.wait or all(n in self.infos and self.infos[n].terminal for n in self.watched)

    def run(self) -> Iterator[Event]:
        fresh = bool(self.infos)              # Options.initial: shown as if just read
        for info in self.infos.values():
            yield StatusChanged(info)
        while True:
            self.metrics_fresh = False
            if fresh:
                self.read_metrics(final=False)
                yield Polled(dict(self.infos), dict(self.metrics))
                fresh = False
            else:
                yield from self.read_active()
            progressed = yield from self.submit_room()
            if self.done():
                self.read_metrics(final=True)
                yield Ended(dict(self.infos), dict(self.metrics))
                return
            if self.deadline is not None and self.opts.clock() >= self.deadline:
                raise WaitTimeout(dict(self.infos))
            delay = self.poll.next(progressed)
            if self.deadline is not None:
                delay = max(0.0, min(delay, self.deadline - self.opts.clock()))
            self.opts.sleep(delay)


def follow(runner: "Runner", names=(), *, pending=(), options: Options | None = None) -> Iterator[Event]:
    """Follow `names` (and the `pending` jobs, submitted as room allows) until every one has ended: a
    StatusChanged per change, a Polled per poll, Submitted/Retrying per submit, then Ended. WaitTimeout
    when options.timeout passes first."""
    return _Loop(runner, names, pending, options or Options()).run()


def wait_all(runner: "Runner", names, timeout: float | None = None) -> dict:
    """follow without the events: name -> final JobInfo."""
    for event in follow(runner, names, options=Options(timeout=timeout)):
        if isinstance(event, Ended):
            return event.infos
    raise AssertionError("follow ends with Ended")  # pragma: no cover


def submit_patiently(runner: "Runner", p: Pending, sleep) -> Generator[Event, None, JobInfo]:
    """Submit, asking again after a back-off while the service fails or throttles past the SDK's own
    retries (BackendError, exit 5); yields a Retrying per wait and returns the JobInfo. The name is fixed
    and each try first looks the job up, so a job is never started twice."""
    backoff = Backoff(2.0, cap=30.0, factor=2.0)
    for attempt in range(SUBMIT_TRIES):
        try:
            return runner.submit_plan(p.plan)
        except BackendError as exc:
            if attempt + 1 == SUBMIT_TRIES:
                raise BackendError(f"{exc.message} (job {p.name}, after {SUBMIT_TRIES} tries)",
                                   hint=p.resume_hint or exc.hint) from exc
            yield Retrying(p.name, backoff.delay, exc.message, p.member)
            sleep(backoff.delay)
            backoff.next(False)
    raise AssertionError("unreachable")  # pragma: no cover


# --- one job with its log lines -----------------------------------------------------------------

def stream(runner: "Runner", name: str, timeout: float | None = None, rank: int | None = None,
           tick_s: float = 1.0, start_poll_s: float = 3.0, first: JobInfo | None = None) -> Iterator[Event]:
    """Every rank's lines while the job runs (LogReceived), what is left drained, then Ended.

    While no line comes, a Quiet event about every tick_s and the status read at most every start_poll_s
    (StatusChanged when it moves: a job takes 20-50 s to print anything); a retry chain between attempts
    is advanced there too. `first` is the status already known (submit's). The log reader runs in a
    thread so that `timeout` holds even while a job prints nothing; the queue between them is bounded,
    so a fast log waits for the reader of the events instead of piling up."""
    deadline = time.monotonic() + timeout if timeout else None
    lines = _pump(runner, name, rank, tick_s)
    status = (first.status, first.waiting) if first is not None else None
    chain = bool(first is not None and first.chain)
    polled = time.monotonic()
    started = False
    for item in lines:
        if isinstance(item, LogsUnavailable):   # the job runs on: its status is followed below
            yield NoLogs(name, item)
            break
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeout({name: runner.status(name)})
        if item is not None:
            started = True
            yield LogReceived(name, item)
            continue
        if (not started or chain) and time.monotonic() - polled >= start_poll_s:
            polled = time.monotonic()
            info = _status_or_none(runner, name)
            if info is not None:
                chain = chain or bool(info.chain)
                if info.status == JobStatus.RETRYING:
                    info = runner.advance(name)
                if (info.status, info.waiting) != status:
                    status = (info.status, info.waiting)
                    yield StatusChanged(info)
        yield Quiet(name)
    info = runner.status(name)
    if not info.terminal:  # logs ended early (e.g. no logs at all): keep waiting on status
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        info = wait_all(runner, [name], remaining)[name]
    elif _chain_ended_badly(info):
        info = runner.advance(name)
    yield Ended({name: info})


def _chain_ended_badly(info: JobInfo) -> bool:
    """A retry chain whose last attempt ended other than Completed: the follower's last step for it records
    that attempt's cause (retry_causes.py) as it does for the attempts it retried; once, as an ended job is
    not read again."""
    return bool(info.chain) and info.terminal and info.status != JobStatus.COMPLETED


def _pump(runner: "Runner", name: str, rank: int | None,
          tick_s: float = 1.0) -> Iterator[LogLine | LogsUnavailable | None]:
    """The job's log lines as they come, and None after each tick without one."""
    q: queue.Queue = queue.Queue(maxsize=1_000)
    done = object()

    def pump():
        try:
            for line in runner.logs(name, follow=True, rank=rank):
                q.put(line)
        except BaseException as exc:  # handed to the caller's thread, raised there
            q.put(exc)
        finally:
            q.put(done)

    threading.Thread(target=pump, name=f"logs-{name}", daemon=True).start()
    while True:
        try:
            item = q.get(timeout=tick_s)
        except queue.Empty:
            yield None
            continue
        if item is done:
            return
        if isinstance(item, LogsUnavailable):
            yield item
            return
        if isinstance(item, BaseException):
            raise item
        yield item


def _status_or_none(runner: "Runner", name: str) -> JobInfo | None:
    try:
        return runner.status(name)
    except Exception:  # noqa: BLE001 - a progress line is not worth failing the follow for
        return None
