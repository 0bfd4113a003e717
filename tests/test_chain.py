"""Retry chains, the pure parts and the chain view and the follower's step over a fake backend registered
the real way (tests/fakes.py): names, tags, policy, the decision after each kind of outcome, back-off, the
attempt's spec, and driving a chain (decide, then submit) as an explicit step. The real backends are
exercised end to end in test_retries_local.py and test_retries_azure.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from dtrain import chain as ch
from dtrain.chain_recipe import save_recipe
from dtrain.backends.base import FailureInfo, JobInfo
from dtrain.errors import UsageError
from dtrain.runner import Runner
from dtrain.spec.model import JobSpec
from dtrain.timestamps import epoch

POLICY = ch.Policy(2, "infrastructure")


def job(name, status, k=1, chain="c", policy=POLICY, ended="2026-01-01T00:00:00+00:00", **kw):
    return JobInfo(name=name, backend="local", status=status, tags=policy.tags(chain, k),
                   ended=ended if status in ("Completed", "Failed", "Canceled", "NotResponding", "Paused") else None,
                   **kw)


def test_attempt_names_and_their_length():
    assert [ch.attempt_name("c", k) for k in (1, 2, 3)] == ["c", "c-r1", "c-r2"]
    ch.check_chain_name("a" * 252, 2)                      # a-...-r2: 255 characters
    with pytest.raises(UsageError, match="too long"):
        ch.check_chain_name("a" * 253, 2)


def test_policy_from_flags_and_tags():
    assert ch.check_policy(None, None) is None
    assert ch.check_policy(3, None) == ch.Policy(3, "infrastructure")
    assert ch.check_policy(1, "failed") == ch.Policy(1, "failed")
    for retries, on, msg in [(None, "failed", "only applies with --retries"), (0, None, "at least 1"),
                             (1, "canceled", "must be one of")]:
        with pytest.raises(UsageError, match=msg):
            ch.check_policy(retries, on)
    tags = ch.Policy(2, "failed").tags("c", 3)
    assert tags == {"dtrain.chain": "c", "dtrain.attempt": "3", "dtrain.retries": "2", "dtrain.retry_on": "failed"}
    assert ch.Policy.from_tags(tags) == ch.Policy(2, "failed")
    # the policy has one home, the tags: a value that does not parse makes the job no chain, not a default one
    for bad in ({"dtrain.retries": "x"}, {"dtrain.retries": "0"}, {"dtrain.retries": "2", "dtrain.retry_on": "later"},
                {}):
        assert ch.Policy.from_tags(bad) is None


def test_only_the_first_attempt_of_a_chain_with_retries_is_its_head():
    assert ch.is_chain_head(job("c", "Running"))
    assert not ch.is_chain_head(job("c-r1", "Running", k=2))
    assert not ch.is_chain_head(JobInfo(name="c", backend="local", status="Running"))
    assert not ch.is_chain_head(job("c", "Running", policy=ch.Policy(0)))


@pytest.mark.parametrize("status, kw, policy, action", [
    ("Running", {}, POLICY, "running"),
    ("Completed", {}, POLICY, "done"),
    ("NotResponding", {}, POLICY, "retry"),
    ("Failed", {}, POLICY, "done"),
    ("Failed", {}, ch.Policy(2, "failed"), "retry"),
    ("Canceled", {}, ch.Policy(2, "failed"), "done"),
    ("Canceled", {"timed_out": True}, ch.Policy(2, "failed"), "done"),
    ("Paused", {}, POLICY, "done"),
])
def test_what_follows_each_outcome(status, kw, policy, action, monkeypatch):
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "10")
    d = ch.decide([job("c", status, policy=policy, **kw)], policy)
    assert d.action == action
    if action == "retry":
        assert d.next_attempt == 2
        assert d.due_at == epoch("2026-01-01T00:00:00+00:00") + 10


def test_no_more_than_n_retries(monkeypatch):
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "0")
    lost = [job("c", "NotResponding"), job("c-r1", "NotResponding", k=2)]
    assert ch.decide(lost, POLICY).next_attempt == 3
    assert ch.decide(lost + [job("c-r2", "NotResponding", k=3)], POLICY).action == "done"


def test_backoff_doubles_up_to_a_cap():
    assert [ch.backoff_s(k, 30) for k in (2, 3, 4)] == [30, 60, 120]
    assert ch.backoff_s(12, 30) == ch.BACKOFF_CAP_S


def test_outcomes_and_reasons_of_attempts():
    lost = job("c", "NotResponding", failure=FailureInfo("the local supervisor (pid 7) is gone"))
    rec = ch.attempt_record(lost, 1, successor=True)
    assert (rec["outcome"], rec["exit_code"], rec["reason"]) == ("infrastructure", 5, "the local supervisor (pid 7) is gone")
    # an attempt canceled by dtrain after it was NotResponding (Azure) is still an infrastructure outcome
    assert ch.attempt_record(job("c", "Canceled"), 1, successor=True)["outcome"] == "infrastructure"
    assert ch.attempt_record(job("c", "Canceled"), 1, successor=False)["outcome"] == "canceled"
    assert ch.attempt_record(job("c", "Running"), 1, successor=False)["outcome"] is None


def test_the_attempts_checkpoint_path_is_the_chains():
    data = {"command": "x", "outputs": {
        "ckpt": {"type": "uri_folder", "path": "azureml://datastores/s/paths/a/${{name}}/ckpt"},
        "other": {"type": "uri_folder", "path": "azureml://datastores/s/paths/{name}"},
        "plain": {"type": "uri_folder"}}}
    spec = JobSpec(data=data, base_dir=Path("."))
    out = ch.attempt_spec(spec, "c").data["outputs"]
    assert out["ckpt"]["path"] == "azureml://datastores/s/paths/a/c/ckpt"
    assert out["other"]["path"] == "azureml://datastores/s/paths/c"
    assert "path" not in out["plain"]
    assert spec.data["outputs"]["ckpt"]["path"].endswith("${{name}}/ckpt")   # the original is untouched


@pytest.fixture
def recipe(monkeypatch, tmp_path):
    spec = JobSpec(data={"command": "true"}, base_dir=tmp_path)
    save_recipe("c", spec, {}, True)
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "0")
    return spec


def test_the_follower_step_submits_the_next_attempt_once(recipe, fake_backend):
    fake_backend.add(job("c", "NotResponding"))
    notices = []
    r = Runner(notify=lambda n: notices.append(n.text))
    info = r.advance("c")
    assert fake_backend.submitted == ["c-r1"] and info.name == "c" and info.status == "Queued"
    assert fake_backend.jobs["c-r1"].tags == POLICY.tags("c", 2)
    assert fake_backend.stopped == ["c"]                 # a NotResponding attempt is stopped before the next
    assert [a["name"] for a in info.chain["attempts"]] == ["c", "c-r1"] and info.chain["latest"] == "c-r1"
    assert r.advance("c").status in ("Queued", "Running") and fake_backend.submitted == ["c-r1"]   # not again
    assert any("attempt 2 of 3 submitted: c-r1" in n for n in notices)


def test_reading_a_chain_shows_retrying_and_submits_nothing(recipe, fake_backend):
    fake_backend.add(job("c", "NotResponding"))
    info = Runner().status("c")
    assert info.status == ch.RETRYING and not info.terminal and fake_backend.submitted == []
    assert info.chain["next"]["name"] == "c-r1"
    assert [a["name"] for a in Runner().list()[0].chain["attempts"]] == ["c"] and fake_backend.submitted == []


def test_without_a_recipe_the_step_ends_with_the_last_attempts_outcome(monkeypatch, fake_backend):
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "0")
    fake_backend.add(job("c", "NotResponding"))
    info = Runner().advance("c")
    assert info.status == "NotResponding" and info.terminal and fake_backend.submitted == []
    assert "no recipe" in info.chain["blocked"]


def test_following_a_chain_drives_it_to_its_end(recipe, fake_backend):
    fake_backend.add(job("c", "Running"), ["NotResponding"])
    fake_backend.scripts["c-r1"] = ["Queued", "Running", "Completed"]
    final = Runner().wait("c")
    assert fake_backend.submitted == ["c-r1"]
    assert final["c"].status == "Completed" and final["c"].chain["attempt"] == 2


def test_cancel_stops_the_latest_attempt_and_list_folds_the_chain(recipe, fake_backend):
    for i in (job("c", "NotResponding"), job("c-r1", "Running", k=2), JobInfo("other", "local", "Running")):
        fake_backend.add(i)
    r = Runner()
    r.cancel("c")
    assert fake_backend.canceled == ["c-r1"]
    rows = r.list()
    assert [x.name for x in rows] == ["c", "other"] and rows[0].chain["latest"] == "c-r1"
    assert r.status("other").chain is None and "chain" not in r.status("other").to_dict()


def test_cancel_between_attempts_stops_the_chain(recipe, fake_backend):
    fake_backend.add(job("c", "NotResponding"))
    Runner().cancel("c")
    info = Runner().advance("c")
    # the chain was canceled: it ends Canceled (exit 3), not with the lost attempt's NotResponding (exit 5)
    assert fake_backend.submitted == [] and info.status == "Canceled" and "dtrain cancel c" in info.chain["blocked"]


def test_a_ci_summary_shows_the_attempt_a_chain_ended_on_and_why_it_needed_it(recipe, fake_backend):
    from dtrain import ci

    lost = job("c", "NotResponding")
    lost.failure = FailureInfo(message="node lost")
    fake_backend.add(lost)
    fake_backend.add(job("c-r1", "Completed", k=2))
    md = ci.summary_markdown([Runner().status("c")]).splitlines()
    assert md[4].startswith("| c | Completed, attempt 2/3 |"), md
    at = md.index("#### attempts of c")
    assert md[at + 4:at + 6] == ["| attempt 1/3 | c | NotResponding | infrastructure | node lost |",
                                 "| attempt 2/3 | c-r1 | Completed | completed |  |"], md
