"""One bad state.json never hides or breaks the other local jobs: it is shown as Unreadable, named by its
file; `wait` on it exits 7 (lost track)."""
import json

import pytest

from dtrain.backends.local import LocalBackend

GOOD = {"name": "good_job", "status": "Completed", "created": "2026-01-01T00:00:00.000+00:00",
        "started": None, "ended": "2026-01-01T00:00:01.000+00:00", "token": "good_job:x", "nodes": 1,
        "processes_per_node": 1, "tags": {}, "supervisor": None, "processes": [], "failure": None}

SHAPES = {
    "list_json": b"[]",
    "no_status": json.dumps({k: v for k, v in GOOD.items() if k != "status"}).encode(),
    "truncated": json.dumps(GOOD).encode()[:40],
    "empty": b"",
    "not_utf8": b"\xff\xfe{\x00",
    "status_not_text": json.dumps({**GOOD, "status": 5}).encode(),
    "scalar": b"42",
    "created_not_a_date": json.dumps({**GOOD, "created": "yesterday"}).encode(),
    "tags_a_list": json.dumps({**GOOD, "tags": ["a"]}).encode(),
    "supervisor_a_number": json.dumps({**GOOD, "status": "Running", "supervisor": 12}).encode(),
}


def _job(home, name, raw: bytes):
    d = home / "jobs" / name
    (d / "user_logs").mkdir(parents=True)
    (d / "plan.json").write_text(json.dumps({"ranks": []}))
    (d / "state.json").write_bytes(raw)


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    _job(h, "good_job", json.dumps(GOOD).encode())
    return h


@pytest.mark.slow   # three dtrain processes per shape
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_list_shows_the_corrupt_job_and_every_other(cli, home, shape):
    _job(home, f"bad_{shape}", SHAPES[shape])
    env = {"DTRAIN_HOME": str(home)}
    r = cli("list", "--local", env=env)
    assert r.returncode == 0, r.stderr
    rows = {line.split("\t")[0]: line.split("\t")[1] for line in r.stdout.splitlines()}
    assert rows == {"good_job": "Completed", f"bad_{shape}": "Unreadable"}
    assert str(home / "jobs" / f"bad_{shape}" / "state.json") in r.stderr
    js = json.loads(cli("list", "--local", "-o", "json", env=env).stdout)
    assert {j["name"]: j["status"] for j in js} == rows

    w = cli("watch", "--local", "--once", env=env)
    assert w.returncode != 70 and "Traceback" not in w.stderr
    assert "good_job" in w.stdout and "Unreadable" in w.stdout

    wait = cli("wait", f"bad_{shape}", env=env)
    assert wait.returncode == 7, wait.stderr
    assert "state.json" in wait.stderr
    assert cli("wait", "good_job", env=env).returncode == 0


def test_the_backend_api_names_the_file(home):
    _job(home, "bad", b"[]")
    b = LocalBackend(home)
    info = b.status("bad")
    assert info.status == "Unreadable" and info.terminal
    assert str(home / "jobs" / "bad" / "state.json") in info.failure.message
    assert [i.name for i in b.list(names=["bad", "good_job"])] == ["good_job", "bad"]
    assert [i.name for i in b.list(experiment="e")] == []       # a filter cannot know a corrupt job's fields
