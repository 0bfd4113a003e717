"""Local job state on disk: $DTRAIN_HOME/jobs/<name>/.

Layout of one job folder (paths relative to it):

  state.json                 the job's state, a JobRecord (record.py), written atomically: temp file +
                             fsync + os.replace
  plan.json                  the plan that ran: LocalPlan.to_dict() with the name, ports and mpirun filled in
  snapshot/                  the copy of `code` the command runs from (its working directory)
  outputs/<name>/            one folder per output (${{outputs.<name>}})
  user_logs/std_log_process_NN.txt   one log per process, Azure's layout
  system_logs/               supervisor.txt (the supervisor's own log), launcher.txt (mpirun)
  .lock                      flock(2) taken by every read-modify-write of state.json

Readers never lock: a reader sees the old file or the new one, never a partial one.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ...errors import ConfigError, UsageError
from ... import settings
from ..names import valid_job_name
from .record import JobRecord, RecordError

STATE = "state.json"
PLAN = "plan.json"
LOCK = ".lock"

_DATASTORE_RE = re.compile(r"azureml://datastores/([^/]+)/paths/(.*)$", re.I)


def dtrain_home() -> Path:
    return checked_home(settings.current().home.resolve())


_HOME_HINT = "set DTRAIN_HOME to a writable folder (default ~/.dtrain); it holds local jobs and datastores"


def checked_home(home: Path) -> Path:
    """DTRAIN_HOME must be a folder (or not exist yet): anything else is a configuration error (exit 6)."""
    if home.exists() and not home.is_dir():
        raise ConfigError(f"DTRAIN_HOME {home} is not a folder", hint=_HOME_HINT)
    return home


def ensure_writable(folder: Path) -> None:
    """Create `folder` (under DTRAIN_HOME) and prove it writable, or fail with a configuration error."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=str(folder))
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"cannot write local job state under {folder}: {exc.strerror or exc}",
                          hint=_HOME_HINT) from None


def jobs_root(home: Path | None = None) -> Path:
    return (home or dtrain_home()) / "jobs"


def datastore_path(uri: str, home: Path | None = None, job_name: str | None = None) -> Path | None:
    """azureml://datastores/<store>/paths/<path> -> $DTRAIN_HOME/datastores/<store>/<path>: the local
    stand-in for a datastore, shared by every local job, so one job's output can be the next one's
    input (e.g. checkpoints to resume from). None for other URIs. A store name Azure would refuse, or a
    path with `..`, is an error (exit 2): nothing may land outside that store's folder."""
    m = _DATASTORE_RE.match(uri or "")
    if not m:
        return None
    store, rel = m.group(1), m.group(2)
    if not valid_name(store):   # the REST spec's datastore name pattern, the same as a job name's
        raise UsageError(f"{uri}: '{store}' is not a datastore name",
                         hint="Azure ML datastore names are letters, digits, '_' and '-', starting with a "
                              "letter or digit")
    if job_name:  # Azure expands {name} / ${{name}} in output paths to the job name
        rel = rel.replace("${{name}}", job_name).replace("{name}", job_name)
    if ".." in rel.split("/") or "\0" in rel:
        raise UsageError(f"{uri}: a datastore path cannot contain a '..' segment",
                         hint="write the path from the datastore's root, e.g. "
                              f"azureml://datastores/{store}/paths/checkpoints/run1")
    root = (home or dtrain_home()) / "datastores" / store
    p = (root / rel.strip("/")).resolve()
    if root.resolve() not in (p, *p.parents):   # a symlink inside the store pointing elsewhere
        raise UsageError(f"{uri}: resolves to {p}, outside the local datastore folder {root}")
    return p


def valid_name(name: str) -> bool:
    return valid_job_name(name)


def atomic_write_json(path: Path, data) -> None:
    """Write JSON so that a concurrent reader sees either the old or the new content, never a mix."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # Make the rename itself durable.
    with contextlib.suppress(OSError):
        dfd = os.open(str(path.parent), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def read_json(path: Path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class CorruptState(Exception):
    """state.json exists but cannot be read as a job state (truncated, not an object, no status)."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def read_state(job_dir: Path) -> JobRecord:
    """The job's state. FileNotFoundError when there is none; CorruptState when it makes no sense."""
    path = Path(job_dir) / STATE
    try:
        raw = read_json(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:       # ValueError covers bad JSON and bad UTF-8
        raise CorruptState(path, f"not readable as JSON ({exc})") from None
    try:
        return JobRecord.from_dict(raw)
    except RecordError as exc:
        raise CorruptState(path, str(exc)) from None


def write_state(job_dir: Path, state: JobRecord) -> None:
    atomic_write_json(Path(job_dir) / STATE, state.to_dict())


class LockBusy(Exception):
    """The job's lock was not free within the time given: a process holds it and does not let go (a
    supervisor stopped while it wrote the state)."""


@contextlib.contextmanager
def locked(job_dir: Path, timeout: float | None = None):
    """Exclusive lock for a read-modify-write of state.json (supervisor, cancel, status repair); with
    `timeout`, LockBusy when it is not free by then (a holder that never lets go must not hang a cancel)."""
    fd = os.open(str(Path(job_dir) / LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockBusy(f"the lock of {job_dir} stayed taken for {timeout:g} s") from None
                    time.sleep(0.05)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def update_state(job_dir: Path, fn: Callable[[JobRecord], object], timeout: float | None = None) -> JobRecord:
    """Apply fn(state) under the lock and write the result atomically. Returns the new state. With
    `timeout`: LockBusy when the lock is not free by then (locked)."""
    with locked(job_dir, timeout):
        state = read_state(job_dir)
        fn(state)
        write_state(job_dir, state)
        return state


def tree_size(path: Path) -> int:
    """Bytes of the files under `path` (lstat: a symlink counts as itself; os.walk follows no symlinked
    folder), for what clean frees."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total
