"""A retry chain records each attempt's top cause in its tags (dtrain.cause) and `--retry-on CAUSE` retries a
Failed attempt by its cause: a collective timeout, not a missing package. In process, over the fake backend
(tests/fakes.py); the real local backend's chains: test_retries_local.py, test_eviction_drill.py."""
from __future__ import annotations

import json

import pytest

from dtrain.chain import Policy, check_policy, retryable
from dtrain.backends.base import JobInfo
from dtrain.errors import UsageError
from fakes import run_main

SPEC = "command: python train.py\nenvironment: azureml:env@latest\ncompute: local\n"
GLOO = ["[rank1]:[E110 10:30:00.000000000 ProcessGroupGloo.cpp:144] Rank 1 successfully reached monitoredBarrier, "
        "but received errors while waiting for send/recv from rank 0.",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 3000ms "
        "for recv operation to complete"]
MISSING = ["Traceback (most recent call last):", '  File "train.py", line 1, in <module>',
           "ModuleNotFoundError: No module named 'not_a_package'"]


@pytest.fixture
def spec(tmp_path, monkeypatch):
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "0")
    p = tmp_path / "job.yml"
    p.write_text(SPEC)
    return str(p)


def _chain(fake, name, lines):
    fake.scripts[name] = ["Queued", "Running", "Failed"]
    fake.lines[name] = lines
    fake.scripts[f"{name}-r1"] = ["Queued", "Running", "Completed"]


def test_a_collective_timeout_is_retried_and_its_cause_recorded(fake_backend, spec, capsys):
    _chain(fake_backend, "c", GLOO)
    code, _, err = run_main(capsys, "submit", spec, "--local", "--name", "c", "--retries", "1",
                            "--retry-on", "collective_timeout", "--wait", "-q")
    assert code == 0, err
    assert fake_backend.submitted == ["c", "c-r1"]
    assert "attempt 1 (c) ended Failed" in err and "cause collective_timeout" in err
    assert fake_backend.jobs["c"].tags["dtrain.cause"] == "collective_timeout"
    _, out, _ = run_main(capsys, "status", "c", "-o", "json")
    doc = json.loads(out)
    assert [(a["outcome"], a["cause"]) for a in doc["attempts"]] == [("failed", "collective_timeout"), ("completed", None)]
    assert doc["chain"]["retry_on"] == "collective_timeout"


def test_a_missing_package_is_not_retried_on_collective_timeouts(fake_backend, spec, capsys):
    _chain(fake_backend, "m", MISSING)
    code, _, err = run_main(capsys, "submit", spec, "--local", "--name", "m", "--retries", "1",
                            "--retry-on", "collective_timeout,nccl_error", "--wait", "-q")
    assert code == 1 and fake_backend.submitted == ["m"], err
    assert fake_backend.jobs["m"].tags["dtrain.cause"] == "missing_module"
    assert "its cause, missing_module, is not one --retry-on names (collective_timeout,nccl_error" in err


def test_an_infrastructure_attempt_is_retried_whatever_the_causes_and_a_cause_is_recorded_once(
        fake_backend, spec, capsys):
    fake_backend.scripts["p"] = ["Queued", "NotResponding"]
    code, _, err = run_main(capsys, "submit", spec, "--local", "--name", "p", "--retries", "1",
                            "--retry-on", "collective_timeout", "--wait", "-q")
    assert code == 0 and fake_backend.submitted == ["p", "p-r1"], err
    assert fake_backend.jobs["p"].tags["dtrain.cause"] == "lost_node"
    assert "dtrain.cause" not in fake_backend.jobs["p-r1"].tags        # a completed attempt has no cause


@pytest.mark.parametrize("retry_on", ["infrastructure", "failed"])
def test_the_last_attempt_of_a_chain_records_its_cause_too(fake_backend, spec, capsys, retry_on):
    """Not only the attempts a follower moves past: the attempt a chain ends with (not retried, or its last)."""
    fake_backend.scripts["z"] = ["Queued", "Running", "Failed"]
    fake_backend.lines["z"] = MISSING
    fake_backend.scripts["z-r1"] = ["Queued", "Running", "Failed"]
    fake_backend.lines["z-r1"] = MISSING
    code, _, err = run_main(capsys, "submit", spec, "--local", "--name", "z", "--retries", "1",
                            "--retry-on", retry_on, "--wait", "-q")
    assert code == 1, err
    last = fake_backend.submitted[-1]
    assert fake_backend.submitted == (["z"] if retry_on == "infrastructure" else ["z", "z-r1"])
    assert fake_backend.jobs[last].tags["dtrain.cause"] == "missing_module"


def test_a_failed_attempt_with_no_cause_found_is_tagged_none_and_not_retried_by_cause(fake_backend, spec, capsys):
    _chain(fake_backend, "n", ["step 1 loss 0.5"])
    code, _, err = run_main(capsys, "submit", spec, "--local", "--name", "n", "--retries", "1",
                            "--retry-on", "collective_timeout", "--wait", "-q")
    assert code == 1 and fake_backend.jobs["n"].tags["dtrain.cause"] == "none", err


@pytest.mark.parametrize("on, ok", [("infrastructure", True), ("failed", True), ("collective_timeout", True),
                                    ("collective_timeout, nccl_error", True), ("gpu_oom,bogus", False),
                                    ("", False), ("canceled", False)])
def test_retry_on_takes_named_causes(on, ok):
    if ok:
        assert check_policy(1, on) is not None
    else:
        with pytest.raises(UsageError, match="--retry-on must be one of"):
            check_policy(1, on)


def test_the_policy_in_the_tags_keeps_its_causes():
    p = Policy(2, "collective_timeout,nccl_error")
    assert Policy.from_tags(p.tags("c", 1)) == p and p.causes == {"collective_timeout", "nccl_error"}
    assert Policy.from_tags({**p.tags("c", 1), "dtrain.retry_on": "bogus"}) is None
    failed = JobInfo(name="c", backend="local", status="Failed", tags={"dtrain.cause": "nccl_error"})
    assert retryable(failed, p) and not retryable(failed, Policy(2, "gpu_oom"))
    assert not retryable(failed, Policy(2))            # infrastructure only


def test_an_attempt_whose_cause_cannot_be_recorded_is_not_retried_blind(fake_backend, spec, capsys, monkeypatch):
    from dtrain.errors import BackendError

    def refuse(*a, **k):
        raise BackendError("update refused")

    monkeypatch.setattr(fake_backend, "update", refuse)
    _chain(fake_backend, "u", GLOO)
    code, _, err = run_main(capsys, "submit", spec, "--local", "--name", "u", "--retries", "1",
                            "--retry-on", "collective_timeout", "--wait", "-q")
    assert code == 1 and fake_backend.submitted == ["u"], err
    assert "could not be recorded" in err
