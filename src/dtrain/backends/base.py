"""The one small protocol every backend implements: plan, submit, status, logs, cancel (and list).

A plan is a value: building one has no side effects, so `dtrain render` can print it and tests can
assert on it. Only submit() acts. Backend is an abstract base: the six core methods are abstract, the
optional abilities (metrics, stop, where a job lives) have defaults, so the runner never probes a
backend with getattr and a test's fake backend is a short subclass (registered with
backends.register_backend).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator, List, Protocol, runtime_checkable

from ..spec.model import JobSpec
from ..status import is_terminal


@dataclass(frozen=True)
class Notice:
    """Something a backend has to tell the user. Backends never print (tests/test_walls.py): they hand
    notices to the `notify` callable they were given, and the CLI prints them."""

    text: str
    verbatim: bool = False    # text another program printed (the SDK), passed on as it is; else a note


Notify = Callable[[Notice], None]


@dataclass
class SubmitOptions:
    name: str | None = None                 # --name: the job name (idempotency key on Azure)
    experiment_name: str | None = None
    input_paths: dict = field(default_factory=dict)   # --input NAME=PATH: local stand-ins for remote inputs
    tags: dict = field(default_factory=dict)
    python: str | None = None               # --python: the interpreter a local job's `python` is
    preempt_after_s: float | None = None    # --preempt-after: the local eviction drill (local/eviction.py)
    host_python: bool = False               # --host-python: a local job runs on the host's python, not in
                                            # the environment built from its conda file


@dataclass
class FailureInfo:
    """Why a job failed, in the few lines a user needs before the exit code."""

    message: str
    rank: int | None = None
    node: int | None = None
    exit_code: int | None = None
    last_lines: list = field(default_factory=list)
    traceback: list = field(default_factory=list)


@dataclass
class JobInfo:
    """A snapshot of one job, the same shape for local and Azure jobs."""

    name: str
    backend: str                          # "local" | "azureml"
    status: str
    display_name: str | None = None
    experiment_name: str | None = None
    created: str | None = None            # ISO 8601, UTC
    started: str | None = None
    ended: str | None = None
    nodes: int = 1
    processes_per_node: int = 1
    url: str | None = None                # Studio URL, or the local job folder
    tags: dict = field(default_factory=dict)
    failure: FailureInfo | None = None
    timed_out: bool = False               # ended by limits.timeout (exit 4, whatever the status)
    last_line: str | None = None          # newest log line, where a backend has it cheaply (watch)
    ports: dict | None = None             # local jobs: the ports the processes got, by use (MASTER_PORT, ...)
    chain: dict | None = None             # a retry chain shown as one job (chain.py): policy, attempts, next
    description: str | None = None
    archived: bool = False                # hidden from `dtrain list` unless --include-archived (az ml's archive)
    services: dict | None = None          # interactive services (TensorBoard, SSH, ...): name -> type, endpoint, status
    instance_type: str | None = None      # resources.instance_type, where known (dtrain why: InfiniBand sizes)
    waiting: str | None = None            # why a Queued/Preparing job is not running yet, where the backend knows
    region: str | None = None             # the Azure region it runs in, where known (its price is the region's)

    @property
    def terminal(self) -> bool:
        return is_terminal(self.status)

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["services"] is None:
            del d["services"]                 # only a job with interactive services has them
        if d["chain"] is None:
            del d["chain"]                    # only a chain's JSON has it, with its attempts at the top too
        else:
            d["attempts"] = d["chain"]["attempts"]
        return d


@dataclass(frozen=True)
class LogLine:
    text: str                 # without the trailing newline
    rank: int | None = None   # global rank (process index) the line came from
    node: int | None = None
    source: str = ""          # file name in Azure's layout, e.g. user_logs/std_log_process_01.txt


@dataclass
class RankLog:
    """One rank's log as `dtrain why` reads it (dtrain.diagnose): its lines, an iterator read once, and how
    its process ended where the backend knows (local jobs: state.json)."""

    rank: int | None
    node: int | None
    source: str                       # the file, as evidence names it
    lines: Iterable[str] = ()
    exit_code: int | None = None
    signal: str | None = None         # e.g. "SIGKILL"


def _texts(log: RankLog, lines: Iterator[LogLine]) -> Iterator[str]:
    """A rank's LogLines as text; the first one tells the file and node it came from."""
    first = True
    for line in lines:
        if first:
            first = False
            log.source = line.source or log.source
            log.node = line.node if line.node is not None else log.node
        yield line.text


@dataclass(frozen=True, slots=True)   # slots: a job may log a million points; each costs ~60% less
class MetricPoint:
    """One value of a metric, as MLflow records it (Azure ML records a job's metrics through MLflow)."""

    step: int
    value: float
    timestamp: int            # ms since the epoch

    def to_dict(self) -> dict:
        return {"step": self.step, "value": self.value, "timestamp": self.timestamp}


Metrics = dict  # key -> [MetricPoint], every point of each metric, in step order (then time)


def sort_points(points) -> list:
    return sorted(points, key=lambda p: (p.step, p.timestamp))


class MetricsReader(Protocol):
    """Follows one job's metrics: each poll() returns only the points it has not returned before
    (key -> new points, in step order); `points` holds everything read so far."""

    points: dict

    def poll(self) -> dict: ...


@runtime_checkable
class Plan(Protocol):
    backend: str              # the registered kind that planned it (and submits it)
    name: str                 # the job name (a placeholder where submit generates one)
    tags: dict                # the job's tags (a grid member's carry dtrain.group)
    notes: list               # what the user should know before it runs (shown by submit)

    def to_dict(self) -> dict: ...


class PollingReader:
    """The default MetricsReader: each poll reads every point again and returns those not seen before.
    A backend that can read incrementally (both built-in ones) overrides metrics_reader."""

    def __init__(self, backend: "Backend", name: str, keys=None):
        self.backend, self.name, self.keys = backend, name, keys
        self.points: dict = {}

    def poll(self) -> dict:
        got = self.backend.metrics(self.name, keys=self.keys)
        new = {k: pts[len(self.points.get(k, [])):] for k, pts in got.items()}
        self.points = {k: list(v) for k, v in got.items()}
        return {k: v for k, v in new.items() if v}


def _unsupported(backend: "Backend", what: str) -> Exception:
    from ..errors import UsageError

    return UsageError(f"{what} is not supported by the {backend.name or type(backend).__name__} backend")


class Backend(ABC):
    """Where jobs run. name: the registered kind (\"local\", \"azureml\", or a test's)."""

    name: str = ""
    poll_cap_s: float = 5.0   # the longest a follower waits between status reads (a local file is cheap)

    @abstractmethod
    def plan(self, spec: JobSpec, options: SubmitOptions) -> Plan:
        """What submit would do, as a value. No side effects."""

    @abstractmethod
    def submit(self, plan: Any) -> JobInfo:   # Any: each backend takes the Plan type its plan() makes
        """Start the job; returns at once with its first status. A job that exists under the plan's name
        with the same spec is followed, not started again (idempotent submits)."""

    @abstractmethod
    def status(self, name: str) -> JobInfo:
        """JobNotFound for an unknown job."""

    @abstractmethod
    def logs(self, name: str, *, follow: bool = False, rank: int | None = None) -> Iterator[LogLine]:
        """Every rank's lines (or one rank's), in order per rank; with follow, until the job ends and
        what is left has been drained."""

    @abstractmethod
    def cancel(self, name: str) -> JobInfo: ...

    @abstractmethod
    def list(self, *, experiment: str | None = None, tags: dict | None = None,
             limit: int | None = None, names=None) -> List[JobInfo]:
        """Newest first. With `names`, only those jobs, found in one listing (paging stops once all
        are seen), so watching many jobs costs one call per poll, not one per job."""

    # --- optional abilities, with defaults ------------------------------------------------------
    def update(self, name: str, *, tags: dict | None = None, remove_tags=(), display_name: str | None = None,
               description: str | None = None) -> JobInfo:
        """Change a submitted job's metadata (az ml job update): tags set (merged) and removed, display
        name, description; None leaves a field as it is. Returns the job as it is after the change."""
        raise _unsupported(self, "updating a job (dtrain update)")

    def set_archived(self, name: str, archived: bool) -> JobInfo:
        """Archive a job (hidden from list unless asked for) or restore it (az ml job archive/restore)."""
        raise _unsupported(self, "archiving a job (dtrain archive/restore)")

    def list_archived(self, *, only: bool, experiment: str | None = None, tags: dict | None = None,
                      limit: int | None = None) -> List[JobInfo]:
        """list() with archived jobs too (only: archived jobs alone); list() itself hides them."""
        raise _unsupported(self, "listing archived jobs")

    def knows(self, name: str) -> bool:
        """Whether this backend holds a job of this name."""
        from ..errors import JobNotFound

        try:
            self.status(name)
        except JobNotFound:
            return False
        return True

    def stop(self, name: str) -> None:
        """Make sure an ended attempt cannot come back before a retry starts the next (Azure: cancel a
        NotResponding run). Default: nothing to do (a lost local job is over)."""

    def preflight(self, plan: Any) -> "List[str]":
        """Whether the planned job can start where it would run, without submitting it: raises UsageError
        where it never can, returns what will make it wait (Azure: the compute and quota, docs/capacity.md).
        Default: nothing to check."""
        return []

    def image_build(self, plan) -> str | None:
        """Whether submitting `plan` builds a new environment image, as a sentence (Azure: one look-up in the
        workspace). Default None: nothing is built, or nothing is known."""
        return None

    def cluster(self, name: str) -> "tuple[str, str] | None":
        """(VM size, region) of a compute this backend knows by name (Azure: the workspace's cluster), for
        pricing a job that names no instance_type. Default None: none known."""
        return None

    def read_environment(self, ref: str) -> dict | None:
        """A registered environment's definition (Azure: from the workspace): {"found": bool, "image",
        "conda_file", "build"}, or {"found": None, "why"} when it cannot be read. Default None: this
        backend has no environments."""
        return None

    def where(self) -> dict | None:
        """Where a job submitted through this backend lives, recorded at submit (jobindex) so that later
        commands reach it without flags: Azure, its workspace. None: nothing to record."""
        return None

    def rank_logs(self, name: str) -> Iterator[RankLog]:
        """Every rank's log, one rank at a time, for `dtrain why`. Default: logs(rank=r) for each rank
        the job has, exit codes unknown."""
        info = self.status(name)
        ppn = max(1, info.processes_per_node)
        for r in range(max(1, info.nodes) * ppn):
            log = RankLog(rank=r, node=r // ppn, source=f"rank {r}")
            log.lines = _texts(log, iter(self.logs(name, rank=r)))
            yield log

    def files(self, name: str, *, outputs: List[str] | None = None, logs: bool = False) -> List[Any]:
        """The job's files for `dtrain download` (backends/files.py JobFile): the outputs named (None: every
        output), and with logs every log."""
        raise _unsupported(self, "downloading a job's files (dtrain download)")

    def metrics(self, name: str, *, keys=None) -> dict[str, List[MetricPoint]]:
        """Every point of each metric the job logged through MLflow (only `keys` when given), in step
        order; {} when it logged none (the default: a backend without metrics)."""
        return {}

    def metrics_reader(self, name: str, *, keys=None) -> MetricsReader:
        """An incremental reader of the job's metrics (metrics --follow)."""
        return PollingReader(self, name, keys)

    def latest_metrics(self, jobs: List[JobInfo]) -> dict[str, dict[str, MetricPoint]]:
        """The latest point of every metric of each job (name -> key -> point), in one batched read
        for all of them where the backend can (watch: O(1) requests per poll). Default: one read each."""
        out = {}
        for j in jobs:
            got = self.metrics(j.name)
            if got:
                out[j.name] = {k: pts[-1] for k, pts in got.items() if pts}
        return out

    def sysmetrics(self, name: str):
        """How the job used its hardware (dtrain.sysmetrics.SysMetrics: per node and device, over time);
        None where the backend has none (the default)."""
        return None

    def latest_sysmetrics(self, jobs: List[JobInfo]) -> dict:
        """name -> {"gpu_util": (timestamp ms, %)} for each job that has one, in one batched read for all
        of them (watch's GPU column: at most one request per poll). Default: none."""
        return {}
