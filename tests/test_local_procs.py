"""Every process a local job starts ends with it, whatever the command's shape; a lost supervisor is
infrastructure (NotResponding, exit 5) and the state becomes final without another command looking;
cancel honours the job's own grace period and Canceled is final; a job submitted from inside another is
its own. Real processes, checked against /proc."""
from __future__ import annotations

import contextlib
import os
import signal
import time

import pytest

from dtrain.backends.local import procs
from dtrain.backends.local.store import read_state
from dtrain.exitcodes import ExitCode
from dtrain.status import TERMINAL as TERMINAL_STATUSES
from test_local_plan import dist_body
from test_local_run import _stop_leftover_jobs, cmdline_pids, no_job_processes, submit, wait_for  # noqa: F401

pytestmark = pytest.mark.slow

# Starts an `env -i` grandchild (no marker in its environment) and a double-forked daemon in a session of
# its own (setsid), then waits or exits: the shapes that escaped before.
ESCAPERS = """import subprocess, sys, time
subprocess.Popen(["env", "-i", "/bin/sleep", "{t}1"])
subprocess.Popen(["setsid", "sh", "-c", "/bin/sleep {t}2 & exit 0"]).wait()
print("started", flush=True)
if sys.argv[1] == "stay":
    time.sleep({t}3)
"""


def wait_state(job_dir, pred, timeout=30.0):
    """Poll state.json itself (no backend call, which would repair a lost job as a side effect)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = read_state(job_dir)
        if pred(st):
            return st
        time.sleep(0.05)
    raise AssertionError(f"state still {read_state(job_dir).status} after {timeout} s")


def alive(marker: str, timeout: float = 5.0) -> list[int]:
    """Processes with marker in their command line, once whatever is being killed has had time to go."""
    deadline = time.monotonic() + timeout
    while (left := cmdline_pids(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def logs_show(b, name, text, n, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(1 for l in b.logs(name) if l.text == text) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{name}: '{text}' not printed by {n} processes")


def test_killed_supervisor_stops_compound_commands_env_i_and_daemons_and_ends_not_responding(
        tmp_path, dtrain_home, cli):
    b, plan, info = submit(tmp_path, dist_body("pytorch", 1, 2, command="python esc.py stay; echo done"),
                           code={"esc.py": ESCAPERS.format(t="97.")}, name="lost")
    logs_show(b, "lost", "started", 2)
    for m in ("sleep 97.1", "sleep 97.2", "esc.py stay"):
        assert len(cmdline_pids(m)) >= 2, m
    job = dtrain_home / "jobs" / "lost"
    os.kill(read_state(job).supervisor["pid"], signal.SIGKILL)
    st = wait_state(job, lambda s: s.status in TERMINAL_STATUSES)
    assert st.status == "NotResponding"
    assert "supervisor" in st.failure["message"] and "SIGKILL" in st.failure["message"]
    for m in ("sleep 97.1", "sleep 97.2", "esc.py stay"):
        assert alive(m) == [], m
    assert "done" not in [l.text for l in b.logs("lost")]     # the rest of the compound command never ran
    r = cli("wait", "lost", env={"DTRAIN_HOME": str(dtrain_home)}, timeout=60)
    assert r.returncode == ExitCode.INFRA, r.stderr
    assert "the local supervisor" in r.stderr and "is gone" in r.stderr


def test_completed_job_leaves_no_env_i_grandchild_or_daemon(tmp_path, dtrain_home):
    b, plan, info = submit(tmp_path, dist_body("none", 2, command="python esc.py go"),
                           code={"esc.py": ESCAPERS.format(t="96.")}, name="left")
    info = wait_for(b, "left", 30)
    assert info.status == "Completed"
    assert alive("sleep 96.1") == [] and alive("sleep 96.2") == []


def test_cancel_waits_for_the_grace_period_the_job_was_submitted_with(tmp_path, dtrain_home, monkeypatch):
    # A checkpoint that takes 11 s after SIGTERM: longer than cancel's own environment's grace (0 s) plus
    # the margin it waits for the supervisor, shorter than the job's (15 s).
    script = """import signal, sys, time
def term(*a):
    time.sleep(11)
    print("checkpoint saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("training", flush=True)
time.sleep(95.7)
"""
    monkeypatch.setenv("DTRAIN_LOCAL_GRACE_S", "15")
    b, plan, info = submit(tmp_path, "command: python ckpt.py 95.7\n", code={"ckpt.py": script}, name="ck")
    logs_show(b, "ck", "training", 1)
    monkeypatch.setenv("DTRAIN_LOCAL_GRACE_S", "0")
    info = b.cancel("ck")
    assert info.status == "Canceled"
    assert "checkpoint saved" in [l.text for l in b.logs("ck")]
    assert alive("ckpt.py 95.7") == []


def test_stalled_supervisor_that_resumes_after_cancel_keeps_it_canceled(tmp_path, dtrain_home, monkeypatch):
    monkeypatch.setenv("DTRAIN_LOCAL_GRACE_S", "0.5")
    b, plan, info = submit(tmp_path, dist_body("pytorch", 1, 2, command="sleep 94.3 & sleep 94.3; wait"),
                           name="stall")
    job = dtrain_home / "jobs" / "stall"
    wait_for(b, "stall", 30, lambda i: i.status == "Running")
    sup = read_state(job).supervisor
    os.kill(sup["pid"], signal.SIGSTOP)
    try:
        info = b.cancel("stall")          # the supervisor cannot answer: cancel stops the job itself
        assert info.status == "Canceled"
        assert alive("sleep 94.3") == []
    finally:
        with contextlib.suppress(ProcessLookupError):   # gone when it was stopped inside a write (cancel took it down)
            os.kill(sup["pid"], signal.SIGCONT)
    deadline = time.monotonic() + 30
    while procs.is_alive(sup["pid"], sup["start_time"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procs.is_alive(sup["pid"], sup["start_time"])      # it resumed, saw the end, and exited
    st = read_state(job)
    assert st.status == "Canceled" and st.ended == info.ended


@pytest.mark.parametrize("outer_ends", ["completes", "supervisor killed"])
def test_a_job_submitted_from_inside_another_outlives_it(tmp_path, dtrain_home, outer_ends):
    inner = "command: sleep 3; echo inner-done\nenvironment: azureml:env@latest\n"
    tail = " && sleep 93.9" if outer_ends == "supervisor killed" else ""
    b, plan, info = submit(tmp_path, f"command: python -m dtrain submit inner.yml --local --name inner{tail}\n",
                           code={"inner.yml": inner}, name="outer")
    if outer_ends == "supervisor killed":
        wait_for(b, "outer", 30, lambda i: b.knows("inner") and b.status("inner").status == "Running")
        os.kill(read_state(dtrain_home / "jobs" / "outer").supervisor["pid"], signal.SIGKILL)
        assert wait_for(b, "outer", 30).status == "NotResponding"
        assert alive("sleep 93.9") == []
    else:
        assert wait_for(b, "outer", 30).status == "Completed"
    info = wait_for(b, "inner", 30)
    assert info.status == "Completed", info.failure
    assert [l.text for l in b.logs("inner")] == ["inner-done"]
    assert no_job_processes(b, "inner")


def test_killed_watchdog_ends_the_job_as_lost_too(tmp_path, dtrain_home, monkeypatch):
    monkeypatch.setenv("DTRAIN_LOCAL_GRACE_S", "1")
    b, plan, info = submit(tmp_path, dist_body("pytorch", 1, 2, command="python esc.py stay; echo done"),
                           code={"esc.py": ESCAPERS.format(t="92.")}, name="wd")
    logs_show(b, "wd", "started", 2)
    job = dtrain_home / "jobs" / "wd"
    os.kill(read_state(job).watchdog["pid"], signal.SIGKILL)
    st = wait_state(job, lambda s: s.status in TERMINAL_STATUSES)
    assert st.status == "NotResponding" and "watchdog" in st.failure["message"]
    for m in ("sleep 92.1", "sleep 92.2", "esc.py stay"):
        assert alive(m) == [], m


def test_supervisor_and_watchdog_killed_together_wait_exits_5_and_stops_the_rest(tmp_path, dtrain_home, cli):
    # The last resort: no dtrain process of the job is left to clean up, so the next command does it, by
    # the job's marker and by the sessions its processes led (the `env -i` grandchild carries no marker).
    b, plan, info = submit(tmp_path, dist_body("pytorch", 1, 2, command="python esc.py stay; echo done"),
                           code={"esc.py": ESCAPERS.format(t="91.")}, name="both")
    logs_show(b, "both", "started", 2)
    st = read_state(dtrain_home / "jobs" / "both")
    os.kill(st.watchdog["pid"], signal.SIGSTOP)       # so that it cannot act before it is killed
    os.kill(st.supervisor["pid"], signal.SIGKILL)
    os.kill(st.watchdog["pid"], signal.SIGKILL)
    r = cli("wait", "both", env={"DTRAIN_HOME": str(dtrain_home)}, timeout=60)
    assert r.returncode == ExitCode.INFRA, r.stderr
    assert "the local supervisor" in r.stderr and "is gone" in r.stderr
    for m in ("sleep 91.1", "sleep 91.2", "esc.py stay"):
        assert alive(m) == [], m


def test_submit_wait_exits_5_when_the_supervisor_is_killed(tmp_path, dtrain_home):
    import subprocess
    import sys

    spec = tmp_path / "job.yml"
    spec.write_text("command: sleep 90.7; echo never\nenvironment: azureml:env@latest\n")
    env = {**os.environ, "DTRAIN_HOME": str(dtrain_home), "NO_COLOR": "1"}
    p = subprocess.Popen([sys.executable, "-m", "dtrain", "submit", str(spec), "--local", "--name", "sw",
                          "--wait"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        job = dtrain_home / "jobs" / "sw"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not cmdline_pids("sleep 90.7"):
            time.sleep(0.05)
        os.kill(read_state(job).supervisor["pid"], signal.SIGKILL)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == ExitCode.INFRA, err
    assert "NotResponding" in err and "the local supervisor" in err and "is gone" in err
    assert alive("sleep 90.7") == []


def test_a_stalled_watchdog_does_not_keep_a_lost_job_running(tmp_path, dtrain_home):
    b, plan, info = submit(tmp_path, dist_body("pytorch", 1, 2, command="python esc.py stay; echo done"),
                           code={"esc.py": ESCAPERS.format(t="89.")}, name="wds")
    logs_show(b, "wds", "started", 2)
    st = read_state(dtrain_home / "jobs" / "wds")
    wd = st.watchdog
    os.kill(wd["pid"], signal.SIGSTOP)
    os.kill(st.supervisor["pid"], signal.SIGKILL)
    while procs.is_alive(st.supervisor["pid"], st.supervisor["start_time"]):
        time.sleep(0.01)                   # (a zombie: its parent, the watchdog, is stopped)
    info = b.status("wds")                 # waits a moment for the watchdog, then finishes the job itself
    assert info.status == "NotResponding"
    for m in ("sleep 89.1", "sleep 89.2", "esc.py stay"):
        assert alive(m) == [], m
    assert alive(f"local.watchdog {dtrain_home}") == []
