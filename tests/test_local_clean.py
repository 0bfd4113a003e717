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


def _job(home, name, status, ended_days_ago=None, supervisor=None, tags=None):
    d = home / "jobs" / name
    (d / "snapshot").mkdir(parents=True)
    (d / "snapshot" / "train.py").write_text("x" * 1000)
    (d / "user_logs").mkdir()
    (d / "plan.json").write_text(json.dumps({"ranks": []}))
    state = {"name": name, "status": status, "created": _iso(30), "token": f"{name}:t",
             "ended": _iso(ended_days_ago) if ended_days_ago is not None else None,
             "supervisor": supervisor, "processes": [], "failure": None, "tags": tags or {}}
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


def _chain_tags(chain, k, retries=2):
    return {"dtrain.chain": chain, "dtrain.attempt": str(k), "dtrain.retries": str(retries),
            "dtrain.retry_on": "infrastructure"}


@pytest.fixture
def chains(tmp_path):
    """cx: attempt 1 lost 10 days ago, attempt 2 running; cy: attempt 1 lost 10 days ago, attempt 2
    completed yesterday; cz: both attempts ended 10 days ago; cw: attempt 1 lost, attempt 2 not submitted yet."""
    h = tmp_path / "home"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    from dtrain.backends.local import procs
    _job(h, "cx", "NotResponding", 10, tags=_chain_tags("cx", 1))
    _job(h, "cx-r1", "Running", supervisor={"pid": sleeper.pid, "start_time": procs.start_time(sleeper.pid)},
         tags=_chain_tags("cx", 2))
    _job(h, "cy", "NotResponding", 10, tags=_chain_tags("cy", 1))
    _job(h, "cy-r1", "Completed", 1, tags=_chain_tags("cy", 2))
    _job(h, "cz", "NotResponding", 10, tags=_chain_tags("cz", 1, retries=1))
    _job(h, "cz-r1", "Completed", 10, tags=_chain_tags("cz", 2, retries=1))
    _job(h, "cw", "NotResponding", 0.00001, tags=_chain_tags("cw", 1))
    yield h
    sleeper.kill()
    sleeper.wait()


def test_clean_never_breaks_a_chain(cli, chains):
    env = {"DTRAIN_HOME": str(chains), "DTRAIN_RETRY_BACKOFF_S": "3600"}
    r = cli("clean", "--older-than", "7d", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert sorted(rep["removed"]) == ["cz", "cz-r1"]                     # a finished chain, old as a whole
    assert sorted(rep["kept_running"]) == ["cw", "cx", "cx-r1"]          # running, or its next attempt due
    assert _names(chains) == ["cw", "cx", "cx-r1", "cy", "cy-r1"]        # cy: its last attempt is young
    r = cli("clean", "--older-than", "0", env=env)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["cy", "cy-r1"]
    st = cli("status", "cx", "--local", "-o", "json", env=env)
    assert st.returncode == 0, st.stderr
    assert [a["name"] for a in json.loads(st.stdout)["chain"]["attempts"]] == ["cx", "cx-r1"]


def test_clean_never_follows_a_symlinked_job_folder(cli, tmp_path):
    h = tmp_path / "home"
    (h / "jobs").mkdir(parents=True)
    outside = _job(tmp_path / "elsewhere", "linked", "Completed", 10)
    (h / "jobs" / "linked").symlink_to(outside)
    env = {"DTRAIN_HOME": str(h)}
    for flags in (["--snapshots-only"], []):
        r = cli("clean", "--older-than", "1d", *flags, env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == [] and "0 job folder(s)" in r.stderr
        assert (outside / "snapshot" / "train.py").is_file() and (outside / "state.json").is_file()
        assert _names(h) == ["linked"]
    # a .trash-* link (left by an older clean) goes, and only the link
    (h / "jobs" / ".trash-linked-0000").symlink_to(outside)
    assert cli("clean", "--older-than", "1d", env=env).returncode == 0
    assert _names(h) == ["linked"] and (outside / "snapshot" / "train.py").is_file()


def test_clean_names_a_symlinked_job_folder_it_leaves_alone(tmp_path):
    from dtrain.backends.local import LocalBackend
    from dtrain.backends.local.clean import clean

    h = tmp_path / "home"
    (h / "jobs").mkdir(parents=True)
    outside = _job(tmp_path / "elsewhere", "linked", "Completed", 10)
    (h / "jobs" / "linked").symlink_to(outside)
    rep = clean(LocalBackend(h), 0)
    assert rep.removed == [] and rep.notes == [f"linked: the job folder is a symlink (to {outside}); left alone"]
