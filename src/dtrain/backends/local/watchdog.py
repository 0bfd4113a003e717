"""The process `submit` starts for a local job: `python -m dtrain.backends.local.entry watchdog JOB_DIR`.

It makes itself a child subreaper, starts the supervisor as its child, and waits for it (the supervisor
ends the job as lost if the watchdog is killed: PR_SET_PDEATHSIG). A supervisor that
is killed (even with SIGKILL) cannot clean up after itself; the watchdog can: every process of the job is
its descendant (orphans are reparented to the nearest living subreaper, which is the watchdog once the
supervisor is gone), so it kills them all, whatever the command's shape, and writes the final state at
once: `NotResponding` (a lost node, exit 5), unless the state is already final. It does nothing else and
imports little, so there is little in it to fail.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from ...status import TERMINAL as FINAL
from . import procs
from .store import read_state, update_state

# What a lost supervisor ends as: Azure's status for a node that stopped answering (exit 5, infrastructure).
LOST_STATUS = "NotResponding"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def lost_failure(job_dir: Path, sup: dict, was: str, how: str, left: int = 0, who: str = "supervisor") -> dict:
    where = f" (pid {sup.get('pid')})" if sup.get("pid") else ""
    return {"message": f"the local {who}{where} is gone ({how}) while the job was {was}; its processes "
                       f"were stopped" + (f" ({left} could not be)" if left else "")
                       + f"; see {job_dir / 'system_logs' / 'supervisor.txt'}",
            "infrastructure": True, "last_lines": [], "traceback": []}


def _how(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code} without writing a final state"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job_dir = Path(argv[0]).resolve()
    procs.set_subreaper()                  # before the supervisor starts, so every descendant inherits it
    token = read_state(job_dir).token
    child = None

    def forward(signum, frame):            # `kill WATCHDOG` means stop the job: the supervisor does it
        if child is not None:
            procs.signal_pid(child.pid, signal.SIGTERM)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)
    child = subprocess.Popen([sys.executable, "-m", "dtrain.backends.local.entry", "supervisor", str(job_dir),
                              str(os.getpid())],
                             cwd=str(job_dir), stdin=subprocess.DEVNULL, close_fds=True)
    child.returncode = 0                   # reaped below with waitpid(-1); keep Popen away from it

    status = None
    while status is None:                  # reap adopted orphans too, until the supervisor itself exits
        try:
            pid, st = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            break
        if pid == child.pid:
            status = st

    procs.kill_tree(os.getpid(), token, reap=True)
    left = procs.kill_job_processes(token, [])

    def fin(s):
        if s.status in FINAL:
            return                         # final is final: the supervisor (or cancel) already decided
        s.failure = lost_failure(job_dir, s.supervisor or {}, s.status,
                                    _how(status) if status is not None else "lost", left)
        s.status = LOST_STATUS
        s.ended = now_iso()

    with contextlib.suppress(Exception):   # e.g. a state file no longer readable: the next command reports it
        update_state(job_dir, fin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
