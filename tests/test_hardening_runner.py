"""Hardening of what the runner does around chains and grids (issue: hardening round 3): a chain whose
recipe cannot be stored is refused before anything is sent, a recipe of the wrong shape never crashes,
canceling between attempts ends the chain Canceled, grids are counted before they are built, and two
submits of one name on this machine start it once."""
from __future__ import annotations

import json
import threading
import time

import pytest

from fakes import run_main as run


def test_a_chain_whose_recipe_cannot_be_stored_is_refused_before_submit(fake_backend, fake_spec, capsys, dtrain_home):
    dtrain_home.mkdir(parents=True, exist_ok=True)
    (dtrain_home / "chains").write_text("not a folder")            # as root, a read-only folder would not stop it
    code, _, err = run(capsys, "submit", fake_spec, "--local", "--name", "c", "--retries", "2", "--wait")
    assert code == 6 and "recipe" in err and "chains" in err
    assert fake_backend.submit_calls == []


@pytest.mark.parametrize("doc", [{"spec": {"data": "hello"}}, {"spec": {"data": {}}}, [], "str",
                                 {"spec": {"data": {"command": "x"}, "base_dir": 3}}, {"spec": None}])
def test_a_recipe_of_the_wrong_shape_is_no_recipe(fake_backend, fake_spec, capsys, dtrain_home, monkeypatch, doc):
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "0")
    fake_backend.scripts["c"] = ["Queued", "NotResponding"]
    assert run(capsys, "submit", fake_spec, "--local", "--name", "c", "--retries", "1")[0] == 0
    (dtrain_home / "chains" / "c.json").write_text(json.dumps(doc))
    code, _, err = run(capsys, "wait", "c")
    assert code == 5 and "no recipe" in err, err                       # ended with its attempt's outcome
    code, _, err = run(capsys, "cancel", "c")
    assert code in (0, 2) and "internal error" not in err, err


def test_cancel_between_attempts_ends_the_chain_canceled(fake_backend, fake_spec, capsys, monkeypatch):
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "600")               # attempt 2 not due yet
    fake_backend.scripts["c"] = ["Queued", "NotResponding"]
    assert run(capsys, "submit", fake_spec, "--local", "--name", "c", "--retries", "2")[0] == 0
    code, out, _ = run(capsys, "cancel", "c")
    assert code == 0 and out.split("\t")[1].strip() == "Canceled"
    code, _, _ = run(capsys, "wait", "c")
    assert code == 3 and fake_backend.submitted == ["c"]


def test_a_grid_is_counted_before_it_is_built(fake_backend, fake_spec, capsys):
    many = ",".join(str(i) for i in range(100))
    argv = ["submit", fake_spec, "--local", "--matrix", f"inputs.lr={many}", "--matrix", f"inputs.a={many}",
            "--matrix", "inputs.b=1,2,3,4,5,6,7,8,9,10", "--dry-run"]
    code, _, err = run(capsys, *argv)
    assert code == 2 and "100,000 jobs" in err and "--max-jobs 100000" in err
    code, _, err = run(capsys, "submit", fake_spec, "--local", "--matrix", "inputs.lr=1,2,3", "--max-jobs", "2",
                       "--dry-run")
    assert code == 2 and "3 jobs, more than 2" in err
    code, out, _ = run(capsys, "submit", fake_spec, "--local", "--matrix", "inputs.lr=1,2,3", "--max-jobs", "3",
                       "--dry-run")
    assert code == 0 and len(out.splitlines()) == 3
    assert fake_backend.submit_calls == []


def test_matrix_over_the_name_is_refused(fake_backend, fake_spec, capsys):
    code, _, err = run(capsys, "submit", fake_spec, "--local", "--matrix", "name=a,b", "--dry-run")
    assert code == 2 and "--name" in err


def test_two_submits_of_one_name_on_this_machine_start_it_once(fake_backend, fake_spec):
    from dtrain.backends.base import SubmitOptions
    from dtrain.runner import Runner

    real = type(fake_backend).submit

    def slow_submit(self, plan):            # look-up, then a slow create: the race a lock closes
        if plan.name in self.jobs:
            return self.jobs[plan.name]
        time.sleep(0.3)
        self.jobs.pop(plan.name, None)
        return real(self, plan)

    fake_backend.submit = slow_submit.__get__(fake_backend)
    threads = [threading.Thread(target=lambda: Runner().submit(fake_spec, SubmitOptions(name="race"), local=True))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake_backend.submitted == ["race"]
