"""`dtrain clean --envs`: job environments ($DTRAIN_HOME/envs, jobenv.py) go when no unfinished job names them,
none used them for the age and no build holds their lock; a reuse renews their last use. Fake folders, no
venv is built: fast."""
import fcntl
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from dtrain.backends.local import jobenv, procs

DAY = 86400


def _job(home, name, status, env, supervisor=None, ended_days_ago=None):
    d = home / "jobs" / name
    d.mkdir(parents=True)
    ended = (datetime.now(timezone.utc) - timedelta(days=ended_days_ago)).isoformat() if ended_days_ago else None
    state = {"name": name, "status": status, "created": datetime.now(timezone.utc).isoformat(), "token": f"{name}:t",
             "ended": ended, "supervisor": supervisor, "processes": [], "failure": None, "tags": {}}
    (d / "state.json").write_text(json.dumps(state))
    (d / "plan.json").write_text(json.dumps({"ranks": [], "job_env": {"path": str(home / "envs" / env)}}))


def _env(home, name, days_ago, ready=True):
    d = home / "envs" / name
    (d / "lib").mkdir(parents=True)
    (d / "lib" / "pkg.py").write_text("x" * 2000)
    then = time.time() - days_ago * DAY
    if ready:
        (d / jobenv.READY).write_text("{}")
        os.utime(d / jobenv.READY, (then, then))
    os.utime(d, (then, then))
    return d


@pytest.fixture
def home(tmp_path):
    """running uses env `run` (30 days since built: a long job); done (finished) used `old`; `recent` was
    reused an hour ago; `half` is a killed build; `busy` is being built right now (its lock is held)."""
    h = tmp_path / "home"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    _job(h, "running", "Running", "run", supervisor={"pid": sleeper.pid, "start_time": procs.start_time(sleeper.pid)})
    _job(h, "done", "Completed", "old", ended_days_ago=20)
    for name, days, ready in (("run", 30, True), ("old", 30, True), ("recent", 1 / 24, True), ("half", 30, False),
                              ("busy", 30, True)):
        _env(h, name, days, ready)
    fd = os.open(h / "envs" / "busy.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield h
    os.close(fd)
    sleeper.kill()
    sleeper.wait()


def _envs(home):
    return sorted(p.name for p in (home / "envs").iterdir() if not p.name.endswith(".lock"))


def test_dry_run_lists_the_environments_nothing_needs(cli, home):
    env = {"DTRAIN_HOME": str(home)}
    r = cli("clean", "--older-than", "7d", "--envs", "--dry-run", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["done", f"{home / 'envs' / 'half'}\t2.0 kB", f"{home / 'envs' / 'old'}\t2.0 kB"]
    assert "would remove 1 job folder(s) and 2 job environment(s)" in r.stderr
    assert _envs(home) == ["busy", "half", "old", "recent", "run"]
    rep = json.loads(cli("clean", "--older-than", "7d", "--envs", "--dry-run", "-o", "json", env=env).stdout)
    assert [e["path"] for e in rep["envs"]] == [str(home / "envs" / "half"), str(home / "envs" / "old")]
    assert rep["envs"][1]["bytes"] == 2002 and rep["envs"][1]["last_used"].startswith(
        datetime.fromtimestamp(time.time() - 30 * DAY, timezone.utc).date().isoformat())


def test_clean_envs_keeps_a_running_jobs_a_recent_and_a_busy_environment(cli, home):
    r = cli("clean", "--older-than", "7d", "--envs", "-o", "json", env={"DTRAIN_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert _envs(home) == ["busy", "recent", "run"]
    assert json.loads(r.stdout)["bytes_freed"] >= 4002
    assert (home / "envs" / "old.lock").is_file()          # lock files stay: one removed under a waiter races
    assert not (home / "jobs" / "done").exists() and (home / "jobs" / "running").is_dir()
    r = cli("clean", "--older-than", "0s", "--envs", env={"DTRAIN_HOME": str(home)})
    assert r.returncode == 0 and _envs(home) == ["busy", "run"]            # any age: still not the busy or running


def test_without_envs_no_environment_goes(cli, home):
    assert cli("clean", "--older-than", "0s", env={"DTRAIN_HOME": str(home)}).returncode == 0
    assert _envs(home) == ["busy", "half", "old", "recent", "run"]


def test_an_unfinished_job_whose_plan_is_unreadable_keeps_every_environment(cli, home):
    (home / "jobs" / "running" / "plan.json").write_text("{not json")
    r = cli("clean", "--older-than", "7d", "--envs", env={"DTRAIN_HOME": str(home)})
    assert r.returncode == 0 and _envs(home) == ["busy", "half", "old", "recent", "run"]
    assert "an unfinished job's plan cannot be read, so none was removed" in r.stderr


def test_a_reuse_renews_the_environments_last_use(home):
    d = home / "envs" / "old"
    env = jobenv.JobEnv(hash="old", path=str(d), python=None, requirements="", conda_file="env.yml", cwd=str(home))
    assert jobenv.ensure(env) is False                                      # there: reused, not built
    assert time.time() - (d / jobenv.READY).stat().st_mtime < 60
