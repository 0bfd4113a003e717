"""A user's second day, through the real command line in process over a fake backend registered the real
way: a grid addressed as one (status, wait, cancel by its name; several names; --tag), and a chain that
stopped says why instead of looking like more attempts are coming."""
from __future__ import annotations

import json

import pytest

from fakes import run_main as run


@pytest.fixture
def grid4(fake_backend, fake_spec, capsys):
    """A grid of 4 submitted without --wait; the lr=3 job will fail."""
    fake_backend.script = ["Queued"] + ["Running"] * 20 + ["Completed"]     # running while the commands look
    code, out, err = run(capsys, "submit", fake_spec, "--local", "--matrix", "inputs.lr=1,2,3,4", "--name", "gg",
                         "--max-parallel", "4")
    assert code == 0, err
    names = out.split()
    assert len(names) == 4
    fake_backend.scripts.update({n: ["Running", "Failed"] for n in names if "-3-" in n})
    for n in names:
        if "-3-" in n:
            fake_backend.add(fake_backend.jobs[n], ["Running", "Failed"])
    return names


def test_status_wait_and_cancel_take_a_grids_name(grid4, fake_backend, capsys):
    code, out, _ = run(capsys, "status", "gg")
    assert sorted(line.split("\t")[0] for line in out.splitlines()) == sorted(grid4)
    code, out, _ = run(capsys, "status", "gg", "-o", "json")
    assert sorted(d["name"] for d in json.loads(out)) == sorted(grid4)
    code, _, err = run(capsys, "wait", "gg")
    assert code == 1, err                                    # the worst outcome: one of the 4 Failed
    code, _, _ = run(capsys, "status", "gg")
    assert code == 1                                         # a grid's status: the worst of those that ended
    code, out, _ = run(capsys, "cancel", "gg")                # all 4 had ended: the worst of them, Failed
    assert code == 1 and len(out.splitlines()) == 4


def test_logs_of_a_grid_pick_one_job(grid4, fake_backend, capsys):
    fake_backend.lines[grid4[1]] = ["from the second"]
    code, _, err = run(capsys, "logs", "gg")
    assert code == 2 and "--member" in err and grid4[1] in err
    code, out, _ = run(capsys, "logs", "gg", "--member", "1")
    assert code == 0 and out.strip().endswith("from the second")


def test_cancel_by_tag_cancels_exactly_the_matching_jobs(grid4, fake_backend, capsys):
    one = grid4[0]
    code, out, err = run(capsys, "cancel", "--tag", "dtrain.matrix.inputs.lr=1")
    assert code == 3, err                                     # the one it matched is Canceled
    assert fake_backend.canceled == [one] and out.split("\t")[0] == one


def test_several_names_and_an_unknown_one(grid4, fake_backend, capsys):
    code, out, _ = run(capsys, "status", grid4[0], grid4[1])
    assert code == 0 and [line.split("\t")[0] for line in out.splitlines()] == grid4[:2]
    code, _, err = run(capsys, "status", "nope")
    assert code == 2 and "nope" in err
    code, _, err = run(capsys, "wait")
    assert code == 2 and "--tag" in err


def test_a_failed_attempt_is_said_not_to_be_retried(fake_backend, fake_spec, capsys, monkeypatch):
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "0")
    fake_backend.scripts["f"] = ["Queued", "Running", "Failed"]
    code, _, err = run(capsys, "submit", fake_spec, "--local", "--name", "f", "--retries", "2", "--wait", "-q")
    assert code == 1 and fake_backend.submitted == ["f"]
    assert "retried only with --retry-on failed" in err
    code, out, _ = run(capsys, "list")
    assert "attempt 1/3, not retried" in out


def test_the_summary_of_a_re_attached_submit_counts_from_the_submit():
    from datetime import datetime, timedelta, timezone

    from dtrain.backends.base import JobInfo
    from dtrain.progress import since_submit, summary_line

    now = datetime.now(timezone.utc)
    info = JobInfo("j", "local", "Completed", created=(now - timedelta(seconds=21)).isoformat(),
                   started=(now - timedelta(seconds=21)).isoformat(), ended=now.isoformat())
    assert since_submit(info, 5.0, now) == 21.0               # re-attached 5 s ago: 21 s since the submit
    assert since_submit(JobInfo("j", "local", "Completed"), 5.0) == 5.0
    assert "Completed in 0:2" in summary_line(info, 5.0)      # not "in 0:05, ran 0:21"
