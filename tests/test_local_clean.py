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


# --- --datastores: the checkpoint folders of removed jobs ---------------------------------------------

def _uses(home, name, writes=(), reads=()):
    """Record in NAME's plan.json the datastore folders it writes (output_dirs) and reads (inputs), as
    submit does, and put a 3000-byte checkpoint in each folder it writes."""
    ds = home / "datastores"
    plan = {"ranks": [], "output_dirs": [str(ds / w) for w in writes] + [str(home / "jobs" / name / "outputs")],
            "inputs": {f"i{k}": str(ds / r) for k, r in enumerate(reads)} | {"lr": "0.1"}}
    (home / "jobs" / name / "plan.json").write_text(json.dumps(plan))
    for w in writes:
        (ds / w).mkdir(parents=True, exist_ok=True)
        (ds / w / "ckpt.pt").write_text("c" * 3000)


@pytest.fixture
def stores(tmp_path):
    """done (ended 10 days ago) and running, each with its ${{name}} checkpoint folder; young (ended an hour
    ago) shares a folder with done; reader (running) reads a folder done wrote into; a user's own file sits
    in the store's folder."""
    h = tmp_path / "home"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    from dtrain.backends.local import procs
    sup = {"pid": sleeper.pid, "start_time": procs.start_time(sleeper.pid)}
    _job(h, "done", "Completed", 10)
    _job(h, "running", "Running", supervisor=sup)
    _job(h, "young", "Completed", 1 / 24)
    _job(h, "reader", "Running", supervisor=sup)
    _uses(h, "done", writes=["wbs/dtrain/done/checkpoints", "wbs/shared/ckpt", "wbs/data/part1"])
    _uses(h, "running", writes=["wbs/dtrain/running/checkpoints"])
    _uses(h, "young", writes=["wbs/shared/ckpt"])
    _uses(h, "reader", reads=["wbs/data"])
    (h / "datastores" / "wbs" / "mine.txt").write_text("user data")
    yield h
    sleeper.kill()
    sleeper.wait()


def test_datastores_dry_run_lists_the_checkpoint_folders_of_cleaned_jobs(cli, stores):
    env = {"DTRAIN_HOME": str(stores)}
    ds = stores / "datastores" / "wbs"
    r = cli("clean", "--older-than", "0s", "--datastores", "--dry-run", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["done", "young", f"{ds / 'dtrain' / 'done' / 'checkpoints'}\t3.0 kB",
                                     f"{ds / 'shared' / 'ckpt'}\t3.0 kB"]
    assert "would remove 2 job folder(s) and 2 datastore folder(s)" in r.stderr
    assert f"{ds / 'data' / 'part1'}: also used by reader; left alone" in r.stderr
    assert (ds / "dtrain" / "done" / "checkpoints" / "ckpt.pt").is_file() and (ds / "shared" / "ckpt").is_dir()
    assert _names(stores) == ["done", "reader", "running", "young"]
    rep = json.loads(cli("clean", "--older-than", "0s", "--datastores", "--dry-run", "-o", "json", env=env).stdout)
    assert rep["dry_run"] is True and rep["bytes_freed"] > 6000
    assert [(d["path"], d["bytes"], d["jobs"]) for d in rep["datastores"]] == [
        (str(ds / "dtrain" / "done" / "checkpoints"), 3000, ["done"]),
        (str(ds / "shared" / "ckpt"), 3000, ["done", "young"])]


def test_datastores_go_with_their_jobs_and_a_running_jobs_folder_stays(cli, stores):
    env = {"DTRAIN_HOME": str(stores)}
    ds = stores / "datastores" / "wbs"
    r = cli("clean", "--older-than", "7d", "--datastores", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["removed"] == ["done"]
    assert [d["path"] for d in rep["datastores"]] == [str(ds / "dtrain" / "done" / "checkpoints")]
    assert not (ds / "dtrain" / "done").exists()                         # its parent, left empty, went too
    assert f"{ds / 'shared' / 'ckpt'}: also used by young; left alone" in rep["skipped"]
    assert (ds / "shared" / "ckpt" / "ckpt.pt").is_file() and (ds / "data" / "part1" / "ckpt.pt").is_file()
    assert (ds / "dtrain" / "running" / "checkpoints" / "ckpt.pt").read_text() == "c" * 3000
    assert (ds / "mine.txt").read_text() == "user data"
    assert rep["bytes_freed"] > 3000


def test_datastores_shared_by_removed_jobs_only_go(cli, stores):
    env = {"DTRAIN_HOME": str(stores)}
    ds = stores / "datastores" / "wbs"
    r = cli("clean", "--older-than", "0s", "--datastores", env=env)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted([
        "done", "young", f"{ds / 'dtrain' / 'done' / 'checkpoints'}\t3.0 kB", f"{ds / 'shared' / 'ckpt'}\t3.0 kB"])
    assert "removed 2 job folder(s) and 2 datastore folder(s)" in r.stderr
    assert sorted(p.name for p in ds.iterdir()) == ["data", "dtrain", "mine.txt"]
    assert (ds / "data" / "part1" / "ckpt.pt").is_file()                 # reader reads the folder around it
    assert (ds / "dtrain" / "running" / "checkpoints" / "ckpt.pt").is_file()
    assert _names(stores) == ["reader", "running"]


def test_without_datastores_no_datastore_folder_goes(cli, stores):
    r = cli("clean", "--older-than", "0s", env={"DTRAIN_HOME": str(stores)})
    assert r.returncode == 0, r.stderr and sorted(r.stdout.split()) == ["done", "young"]
    assert (stores / "datastores" / "wbs" / "dtrain" / "done" / "checkpoints" / "ckpt.pt").is_file()


def test_a_remaining_job_whose_plan_is_unreadable_keeps_every_datastore_folder(cli, stores):
    (stores / "jobs" / "running" / "plan.json").write_text("{trunc")
    r = cli("clean", "--older-than", "0s", "--datastores", "-o", "json", env={"DTRAIN_HOME": str(stores)})
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["removed"] == ["done", "young"] and rep["datastores"] == []
    assert any("running cannot be read" in n for n in rep["skipped"])
    assert (stores / "datastores" / "wbs" / "dtrain" / "done" / "checkpoints" / "ckpt.pt").is_file()


def test_datastores_never_follows_a_symlink(cli, tmp_path):
    h = tmp_path / "home"
    _job(h, "done", "Completed", 10)
    outside = tmp_path / "outside"
    (outside / "ckpt").mkdir(parents=True)
    (outside / "ckpt" / "w.pt").write_text("w")
    (h / "datastores" / "wbs").mkdir(parents=True)
    (h / "datastores" / "wbs" / "link").symlink_to(outside)
    (h / "datastores" / "wbs" / "ln2").symlink_to(outside / "ckpt")
    plan = {"output_dirs": [str(h / "datastores" / "wbs" / "link" / "ckpt"), str(h / "datastores" / "wbs" / "ln2"),
                            str(h / "datastores" / "wbs"), str(h / "datastores"), str(tmp_path / "outside")]}
    (h / "jobs" / "done" / "plan.json").write_text(json.dumps(plan))
    r = cli("clean", "--older-than", "0s", "--datastores", "-o", "json", env={"DTRAIN_HOME": str(h)})
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["removed"] == ["done"] and rep["datastores"] == []
    assert sum("is a symlink" in n for n in rep["skipped"]) == 2
    assert (outside / "ckpt" / "w.pt").read_text() == "w"
    assert (h / "datastores" / "wbs" / "link").is_symlink() and (h / "datastores" / "wbs" / "ln2").is_symlink()


def test_datastores_keep_a_running_chains_folder_and_free_a_finished_ones(cli, chains):
    env = {"DTRAIN_HOME": str(chains), "DTRAIN_RETRY_BACKOFF_S": "3600"}
    for chain, names in {"cx": ["cx", "cx-r1"], "cz": ["cz", "cz-r1"]}.items():
        for n in names:                          # every attempt writes the chain's one ${{name}} folder
            _uses(chains, n, writes=[f"wbs/dtrain/{chain}/checkpoints"])
    r = cli("clean", "--older-than", "7d", "--datastores", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    cz = chains / "datastores" / "wbs" / "dtrain" / "cz" / "checkpoints"
    assert [(d["path"], d["jobs"]) for d in rep["datastores"]] == [(str(cz), ["cz", "cz-r1"])]
    assert not cz.exists()
    assert (chains / "datastores" / "wbs" / "dtrain" / "cx" / "checkpoints" / "ckpt.pt").is_file()


def test_datastores_with_snapshots_only_is_a_usage_error(cli, stores):
    r = cli("clean", "--older-than", "0s", "--datastores", "--snapshots-only", env={"DTRAIN_HOME": str(stores)})
    assert r.returncode == 2 and "cannot be used together" in r.stderr and "Traceback" not in r.stderr
    assert (stores / "jobs" / "done" / "snapshot").is_dir()


def test_datastores_of_a_real_local_job(cli, write, dtrain_home):
    """Through a real submit: the plan's output_dirs name the ${{name}} folder the job wrote its checkpoint in."""
    spec = write("job.yml", "command: echo w > ${{outputs.ckpt}}/w.pt\nenvironment: azureml:x:1\ncompute: local\n"
                 "outputs:\n  ckpt: {type: uri_folder, "
                 "path: 'azureml://datastores/wbs/paths/dtrain/${{name}}/checkpoints'}\n")
    r = cli("submit", spec, "--local", "--wait", "--name", "e2e", timeout=60)
    assert r.returncode == 0, r.stderr
    ckpt = dtrain_home / "datastores" / "wbs" / "dtrain" / "e2e" / "checkpoints"
    assert (ckpt / "w.pt").read_text() == "w\n"
    r = cli("clean", "--older-than", "0s", "--datastores", "--dry-run")
    assert r.stdout.splitlines() == ["e2e", f"{ckpt.resolve()}\t2 B"], r.stderr
    r = cli("clean", "--older-than", "0s", "--datastores")
    assert r.returncode == 0, r.stderr
    assert not ckpt.exists() and not (dtrain_home / "datastores" / "wbs" / "dtrain").exists()
    assert (dtrain_home / "datastores" / "wbs").is_dir()
