"""Cancel never hangs on the job's lock. A supervisor stopped (SIGSTOP, a debugger, a frozen machine) while
it wrote state.json holds the lock for good: cancel waits a bounded time, takes the job's watchdog and
supervisor down (the lock goes with the process) and ends the job Canceled. A lock held by some other
process is an error naming the lock file, never a wait without end. The "supervisor" here is a small
process that takes the lock and is then stopped, recorded in a hand-written state.json: the window in
which a real one holds it is milliseconds (test_local_procs' stalled supervisor hit it under load)."""
import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from dtrain.backends.local import LocalBackend, procs
from dtrain.backends.local import backend as local_backend
from dtrain.errors import LostTrack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

HOLDER = """import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""


def _holder(lock):
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def _job(home, name, supervisor):
    d = home / "jobs" / name
    d.mkdir(parents=True)
    state = {"name": name, "status": "Running", "created": datetime.now(timezone.utc).isoformat(),
             "token": f"{name}:t", "ended": None, "supervisor": supervisor, "watchdog": None, "processes": [],
             "failure": None, "tags": {}, "grace_s": 0.1}
    (d / "state.json").write_text(json.dumps(state))
    return d


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(local_backend, "_LOCK_WAIT_S", 0.3)
    monkeypatch.setattr(local_backend, "_CANCEL_MARGIN_S", 0.3)


def test_a_supervisor_stopped_while_it_holds_the_lock_is_taken_down_and_the_job_canceled(tmp_path, quick):
    home = tmp_path / "home"
    d = _job(home, "stuck", None)
    holder = _holder(d / ".lock")
    try:
        state = json.loads((d / "state.json").read_text())
        state["supervisor"] = {"pid": holder.pid, "start_time": procs.start_time(holder.pid)}
        (d / "state.json").write_text(json.dumps(state))
        os.kill(holder.pid, signal.SIGSTOP)                    # stopped inside its write: the lock stays taken
        info = LocalBackend(home).cancel("stuck")
        assert info.status == "Canceled"
        assert holder.wait(timeout=10) == -signal.SIGKILL       # taken down, and with it its lock
        saved = json.loads((d / "state.json").read_text())
        assert saved["status"] == "Canceled" and saved["ended"]
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_held_by_another_process_is_an_error_not_a_hang(tmp_path, quick):
    home = tmp_path / "home"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    d = _job(home, "held", {"pid": sleeper.pid, "start_time": procs.start_time(sleeper.pid)})
    holder = _holder(d / ".lock")                                # not the job's: cancel must not kill it
    try:
        with pytest.raises(LostTrack) as e:
            LocalBackend(home).cancel("held")
        assert "another process holds its lock" in str(e.value) and str(d / ".lock") in str(e.value)
        assert holder.poll() is None
    finally:
        for p in (holder, sleeper):
            p.kill()
            p.wait()
