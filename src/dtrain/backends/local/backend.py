"""LocalBackend: submit, follow, list and cancel jobs on this machine (the package's docstring says how)."""
from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from ...codefiles import code_files, copy_files
from ...errors import ConfigError, JobNotFound, LostTrack, UsageError
from ...spec.model import JobSpec
from ..base import Backend, FailureInfo, JobInfo, LogLine, Notice, Notify, SubmitOptions, is_terminal
from ..names import generate_name
from ..safefile import read_tail
from . import env as _env
from . import interpreter, jobenv, mlflowstore, procs
from .logs import follow_logs
from .plan import LocalPlan, build_plan, check_mpirun
from .supervisor import grace_seconds, job_grace
from .watchdog import LOST_STATUS, lost_failure
from .record import JobRecord
from .store import (LOCK, PLAN, STATE, CorruptState, LockBusy, atomic_write_json, checked_home, dtrain_home,
                    ensure_writable, jobs_root, read_json, read_state, update_state, valid_name, write_state)

__all__ = ["LocalBackend"]

# A job whose supervisor was never recorded is considered lost after this long.
_START_GRACE_S = 60.0
# How long a command waits for a live watchdog to finish a job whose supervisor is gone before doing it.
_WATCHDOG_WAIT_S = 3.0
# How long cancel waits for the supervisor beyond the job's grace period before stopping the job itself.
_CANCEL_MARGIN_S = 5.0
# How long cancel waits for the job's lock (held for milliseconds by a healthy writer) before it takes down
# the job's keepers: a supervisor stopped while it wrote the state holds it for good.
_LOCK_WAIT_S = 5.0


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class LocalBackend(Backend):
    name = "local"
    poll_cap_s = 0.5   # status is a local file read: poll often so short jobs end promptly

    def __init__(self, home: str | os.PathLike | None = None, *, notify: Notify | None = None):
        self._home = Path(home).resolve() if home else None
        self._children: dict[str, subprocess.Popen] = {}
        self._notify = notify
        self._told: set[str] = set()

    def _note(self, text: str) -> None:
        """A note for the user (once each), e.g. a job's file that is skipped: not a regular file."""
        if self._notify is not None and text not in self._told:
            self._told.add(text)
            self._notify(Notice(text))

    @property
    def home(self) -> Path:
        return checked_home(self._home) if self._home else dtrain_home()

    def _dir(self, name: str) -> Path:
        if not valid_name(name):
            raise JobNotFound(f"no local job named '{name}'")
        return jobs_root(self.home) / name

    # --- plan / submit ---------------------------------------------------------------------------
    def plan(self, spec: JobSpec, options: SubmitOptions | None = None) -> LocalPlan:
        """The plan `render --local` prints and submit runs; pure (no socket, no process, no file)."""
        return build_plan(spec, options or SubmitOptions(), self.home)

    @staticmethod
    def _check_program(plan: LocalPlan) -> None:
        """Exit 2 before anything is written when the command's program is not on the job's PATH (a job
        with --python has it in the job's bin folder, made below)."""
        if plan.python_link:
            return
        first = plan.processes[0] if plan.processes else None
        path = (first.env.get("PATH") if first else None) or os.environ.get("PATH", "")
        interpreter.check_program(plan.command, path, plan.code if plan.code and os.path.isdir(plan.code) else ".")

    def submit(self, plan: LocalPlan) -> JobInfo:
        """Run `plan`. What only a submit can choose is chosen here, in this order: the tools it needs are
        checked (Open MPI's mpirun; exit 2 before anything is written), the name is generated when the
        plan has none, and free ports are picked and filled in. The job's plan.json is the plan with all
        of that filled in, exactly what the supervisor starts; state.json records the ports by use."""
        mpirun = check_mpirun() if plan.framework == "mpi" else None
        if plan.job_env:                          # the job's own environment, built once (jobenv.py)
            jobenv.ensure(jobenv.JobEnv.from_dict(plan.job_env), self._notify)
        self._check_program(plan)
        if not plan.is_named:
            plan = plan.named(generate_name())
        target = Path(plan.job_dir)
        root = target.parent
        ensure_writable(root)
        phash = plan.plan_hash()
        if (target / STATE).exists():
            return self._existing(plan, phash)
        code = code_files(Path(plan.code)) if plan.code else None   # refuses bad code folders up front
        staging = root / f".staging-{plan.name}-{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            (staging / "user_logs").mkdir()
            (staging / "system_logs").mkdir()
            if code is not None:
                copy_files(code, staging / "snapshot")
            else:
                (staging / "snapshot").mkdir()
            if plan.python_link:                  # --python: the job's bin/python (first on its PATH)
                (staging / "bin").mkdir()
                for n in ("python", "python3"):
                    os.symlink(plan.python_link, staging / "bin" / n)
            for d in plan.output_dirs:
                p = Path(d)
                try:
                    (staging / p.relative_to(target)).mkdir(parents=True, exist_ok=True)
                except ValueError:  # a datastore folder outside the job (see store.datastore_path)
                    p.mkdir(parents=True, exist_ok=True)
            mlflowstore.create(staging, plan.job_dir, plan.name, plan.experiment_name,
                               int(datetime.now(timezone.utc).timestamp() * 1000))
            # Picked last, just before the supervisor starts, so the ports are still free when the
            # processes bind them.
            ports = _env.free_ports(plan.n_ports)
            atomic_write_json(staging / PLAN, plan.bind(ports, mpirun=mpirun).to_dict())
            state = JobRecord(
                name=plan.name, status="Queued", created=_now(), token=f"{plan.name}:{secrets.token_hex(8)}",
                experiment_name=plan.experiment_name, display_name=plan.display_name, tags=dict(plan.tags),
                nodes=plan.nodes, processes_per_node=plan.processes_per_node, framework=plan.framework,
                plan_hash=phash, grace_s=grace_seconds(), mpirun=mpirun or None, instance_type=plan.instance_type,
                # who starts the supervisor: a re-run starts a job whose submitter died before it could
                submitter={"pid": os.getpid(), "start_time": procs.start_time(os.getpid())},
                # in port order (state.json's keys are sorted), each with its use: see _ports
                ports=ports, port_names=plan.port_names())
            write_state(staging, state)
            os.rename(staging, target)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if (target / STATE).exists():         # another submit of the same name won the race
                return self._existing(plan, phash)
            raise _no_space(exc, root, plan.name, code) or exc
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        try:
            self._start_supervisor(target)
        except OSError as exc:
            # e.g. a disk that filled up between the copy and the supervisor's log: a job that can never
            # start must not stay behind as Queued, nor use up the name
            self._abandon(target)
            raise _no_space(exc, root, plan.name, code) or exc
        return self.status(plan.name)

    def _abandon(self, job_dir: Path) -> None:
        """Undo a submit whose supervisor could not be started: stop whatever did start, remove the job."""
        child = self._children.pop(job_dir.name, None)
        if child is not None:
            child.kill()                          # the watchdog: its supervisor and ranks die with it
            child.wait()
        try:
            _stop_leftovers(read_state(job_dir))   # anything carrying the job's marker
        except (OSError, CorruptState):
            pass
        trash = job_dir.parent / f".trash-{job_dir.name}-{secrets.token_hex(4)}"
        try:
            os.rename(job_dir, trash)
        except OSError:
            trash = job_dir
        shutil.rmtree(trash, ignore_errors=True)

    def _existing(self, plan: LocalPlan, phash: str) -> JobInfo:
        try:
            state = read_state(Path(plan.job_dir))
        except CorruptState as exc:
            raise UsageError(f"a local job named '{plan.name}' already exists and its state is unreadable "
                             f"({exc})", hint="give a new name with --name") from None
        if state.plan_hash != phash:
            raise UsageError(f"a local job named '{plan.name}' already exists (a different job)",
                             hint="give a new name with --name, or drop `name:` from the spec to get a generated "
                                  f"one; `dtrain status {plan.name}` shows the existing job")
        if _never_started(state) and self._claim(Path(plan.job_dir)):
            self._start_supervisor(Path(plan.job_dir))   # its submit was killed before it could
        return self.status(plan.name)

    def _claim(self, job_dir: Path) -> bool:
        """Make this process the submitter of a job that never started (under the job's lock, so that of
        two re-runs only one starts it)."""
        claimed = []

        def take(s):
            if _never_started(s):
                s.submitter = {"pid": os.getpid(), "start_time": procs.start_time(os.getpid())}
                claimed.append(True)

        update_state(job_dir, take)
        return bool(claimed)

    def _start_supervisor(self, job_dir: Path) -> None:
        """Start the job's watchdog (which starts the supervisor) in a session of its own. Its environment
        names this job as its owner and drops the marker of any job we run inside, so a job submitted from
        inside another local job is its own: the outer job's cleanup leaves it alone (as on Azure, where a
        job a job submits outlives the submitter)."""
        token = read_state(job_dir).token
        env = {k: v for k, v in os.environ.items() if k != procs.TOKEN_VAR}
        env[procs.OWNER_VAR] = token
        log = open(job_dir / "system_logs" / "supervisor.txt", "ab")
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "dtrain.backends.local.entry", "watchdog", str(job_dir)],
                cwd=str(job_dir), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True, env=env)
        finally:
            log.close()
        self._children[job_dir.name] = child
        st = procs.start_time(child.pid)
        update_state(job_dir, lambda s: setattr(s, "watchdog", {"pid": child.pid, "start_time": st}))

    # --- status ------------------------------------------------------------------------------------
    def _read(self, name: str) -> tuple[Path, JobRecord]:
        d = self._dir(name)
        try:
            return d, read_state(d)
        except FileNotFoundError:
            raise JobNotFound(f"no local job named '{name}'",
                              hint=f"`dtrain list` shows the jobs under {jobs_root(self.home)}") from None

    def _supervisor_alive(self, name: str, state: JobRecord) -> bool | None:
        """True while the supervisor or its watchdog runs (the watchdog finishes a job whose supervisor
        died); None when neither was recorded yet."""
        child = self._children.get(name)
        if child is not None:
            child.poll()                          # reap it if it exited (we are its parent)
        recs = [r for r in (state.supervisor, state.watchdog) if r]
        if not recs:
            return None
        return any(procs.is_alive(r.get("pid"), r.get("start_time")) for r in recs)

    def _check_lost(self, name: str, job_dir: Path, state: JobRecord) -> JobRecord:
        if is_terminal(state.status):
            return state
        alive = self._supervisor_alive(name, state)
        stuck = None
        if alive:
            sup = state.supervisor
            if not sup or procs.is_alive(sup.get("pid"), sup.get("start_time")):
                return state
            # The supervisor is gone and its watchdog runs: it finishes the job within moments. One that
            # does not (stopped, stalled) must not keep the job Running forever.
            deadline = time.monotonic() + _WATCHDOG_WAIT_S
            while time.monotonic() < deadline:
                state = read_state(job_dir)
                if is_terminal(state.status):
                    return state
                time.sleep(0.05)
            stuck = state.watchdog
        if alive is None:
            created = datetime.fromisoformat(state.created)
            if (datetime.now(timezone.utc) - created).total_seconds() < _START_GRACE_S:
                return state
        sup = state.supervisor or {}

        def repair(s):
            # Both the supervisor and its watchdog are gone (killed together, or the machine restarted):
            # the last resort is the job's marker and the sessions its processes were started in.
            if is_terminal(s.status):
                return                            # the supervisor finished after all
            if stuck and procs.is_alive(stuck.get("pid"), stuck.get("start_time")):
                procs.kill_tree(stuck["pid"], s.token)     # what it adopted, then the watchdog itself
                procs.signal_pid(stuck["pid"], 9)
            elif self._supervisor_alive(name, s):
                return
            _stop_leftovers(s)
            s.failure = lost_failure(job_dir, sup, s.status, "killed, or the machine restarted")
            s.status = LOST_STATUS
            s.ended = _now()

        return update_state(job_dir, repair)

    def status(self, name: str) -> JobInfo:
        try:
            job_dir, state = self._read(name)
        except CorruptState as exc:
            return _unreadable(exc)
        state = self._check_lost(name, job_dir, state)
        return _info(state, job_dir)

    def knows(self, name: str) -> bool:
        return valid_name(name) and (jobs_root(self.home) / name / STATE).is_file()

    # --- logs ----------------------------------------------------------------------------------
    def logs(self, name: str, *, follow: bool = False, rank: int | None = None) -> Iterator[LogLine]:
        try:
            job_dir, _ = self._read(name)
        except CorruptState as exc:
            job_dir = exc.path.parent             # its logs are still worth reading
        plan = read_json(job_dir / PLAN)
        ranks = plan.get("ranks") or []
        if rank is not None:
            sel = [r for r in ranks if r.get("rank") == rank]
            if not sel:
                raise UsageError(f"job '{name}' has no rank {rank}",
                                 hint=f"ranks are 0..{len(ranks) - 1}" if ranks else None)
            ranks = sel

        def terminal() -> bool:
            return is_terminal(self.status(name).status)

        return follow_logs(job_dir, ranks, follow=follow, is_terminal=terminal, on_skip=self._note)

    def files(self, name: str, *, outputs: list | None = None, logs: bool = False) -> list:
        """The job's output files and logs for `dtrain download` (files.py)."""
        from .files import job_files

        try:
            job_dir, _ = self._read(name)
        except CorruptState as exc:
            job_dir = exc.path.parent             # its outputs are still worth reading
        return job_files(name, job_dir, read_json(job_dir / PLAN), outputs, logs)

    def rank_logs(self, name: str):
        """Every rank's log file, with the exit code state.json recorded for its process (dtrain why)."""
        from ...diagnose.scan import job_folder_logs

        try:
            job_dir, _ = self._read(name)
        except CorruptState as exc:
            job_dir = exc.path.parent             # its logs are still worth reading
        return job_folder_logs(job_dir)

    # --- metrics (mlflowstore.py) -----------------------------------------------------------------
    def metrics_reader(self, name: str, *, keys=None) -> mlflowstore.MetricsFiles:
        try:
            job_dir, _ = self._read(name)
        except CorruptState as exc:
            job_dir = exc.path.parent             # its metrics are still worth reading
        return mlflowstore.MetricsFiles(job_dir, name, keys, on_skip=self._note)

    def metrics(self, name: str, *, keys=None) -> dict:
        reader = self.metrics_reader(name, keys=keys)
        reader.poll()
        return reader.points

    def latest_metrics(self, jobs) -> dict:
        """A tail read of each metric file per job: local files, no request."""
        return {j.name: mlflowstore.latest(jobs_root(self.home) / j.name, j.name, on_skip=self._note)
                for j in jobs if valid_name(j.name)}

    def sysmetrics(self, name: str):
        """What the job's supervisor sampled (sysmetrics.py): CPU and memory per rank, GPUs where any."""
        from . import sysmetrics

        info = self.status(name)
        return sysmetrics.read(self._dir(name), name, nodes=info.nodes)

    def latest_sysmetrics(self, jobs) -> dict:
        """The tail of each job's samples file: local files, no request."""
        from . import sysmetrics

        got = {j.name: sysmetrics.latest_gpus(self._dir(j.name)) for j in jobs if valid_name(j.name)}
        return {n: {"gpu_util": tv} for n, tv in got.items() if tv}

    # --- cancel ----------------------------------------------------------------------------------
    def cancel(self, name: str) -> JobInfo:
        try:
            job_dir, state = self._read(name)
        except CorruptState as exc:
            raise LostTrack(f"cannot cancel '{name}': {exc}",
                            hint="its processes, if any still run, carry DTRAIN_LOCAL_JOB in their "
                                 "environment; stop them by hand") from None
        state = self._check_lost(name, job_dir, state)
        if is_terminal(state.status):
            return _info(state, job_dir)

        def request(s):
            if not is_terminal(s.status):
                s.cancel_requested = True
                s.status = "CancelRequested"

        try:
            state = update_state(job_dir, request, timeout=_LOCK_WAIT_S)
        except LockBusy:
            state = read_state(job_dir)            # held by a stalled writer: the supervisor gets SIGTERM below
        t0 = time.monotonic()
        deadline = t0 + job_grace(state) + _CANCEL_MARGIN_S
        signaled = False
        while time.monotonic() < deadline:
            state = read_state(job_dir)
            if is_terminal(state.status):
                return _info(state, job_dir)
            sup = state.supervisor or {}
            if sup:
                if not self._supervisor_alive(name, state):
                    break                          # gone, and its watchdog too: clean up below
                if not signaled and procs.is_alive(sup.get("pid"), sup.get("start_time")):
                    procs.signal_pid(sup["pid"], 15)   # the supervisor stops every process, then writes Canceled
                    signaled = True
            elif time.monotonic() - t0 > 5:
                break                              # never started: it will see cancel_requested if it does
            time.sleep(0.05)

        def force(s):
            # The supervisor did not finish in time (stalled, or gone): stop the job here. Canceled is
            # final, so a stalled supervisor that resumes later cannot rewrite it.
            if is_terminal(s.status):
                return
            sup = s.supervisor or {}
            if sup and procs.is_alive(sup.get("pid"), sup.get("start_time")):
                procs.kill_tree(sup["pid"], s.token)
            _stop_leftovers(s)
            s.status = "Canceled"
            s.ended = _now()

        try:
            return _info(update_state(job_dir, force, timeout=_LOCK_WAIT_S), job_dir)
        except LockBusy:
            pass
        # Still taken: a supervisor stopped while it held the lock never lets go. Take its watchdog and it
        # down (the lock goes with the process; neither can write a lost state then), and end the job here.
        _kill_keepers(state)
        try:
            return _info(update_state(job_dir, force, timeout=_LOCK_WAIT_S), job_dir)
        except LockBusy:
            raise LostTrack(f"cannot cancel '{name}': another process holds its lock ({job_dir / LOCK})",
                            hint="the process holding it is not the job's supervisor; stop it, then cancel "
                                 "again") from None

    # --- metadata: update, archive (state.json, under its lock) -----------------------------------
    def update(self, name: str, *, tags: dict | None = None, remove_tags=(), display_name: str | None = None,
               description: str | None = None) -> JobInfo:
        def change(s):
            s.tags = {k: v for k, v in {**(s.tags or {}), **(tags or {})}.items() if k not in remove_tags}
            if display_name is not None:
                s.display_name = display_name
            if description is not None:
                s.description = description

        return self._change(name, change)

    def set_archived(self, name: str, archived: bool) -> JobInfo:
        return self._change(name, lambda s: setattr(s, "archived", archived))

    def _change(self, name: str, fn) -> JobInfo:
        """fn(state) under the job's lock, written atomically (a running supervisor's writes re-read it)."""
        try:
            job_dir, _ = self._read(name)
        except CorruptState as exc:
            raise LostTrack(f"cannot change '{name}': {exc}", hint="its state file is unreadable") from None
        update_state(job_dir, fn)
        return self.status(name)

    # --- list ----------------------------------------------------------------------------------
    def list_archived(self, *, only: bool, experiment: str | None = None, tags: dict | None = None,
                      limit: int | None = None) -> list[JobInfo]:
        return self.list(experiment=experiment, tags=tags, limit=limit, archived="only" if only else "all")

    def list(self, *, experiment: str | None = None, tags: dict | None = None,
             limit: int | None = None, names=None, archived: str = "hide") -> list[JobInfo]:
        """Local jobs, newest first, filtered by experiment and tags (or just the named ones, archived or
        not); archived: "hide" (az ml's default), "all" or "only"."""
        root = jobs_root(self.home)
        if not root.is_dir():
            return []
        # A job whose state cannot be read is shown as such, never silently dropped, unless a filter
        # it cannot be checked against was asked for.
        corrupt: list[JobInfo] = []
        keep_corrupt = bool(names) or not (experiment or tags)
        states = [(d, s) for d, s in _read_states(_job_dirs(root, names), corrupt if keep_corrupt else None)
                  if _selected(s, experiment, tags, "all" if names else archived)]
        states.sort(key=lambda x: x[1].created, reverse=True)
        if limit is not None:
            states = states[:limit]
        infos = [_info(self._check_lost(d.name, d, s), d) for d, s in states] + corrupt
        return infos[:limit] if limit is not None else infos


def _job_dirs(root: Path, names) -> Iterator[Path]:
    """The folders `list` looks at: the named jobs' (valid names only), else every job's. A hidden
    folder, or one without state.json (not a job, or one being created), is passed over."""
    dirs = [root / n for n in names if valid_name(n)] if names else root.iterdir()
    for d in dirs:
        if not d.name.startswith(".") and (d / STATE).is_file():
            yield d


def _read_states(dirs, corrupt: list | None) -> Iterator[tuple[Path, JobRecord]]:
    """(folder, state) of each job in `dirs`. A job removed meanwhile is skipped; one whose state.json
    makes no sense goes to `corrupt`, as Unreadable (skipped when corrupt is None)."""
    for d in dirs:
        try:
            s = read_state(d)
        except FileNotFoundError:
            continue                          # removed meanwhile
        except CorruptState as exc:
            if corrupt is not None:
                corrupt.append(_unreadable(exc))
            continue
        yield d, s


def _selected(state: JobRecord, experiment: str | None, tags: dict | None, archived: str) -> bool:
    """Whether a listing's filters keep a job; archived: the view, "hide", "all" or "only"."""
    if archived != "all" and bool(state.archived) != (archived == "only"):
        return False
    if experiment and state.experiment_name != experiment:
        return False
    st = state.tags or {}
    return not any(k not in st or (v is not None and str(st[k]) != str(v)) for k, v in (tags or {}).items())


def _never_started(state: JobRecord) -> bool:
    """Queued, no supervisor or watchdog ever recorded, and the submit that wrote it is gone (killed
    between writing the job and starting its supervisor): nothing will ever start it."""
    sub = state.submitter
    return (state.status == "Queued" and not state.supervisor and not state.watchdog
            and isinstance(sub, dict) and not procs.is_alive(sub.get("pid"), sub.get("start_time")))


def _no_space(exc: OSError, root: Path, name: str, code) -> ConfigError | None:
    """A full disk (or quota) under DTRAIN_HOME as a configuration error (exit 6) that names the folder,
    what the job needs and what is free; None for any other error."""
    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    needed = (code.total_bytes if code is not None else 0) + 1024 * 1024   # the snapshot, plus state and logs
    try:
        free = f"; {shutil.disk_usage(root).free / 1e6:.1f} MB free there"
    except OSError:
        free = ""
    return ConfigError(f"no space left under {root} for local job '{name}': it needs at least "
                       f"{needed / 1e6:.1f} MB (its code snapshot, state and first logs){free}; nothing was "
                       "submitted", hint="free some space (`dtrain clean --older-than 7d` removes old local jobs), "
                                         "or set DTRAIN_HOME to a folder on a disk with room")


def _unreadable(exc: CorruptState) -> JobInfo:
    """A job whose state.json makes no sense: shown with status Unreadable (exit 7, lost track), named by
    its file, so one bad file never hides or breaks the other jobs."""
    msg = f"state file {exc.path} {exc.reason}"
    return JobInfo(name=exc.path.parent.name, backend="local", status="Unreadable", url=str(exc.path.parent),
                   failure=FailureInfo(message=msg), last_line=msg)


def _kill_keepers(state: JobRecord) -> None:
    """SIGKILL the job's watchdog and supervisor (each only if it is still the process recorded), and wait
    up to 5 s for them to be gone."""
    keepers = [k for k in (state.watchdog or {}, state.supervisor or {})
               if k.get("pid") and procs.is_alive(k["pid"], k.get("start_time"))]
    if state.supervisor and state.supervisor.get("pid") in [k["pid"] for k in keepers]:
        procs.kill_tree(state.supervisor["pid"], state.token)
    for k in keepers:
        procs.signal_pid(k["pid"], 9)
    deadline = time.monotonic() + 5
    while any(procs.is_alive(k["pid"], k.get("start_time")) for k in keepers) and time.monotonic() < deadline:
        time.sleep(0.02)                           # a zombie counts as gone (is_alive): its lock is released


def _stop_leftovers(state: JobRecord) -> int:
    """SIGKILL every process with the job's marker or in a session one of its processes led."""
    found: set[int] = set()
    sessions = {r["sid"]: r.get("start_time") for r in state.processes or [] if r.get("sid")}
    for _ in range(50):
        left = set(procs.session_pids(sessions)) if sessions else set()
        left |= set(procs.job_pids(state.token))
        if not left:
            break
        for p in left:
            procs.signal_pid(p, 9)
        found |= left
        time.sleep(0.02)
    return len(found)


def _info(state: JobRecord, job_dir: Path) -> JobInfo:
    f = state.failure
    failure = None
    if f:
        failure = FailureInfo(message=f.get("message", ""), rank=f.get("rank"), node=f.get("node"),
                              exit_code=f.get("exit_code"), last_lines=list(f.get("last_lines") or []),
                              traceback=list(f.get("traceback") or []))
    return JobInfo(name=state.name, backend="local", status=state.status,
                   display_name=state.display_name, experiment_name=state.experiment_name,
                   created=state.created, started=state.started, ended=state.ended,
                   nodes=state.nodes or 1, processes_per_node=state.processes_per_node or 1,
                   url=str(job_dir), tags=dict(state.tags or {}), failure=failure,
                   timed_out=bool(state.timed_out), last_line=_last_line(job_dir),
                   ports=_ports(state), description=state.description, archived=bool(state.archived),
                   instance_type=state.instance_type)


def _ports(state: JobRecord) -> dict:
    """The ports the job's processes got, by use, in port order (see LocalPlan.port_names): e.g.
    {"MASTER_PORT": 41203}; {} for a job without any."""
    ports, names = state.ports, state.port_names
    ports = ports if isinstance(ports, list) else []
    names = names if isinstance(names, list) else []
    return {(names[i] if i < len(names) else f"port {i}"): p for i, p in enumerate(ports)}


def _last_line(job_dir: Path, tail: int = 4096) -> str | None:
    """The newest complete line of the most recently written rank log (for `dtrain watch`). Only regular
    files count: a log a job replaced by a FIFO or a symlink to /dev/zero is passed over."""
    found = []
    for p in (job_dir / "user_logs").glob("std_log*.txt"):
        try:
            st = p.lstat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((st.st_mtime, p))
    for _, log in sorted(found, reverse=True)[:1]:
        try:
            # at most `tail` bytes: a rank writing fast grows the file while it is read, and an
            # unbounded read chased it (a 300 MB log cost `logs -f` up to 690 MiB)
            data, _ = read_tail(log, tail)
        except OSError:
            return None
        lines = [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
        if lines:
            return lines[-1]
    return None
