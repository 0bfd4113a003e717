"""Local backend with real processes: lifecycle, failure, cancel, timeout, a killed supervisor, snapshots,
idempotent submits, concurrent readers, logs."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from dtrain.backends.base import SubmitOptions
from dtrain.backends.local import LocalBackend
from dtrain.backends.local import procs
from dtrain.backends.local.store import read_state
from dtrain.errors import UsageError
from dtrain.exitcodes import ExitCode
from test_local_plan import dist_body, make_spec

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _stop_leftover_jobs(dtrain_home):
    """A failing test must not leave processes running: cancel whatever is still active."""
    yield
    jobs = dtrain_home / "jobs"
    if jobs.is_dir():
        b = LocalBackend(dtrain_home)
        for d in jobs.iterdir():
            if not d.name.startswith(".") and b.knows(d.name) and not b.status(d.name).terminal:
                b.cancel(d.name)


def wait_for(b: LocalBackend, name: str, timeout: float = 60, pred=lambda i: i.terminal):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = b.status(name)
        if pred(info):
            return info
        time.sleep(0.05)
    raise AssertionError(f"job {name} still {b.status(name).status} after {timeout} s")


def cmdline_pids(marker: str) -> list[int]:
    """Processes whose command line contains marker: independent of the backend's own bookkeeping."""
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{e}/stat") as f:
                    st = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker in cmd and st != "Z" and int(e) != os.getpid():
                out.append(int(e))
    return out


def no_job_processes(b: LocalBackend, name: str, marker: str | None = None, timeout: float = 5.0) -> bool:
    token = read_state(b.home / "jobs" / name).token
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = procs.job_pids(token) + (cmdline_pids(marker) if marker else [])
        if not left:
            return True
        time.sleep(0.05)
    return False


def submit(tmp_path, body, *, code=None, name=None, **opts):
    spec = make_spec(tmp_path, body, code=code)
    b = LocalBackend()
    plan = b.plan(spec, SubmitOptions(name=name, **opts))
    return b, plan, b.submit(plan)


def test_completed_job_and_logs(tmp_path, dtrain_home):
    b, plan, info = submit(tmp_path, dist_body("pytorch", 2, 1, command="echo hello $RANK; printf tail"),
                           name="ok")
    assert info.name == "ok" and info.backend == "local" and info.status in ("Queued", "Starting", "Running")
    info = wait_for(b, "ok")
    assert info.status == "Completed" and info.failure is None and not info.timed_out
    assert info.nodes == 2 and info.processes_per_node == 1 and info.url == str(dtrain_home.resolve() / "jobs" / "ok")
    assert info.created <= info.started <= info.ended
    lines = list(b.logs("ok"))
    assert [(l.rank, l.node, l.text) for l in lines] == [(0, 0, "hello 0"), (0, 0, "tail"),
                                                         (1, 1, "hello 1"), (1, 1, "tail")]
    assert lines[0].source == "user_logs/std_log_process_00.txt"
    assert [l.text for l in b.logs("ok", rank=1)] == ["hello 1", "tail"]
    with pytest.raises(UsageError):
        list(b.logs("ok", rank=7))
    assert b.knows("ok") and not b.knows("nope")
    st = read_state(dtrain_home / "jobs" / "ok")
    assert [p["exit_code"] for p in st.processes] == [0, 0]


def test_fail_fast_names_the_rank_and_stops_the_rest(tmp_path, dtrain_home, monkeypatch):
    monkeypatch.setenv("DTRAIN_LOCAL_GRACE_S", "1")
    script = """import os, signal, sys, time, traceback
r = int(os.environ["RANK"])
if r == 1:
    time.sleep(0.5)
    print("about to fail", flush=True)
    try:
        raise ValueError("boom on rank 1")
    except ValueError:
        traceback.print_exc()
    sys.exit(3)
if r == 2:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)   # needs the SIGKILL after the grace period
time.sleep(67.1)
"""
    t0 = time.monotonic()
    b, plan, info = submit(tmp_path, dist_body("pytorch", 2, 2, command="python fail.py 67.1"),
                           code={"fail.py": script}, name="ff")
    info = wait_for(b, "ff", 30)
    took = time.monotonic() - t0
    assert info.status == "Failed"
    f = info.failure
    assert (f.rank, f.node, f.exit_code) == (1, 0, 3)
    assert "rank 1" in f.message and "code 3" in f.message
    assert "about to fail" in f.last_lines
    assert f.traceback[0].startswith("Traceback (most recent call last):")
    assert f.traceback[-1] == "ValueError: boom on rank 1"
    assert took < 12, took
    assert no_job_processes(b, "ff", marker="fail.py 67.1")
    codes = {p["rank"]: p["exit_code"] for p in read_state(dtrain_home / "jobs" / "ff").processes}
    assert codes[1] == 3 and codes[2] == 128 + signal.SIGKILL and codes[0] == 128 + signal.SIGTERM


def test_cancel_stops_every_process_and_is_idempotent(tmp_path, dtrain_home):
    b, plan, info = submit(tmp_path, dist_body("pytorch", 1, 2, command="sleep 71.3 & sleep 71.3; wait"),
                           name="cx")
    wait_for(b, "cx", 30, lambda i: i.status == "Running")
    time.sleep(0.3)
    assert cmdline_pids("sleep 71.3")
    info = b.cancel("cx")
    assert info.status == "Canceled" and not info.timed_out
    assert no_job_processes(b, "cx", marker="sleep 71.3")
    again = b.cancel("cx")
    assert again.status == "Canceled" and again.ended == info.ended


def test_limits_timeout_cancels_the_job(tmp_path, dtrain_home):
    t0 = time.monotonic()
    b, plan, info = submit(tmp_path, "limits: {timeout: 2}\n" + dist_body("pytorch", 1, 2, command="sleep 73.9"),
                           name="to")
    info = wait_for(b, "to", 30)
    assert info.status == "Canceled"            # Azure: the job is cancelled after limits.timeout
    assert info.timed_out
    assert "timed out after 2 s (limits.timeout)" in info.failure.message
    assert 2 <= time.monotonic() - t0 < 10
    assert no_job_processes(b, "to", marker="sleep 73.9")


def test_killed_supervisor_leaves_no_process_and_is_infrastructure(tmp_path, dtrain_home):
    b, plan, info = submit(tmp_path, dist_body("pytorch", 2, 1,
                                               command="sleep 79.1 & (sleep 79.1; true) & sleep 79.1; wait"),
                           name="sk")
    wait_for(b, "sk", 30, lambda i: i.status == "Running")
    time.sleep(0.3)
    assert len(cmdline_pids("sleep 79.1")) >= 6
    sup = read_state(dtrain_home / "jobs" / "sk").supervisor
    os.kill(sup["pid"], signal.SIGKILL)
    info = wait_for(b, "sk", 10)
    assert info.status == "NotResponding"       # a lost node: infrastructure (exit 5), not a job failure
    assert "supervisor" in info.failure.message and "gone" in info.failure.message
    assert "SIGKILL" in info.failure.message
    assert no_job_processes(b, "sk", marker="sleep 79.1")


def test_reused_pid_is_not_trusted(tmp_path, dtrain_home):
    b, plan, info = submit(tmp_path, dist_body("pytorch", 1, 1, command="sleep 83.3"), name="reuse")
    wait_for(b, "reuse", 30, lambda i: i.status == "Running")
    job = dtrain_home / "jobs" / "reuse"
    st = read_state(job)
    real = dict(st.supervisor)
    from dtrain.backends.local.store import update_state

    watchdog = dict(st.watchdog)
    # Pretend the pids of the supervisor and its watchdog now belong to another process (this test process:
    # alive, other start).
    def pretend(s):
        s.supervisor = {"pid": os.getpid(), "start_time": real["start_time"]}
        s.watchdog = {"pid": os.getpid(), "start_time": watchdog["start_time"]}

    update_state(job, pretend)
    info = b.status("reuse")
    assert info.status == "NotResponding"
    os.kill(watchdog["pid"], signal.SIGKILL)     # the real ones, left alone by the test
    os.kill(real["pid"], signal.SIGKILL)
    assert no_job_processes(b, "reuse", marker="sleep 83.3")


def test_snapshot_isolates_the_run_from_edits(tmp_path, dtrain_home):
    code = {"train.py": "import time, pathlib\ntime.sleep(1.0)\nprint('version', 1)\n"
                        "print(sorted(str(p) for p in pathlib.Path('.').rglob('*') if p.is_file()))\n",
            "notes.log": "x", "data/big.bin": "x", ".gitignore": "*.log\ndata/\n"}
    b, plan, info = submit(tmp_path, "command: python train.py\n", code=code, name="snap")
    (tmp_path / "src" / "train.py").write_text("print('version', 2)\n")     # edit during the run
    info = wait_for(b, "snap", 30)
    assert info.status == "Completed"
    texts = [l.text for l in b.logs("snap")]
    assert texts[0] == "version 1"
    assert texts[1] == str(sorted([".gitignore", "train.py"]))


def test_idempotent_resubmit_and_name_clash(tmp_path, dtrain_home):
    b, plan, first = submit(tmp_path, "command: echo one\n", name="idem")
    wait_for(b, "idem", 30)
    again = b.submit(b.plan(make_spec(tmp_path, "command: echo one\n"), SubmitOptions(name="idem")))
    assert again.name == "idem" and again.created == first.created and again.status == "Completed"
    assert len(list((dtrain_home / "jobs").iterdir())) == 1
    with pytest.raises(UsageError) as exc:
        b.submit(b.plan(make_spec(tmp_path, "command: echo two\n"), SubmitOptions(name="idem")))
    assert exc.value.exit_code == ExitCode.INVALID and "already exists" in exc.value.message


def test_outputs_are_created_and_written(tmp_path, dtrain_home):
    b, plan, info = submit(tmp_path, "command: echo hi > ${{outputs.out}}/x.txt && echo $AZURE_ML_OUTPUT_out\n"
                                     "outputs:\n  out: {type: uri_folder}\n", name="outs")
    assert wait_for(b, "outs", 30).status == "Completed"
    out = dtrain_home.resolve() / "jobs" / "outs" / "outputs" / "out"
    assert (out / "x.txt").read_text() == "hi\n"
    assert [l.text for l in b.logs("outs")] == [str(out)]


def test_state_readers_never_see_partial_json(tmp_path, dtrain_home):
    b, plan, info = submit(tmp_path, dist_body("pytorch", 2, 2, command="sleep 0.5; echo done"), name="rd")
    path = dtrain_home / "jobs" / "rd" / "state.json"
    seen_by, errors = [[], [], []], []

    def reader(seen):
        while True:
            try:
                s = json.loads(path.read_text())
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
                continue
            if not seen or seen[-1] != s["status"]:
                seen.append(s["status"])
            if s["status"] in ("Completed", "Failed", "Canceled"):
                return

    threads = [threading.Thread(target=reader, args=(seen,)) for seen in seen_by]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    order = ["Queued", "Starting", "Running", "Completed"]
    for seen in seen_by:
        assert seen[-1] == "Completed"
        assert [order.index(s) for s in seen] == sorted(order.index(s) for s in seen)


def test_follow_logs_loses_and_repeats_nothing(tmp_path, dtrain_home):
    script = """import os, sys, time
r = os.environ["RANK"]
for i in range(300):
    sys.stdout.write(f"r{r} line {i}")
    if i % 50 == 0:
        sys.stdout.flush(); time.sleep(0.02)
    sys.stdout.write("\\n")
    if i % 7 == 0:
        sys.stdout.flush()
sys.stdout.write(f"r{r} no newline at the end")
"""
    b, plan, info = submit(tmp_path, "limits: {timeout: 60}\n" + dist_body("pytorch", 1, 2, command="python w.py"),
                           code={"w.py": script}, name="fl")
    got = list(b.logs("fl", follow=True))
    assert b.status("fl").status == "Completed"
    for r in (0, 1):
        mine = [l.text for l in got if l.rank == r]
        assert mine == [f"r{r} line {i}" for i in range(300)] + [f"r{r} no newline at the end"]
    assert list(b.logs("fl")) == sorted(got, key=lambda l: l.rank)  # same lines when read afterwards


def test_list_newest_first_with_filters(tmp_path, dtrain_home):
    b = LocalBackend()
    for i, exp in enumerate(["a", "b", "a"]):
        spec = make_spec(tmp_path, f"command: echo {i}\nexperiment_name: {exp}\ntags: {{n: '{i}'}}\n")
        b.submit(b.plan(spec, SubmitOptions(name=f"job{i}")))
        time.sleep(0.02)
    for i in range(3):
        wait_for(b, f"job{i}", 30)
    assert [j.name for j in b.list()] == ["job2", "job1", "job0"]
    assert [j.name for j in b.list(experiment="a")] == ["job2", "job0"]
    assert [j.name for j in b.list(tags={"n": "1"})] == ["job1"]
    assert [j.name for j in b.list(limit=1)] == ["job2"]


def test_cli_submit_wait_exit_codes(tmp_path, dtrain_home, cli):
    ok = tmp_path / "ok.yml"
    ok.write_text("command: echo fine\nenvironment: azureml:env@latest\ncompute: local\n")
    r = cli("submit", ok, "--wait", env={"DTRAIN_HOME": str(dtrain_home)}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "fine" in r.stdout and "not used locally" in r.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text("command: exit 3\nenvironment: azureml:env@latest\n")
    r = cli("submit", bad, "--local", "--wait", env={"DTRAIN_HOME": str(dtrain_home)}, timeout=60)
    assert r.returncode == ExitCode.JOB_FAILED, r.stderr
    slow = tmp_path / "slow.yml"
    slow.write_text("command: sleep 89.7\nenvironment: azureml:env@latest\nlimits: {timeout: 1}\n")
    r = cli("submit", slow, "--local", "--wait", env={"DTRAIN_HOME": str(dtrain_home)}, timeout=60)
    assert r.returncode == ExitCode.TIMEOUT, r.stderr
    assert not cmdline_pids("sleep 89.7")
