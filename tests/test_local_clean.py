"""`dtrain clean`: old finished local jobs go (or only their snapshots); running jobs, unreadable jobs and
the shared datastores folder stay; stale staging folders from a killed submit go."""
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from dtrain.backends.local.clean import parse_age
from dtrain.errors import UsageError


def _iso(days_ago: float) -> str:
    return (datetime.now(timezone.utc) - timedelta(days=days_ago)).isoformat(timespec="milliseconds")


def _job(home, name, status, ended_days_ago=None, supervisor=None):
    d = home / "jobs" / name
    (d / "snapshot").mkdir(parents=True)
    (d / "snapshot" / "train.py").write_text("x" * 1000)
    (d / "user_logs").mkdir()
    (d / "plan.json").write_text(json.dumps({"ranks": []}))
    state = {"name": name, "status": status, "created": _iso(30), "token": f"{name}:t",
             "ended": _iso(ended_days_ago) if ended_days_ago is not None else None,
             "supervisor": supervisor, "processes": [], "failure": None}
    (d / "state.json").write_text(json.dumps(state))
    return d


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    _job(h, "old_done", "Completed", 10)
    _job(h, "old_failed", "Failed", 8)
    _job(h, "new_done", "Completed", 1)
    # a running job: its supervisor is this very sleeping process (pid + start time checked)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    from dtrain.backends.local import procs
    _job(h, "running", "Running", supervisor={"pid": sleeper.pid, "start_time": procs.start_time(sleeper.pid)})
    (h / "jobs" / "bad").mkdir()
    (h / "jobs" / "bad" / "state.json").write_text("[]")
    (h / "datastores" / "blob" / "ckpt").mkdir(parents=True)
    (h / "datastores" / "blob" / "ckpt" / "w.pt").write_text("w")
    stale = h / "jobs" / ".staging-x-1234"
    stale.mkdir()
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    (h / "jobs" / ".staging-y-5678").mkdir()            # a submit copying right now
    yield h
    sleeper.kill()
    sleeper.wait()


def _names(home):
    return sorted(p.name for p in (home / "jobs").iterdir())


def test_dry_run_removes_nothing(cli, home):
    before = _names(home)
    r = cli("clean", "--older-than", "7d", "--dry-run", env={"DTRAIN_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == [".staging-x-1234", "old_done", "old_failed"]
    assert "would remove" in r.stderr and _names(home) == before


def test_clean_removes_only_old_finished_jobs(cli, home):
    r = cli("clean", "--older-than", "7d", "-o", "json", env={"DTRAIN_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert sorted(rep["removed"]) == [".staging-x-1234", "old_done", "old_failed"]
    assert rep["kept_running"] == ["running"] and rep["unreadable"] == ["bad"] and rep["bytes_freed"] > 2000
    assert _names(home) == [".staging-y-5678", "bad", "new_done", "running"]
    assert (home / "datastores" / "blob" / "ckpt" / "w.pt").read_text() == "w"
    assert cli("status", "old_done", "--local", env={"DTRAIN_HOME": str(home)}).returncode == 2


def test_snapshots_only_keeps_state_and_logs(cli, home):
    r = cli("clean", "--older-than", "2d", "--snapshots-only", env={"DTRAIN_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert not (home / "jobs" / "old_done" / "snapshot").exists()
    assert (home / "jobs" / "old_done" / "state.json").is_file()
    assert (home / "jobs" / "new_done" / "snapshot" / "train.py").is_file()
    assert (home / "jobs" / "running" / "snapshot" / "train.py").is_file()
    st = cli("status", "old_done", "--local", "-o", "json", env={"DTRAIN_HOME": str(home)})
    assert json.loads(st.stdout)["status"] == "Completed"


@pytest.mark.parametrize("text,seconds", [("7d", 7 * 86400), ("12h", 43200), ("30m", 1800), ("90s", 90),
                                          ("90", 90), ("1.5h", 5400), ("2w", 14 * 86400)])
def test_ages(text, seconds):
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["", "7 days", "-1d", "d", "7y"])
def test_bad_ages_are_usage_errors(cli, tmp_path, text):
    with pytest.raises(UsageError):
        parse_age(text)
    assert cli("clean", "--older-than", text, env={"DTRAIN_HOME": str(tmp_path)}).returncode == 2
