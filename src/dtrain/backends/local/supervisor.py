"""The detached process that runs one local job: `python -m dtrain.backends.local.entry supervisor JOB_DIR`.

Started by the job's watchdog (watchdog.py; submit starts that in its own session, so the job survives
the terminal). It starts every process of the plan (each in its own session and process group, with
PR_SET_PDEATHSIG so they die with it), waits, stops the rest as soon as one fails (SIGTERM to each group,
SIGKILL after the job's grace period), honours limits.timeout and cancel (SIGTERM to the supervisor),
stops everything the job left behind (its whole process tree: it is a child subreaper, so orphans inside
the job are reparented to it; and every process carrying the job's token), and writes the final state,
unless the state is already final (a cancel that gave up waiting for it wins: final is final).
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

from . import env as _env
from . import eviction
from .. import failure as _failure
from . import procs
from . import sysmetrics as _sysmetrics
from ...settings import Settings
from ...status import TERMINAL
from .plan import LocalPlan
from .record import JobRecord
from .store import PLAN, atomic_write_json, read_json, read_state, update_state



def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def grace_seconds(environ=None) -> float:
    """The grace period set in this environment (read once, by submit, and recorded with the job)."""
    return Settings(environ).local_grace_s


def job_grace(state: JobRecord) -> float:
    """The grace period belongs to the job: recorded at submit (older jobs: this environment's)."""
    g = state.grace
    return grace_seconds() if g is None else g


class Supervisor:
    def __init__(self, job_dir: Path, watchdog: int | None = None):
        self.job_dir = Path(job_dir)
        # The plan submit wrote, ports filled in: started exactly as it is.
        self.plan = LocalPlan.from_dict(read_json(self.job_dir / PLAN))
        state = read_state(self.job_dir)
        self.token = state.token
        self.grace = job_grace(state)
        self.cancel_flag = False
        self.watchdog = watchdog                # the parent that finishes the job if this process is lost
        self.watchdog_lost = False
        self.children: dict[int, dict] = {}     # pid -> process record (unreaped children of the plan)
        self.records: list[dict] = []
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)
        os.set_blocking(self._r, False)

    # --- signals -------------------------------------------------------------------------------
    def _on_stop(self, signum, frame):
        self.cancel_flag = True

    def _on_watchdog_lost(self, signum, frame):
        self.watchdog_lost = True

    def install_signals(self):
        signal.set_wakeup_fd(self._w)
        signal.signal(signal.SIGUSR1, self._on_watchdog_lost)
        signal.signal(signal.SIGCHLD, lambda s, f: None)
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self._on_stop)

    def _wait_event(self, timeout: float):
        with contextlib.suppress(InterruptedError, OSError):
            select.select([self._r], [], [], max(0.0, timeout))
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._r, 4096):
                pass

    # --- lifecycle -----------------------------------------------------------------------------
    def run(self) -> int:
        procs.set_subreaper()
        self.install_signals()
        if self.watchdog:
            # The watchdog and this supervisor stand or fall together: when it is killed, SIGUSR1 here, and
            # the job ends as lost (NotResponding), as when this process is killed.
            procs.set_pdeathsig(signal.SIGUSR1)
            if os.getppid() != self.watchdog:
                self.watchdog_lost = True
        me, st = os.getpid(), procs.start_time(os.getpid())

        def mark_start(s):
            s.supervisor = {"pid": me, "start_time": st}
            if s.cancel_requested and s.status not in TERMINAL:
                s.status = "Canceled"
                s.ended = now_iso()
            elif s.status not in TERMINAL:
                s.status = "Starting"

        state = update_state(self.job_dir, mark_start)
        if state.status in TERMINAL:
            return 0
        try:
            self.start_processes()
        except Exception as exc:  # noqa: BLE001 - report any failure to start as the job's failure
            self.stop_all(0)
            self.finish("Failed", {"message": f"could not start the job's processes: {exc}"})
            return 1
        sampler = _sysmetrics.start(self.job_dir, self.records)   # after every Popen: no fork from a thread
        try:
            return self.wait()
        finally:
            if sampler is not None:
                sampler.stop()

    def start_processes(self):
        plan = self.plan
        picked = None
        if not plan.bound:       # a plan.json without its ports (not written by submit): pick them now
            picked = _env.free_ports(plan.n_ports)
            plan = self.plan = plan.bind(picked)
            with contextlib.suppress(OSError):
                atomic_write_json(self.job_dir / PLAN, plan.to_dict())
        (self.job_dir / "user_logs").mkdir(exist_ok=True)
        (self.job_dir / "system_logs").mkdir(exist_ok=True)
        for d in plan.output_dirs:
            Path(d).mkdir(parents=True, exist_ok=True)
        base = dict(os.environ)
        base.pop("DTRAIN_LOCAL_GRACE_S", None)
        base.pop(procs.OWNER_VAR, None)
        base[procs.TOKEN_VAR] = self.token
        me = os.getpid()
        for p in plan.processes:
            env = {**base, **p.env}
            log_path = self.job_dir / p.log
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(log_path, "ab", buffering=0) as log:
                # mpirun gets SIGTERM when the supervisor dies so that it takes its ranks down with it.
                deathsig = signal.SIGTERM if p.role == "launcher" else signal.SIGKILL
                child = subprocess.Popen(list(p.argv), cwd=p.cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, close_fds=True,
                                         preexec_fn=procs.child_preexec(me, deathsig))
            rec = {"rank": p.rank, "node": p.node, "role": p.role, "pid": child.pid,
                   "pgid": child.pid, "sid": child.pid, "start_time": procs.start_time(child.pid), "exit_code": None,
                   "log": p.log}
            child.returncode = 0          # we reap with waitpid(-1); keep Popen.__del__ from touching it
            self.records.append(rec)
            self.children[child.pid] = rec

        def mark_running(s):
            if s.status not in TERMINAL and s.status != "CancelRequested":
                s.status = "Running"
            s.started = now_iso()
            s.processes = self.records
            if picked is not None:
                s.ports, s.port_names = picked, plan.port_names()

        update_state(self.job_dir, mark_running)

    def _reap(self) -> list[dict]:
        """Reap every exited child (ours and adopted orphans); returns the records of plan processes."""
        done = []
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            rec = self.children.pop(pid, None)
            if rec is not None:
                code = os.waitstatus_to_exitcode(status)
                if code < 0:
                    rec["signal"] = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
                    code = 128 - code
                rec["exit_code"] = code
                rec["ended"] = now_iso()
                done.append(rec)
        return done

    def wait(self) -> int:
        """Wait for every process of the plan. The first failure, a cancel, limits.timeout or the loss
        of the watchdog stops the rest (SIGTERM, then SIGKILL after the grace period); once all are gone,
        whatever the job left behind is stopped too, and the final state written."""
        timeout = self.plan.timeout
        t0 = time.monotonic()
        deadline = t0 + timeout if timeout else None
        preempt = eviction.deadline(self.plan.preempt_after_s, t0)     # --preempt-after: the drill
        reason, first_fail = None, None
        stop_at = None                  # when the processes still running get SIGKILL
        while self.children:
            self._wait_event(self._next_wake(eviction.sooner(deadline, preempt), reason, stop_at))
            reason, first_fail = self._why_stop(reason, first_fail, deadline)
            reason = reason or eviction.due(preempt)
            stop_at = self._stop_children(reason, stop_at)
        self._stop_left_behind()
        self._finish_as(reason, first_fail, timeout, time.monotonic() - t0)
        return 0

    @staticmethod
    def _next_wake(deadline: float | None, reason: str | None, stop_at: float | None) -> float:
        """How long to sleep at most: a second, less so as not to miss the deadline, and briefly while
        processes are being stopped (so SIGKILL follows the grace period on time)."""
        wait_for = 1.0
        if deadline and reason is None:
            wait_for = min(wait_for, deadline - time.monotonic())
        if stop_at is not None:
            wait_for = min(wait_for, 0.1)
        return wait_for

    def _stop_requested(self) -> str | None:
        """Why the job is being stopped from outside, if it is: a cancel (SIGTERM here) wins over the
        loss of the watchdog."""
        if self.cancel_flag:
            return "canceled"
        if self.watchdog_lost:
            return "lost"
        return None

    def _why_stop(self, reason: str | None, first_fail: dict | None,
                  deadline: float | None) -> tuple[str | None, dict | None]:
        """Reap what exited, and the reason the job ends early (the first one sticks): canceled, lost,
        failed (with the first failed process) or timeout; None while it runs on."""
        # Before reaping: what a cancel killed is no failure.
        reason = reason or self._stop_requested()
        for rec in self._reap():
            if rec["exit_code"] != 0 and reason is None:
                reason, first_fail = "failed", rec
        if reason is None and self.cancel_flag:
            reason = "canceled"
        if reason is None and deadline and time.monotonic() >= deadline:
            reason = "timeout"
        return reason, first_fail

    def _stop_children(self, reason: str | None, stop_at: float | None) -> float | None:
        """Once there is a reason to stop: SIGTERM to every process still running, then SIGKILL (and
        every process with the job's token) when the grace period is over, again each second. Returns
        when the next SIGKILL is due."""
        if reason and stop_at is None and self.children:
            stop_at = time.monotonic() + self.grace
            self._signal_children(signal.SIGTERM)
        if stop_at is not None and time.monotonic() >= stop_at and self.children:
            self._signal_children(signal.SIGKILL)
            procs.kill_job_processes(self.token, [r["pgid"] for r in self.children.values()])
            stop_at = time.monotonic() + 1.0
        return stop_at

    def _stop_left_behind(self) -> None:
        """Nothing of the job outlives it: what it left behind is stopped too, marked with the token or
        not (an `env -i` grandchild, a setsid daemon: orphans are reparented to this subreaper)."""
        procs.kill_job_processes(self.token, [], grace=min(self.grace, 2.0))
        procs.kill_tree(os.getpid(), self.token, reap=True)
        self._reap()

    def _finish_as(self, reason: str | None, first_fail: dict | None, timeout: int | None,
                   elapsed: float) -> None:
        """The final state for how the job ended: no reason to stop early means it completed."""
        if reason == "timeout":
            self.finish("Canceled", {"message": f"timed out after {timeout} s (limits.timeout); "
                                                f"the job was canceled after {elapsed:.0f} s"}, timed_out=True)
        elif reason == "lost":
            from .watchdog import LOST_STATUS, lost_failure

            self.finish(LOST_STATUS, lost_failure(self.job_dir, {"pid": self.watchdog}, "Running", "killed",
                                                  who="supervisor's watchdog"))
        elif reason == eviction.REASON:
            self.finish(eviction.STATUS, eviction.failure(self.plan.preempt_after_s or 0, self.grace, elapsed,
                                                          self.job_dir))
        elif reason == "canceled":
            self.finish("Canceled", None)
        elif reason == "failed":
            assert first_fail is not None
            self.finish("Failed", self.describe_failure(first_fail))
        else:
            self.finish("Completed", None)

    def _signal_children(self, sig):
        for rec in list(self.children.values()):
            procs.signal_group(rec["pgid"], sig)

    def stop_all(self, grace: float):
        self._signal_children(signal.SIGTERM if grace else signal.SIGKILL)
        procs.kill_job_processes(self.token, [r["pgid"] for r in self.children.values()], grace=grace)
        procs.kill_tree(os.getpid(), self.token, reap=True)
        self._reap()

    def describe_failure(self, rec: dict) -> dict:
        rank, node, code = rec.get("rank"), rec.get("node"), rec.get("exit_code")
        if rec.get("role") == "launcher":          # mpirun: which rank failed first, from its report
            r, c = _failure.mpi_first_failure(self.job_dir / rec["log"])
            if r is not None:
                ranks = {x["rank"]: x for x in self.plan.ranks or []}
                rank, code = r, c
                node = ranks.get(r, {}).get("node")
        if rank is not None:
            lines = _failure.tail_text(self.job_dir / _env.log_name(rank))
            who = f"rank {rank}" + (f" (node {node})" if node is not None else "")
        else:
            lines = _failure.tail_text(self.job_dir / rec["log"])
            who = "mpirun"
        how = (f"was killed by {rec['signal']}" if rec.get("signal") and rank == rec.get("rank")
               else f"exited with code {code}")
        n_other = len(self.plan.ranks or []) - 1
        msg = f"{who} {how}" + (f"; the other {n_other} process{'es were' if n_other != 1 else ' was'} stopped"
                                if n_other > 0 else "")
        return {"message": msg, "rank": rank, "node": node, "exit_code": code,
                "last_lines": _failure.last_lines(lines), "traceback": _failure.traceback_block(lines)}

    def finish(self, status: str, failure: dict | None, timed_out: bool = False):
        def fin(s):
            if s.status in TERMINAL:
                return                    # final is final (e.g. Canceled while this supervisor was stalled)
            s.status = status
            s.ended = now_iso()
            s.failure = failure
            s.timed_out = timed_out
            s.processes = self.records or s.processes or []

        update_state(self.job_dir, fin)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job_dir = Path(argv[0])
    watchdog = int(argv[1]) if len(argv) > 1 else None
    sup = None
    try:
        sup = Supervisor(job_dir, watchdog)
        return sup.run()
    except Exception as exc:  # noqa: BLE001 - the job must end in a terminal state whatever happens
        reason = repr(exc)
        traceback.print_exc()
        with contextlib.suppress(Exception):
            state = read_state(job_dir)
            procs.kill_job_processes(state.token, [], grace=1.0)
            procs.kill_tree(os.getpid(), state.token, reap=True)
        with contextlib.suppress(Exception):
            def fin(s):
                if s.status not in TERMINAL:
                    s.status = "Failed"
                    s.ended = now_iso()
                    s.failure = {"message": f"the local supervisor failed: {reason} "
                                               f"(see {job_dir / 'system_logs' / 'supervisor.txt'})"}
            update_state(job_dir, fin)
        return 1


if __name__ == "__main__":
    sys.exit(main())
