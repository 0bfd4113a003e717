"""The eviction drill (`dtrain submit --local --preempt-after DURATION`, backends/local/eviction.py) through
the real local backend: every rank gets SIGTERM, the job ends preempted (NotResponding, exit 5), and a
retry chain's next attempt resumes from the checkpoint. The template as shipped, its script replaced by
tests/stubs/train_stub.py (docs/development.md, "Full training runs")."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from dtrain.durations import parse_duration
from dtrain.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
ENV = {"DTRAIN_RETRY_BACKOFF_S": "0.2", "DTRAIN_LOCAL_GRACE_S": "1"}


@pytest.mark.parametrize("text, seconds", [("5s", 5.0), ("2m", 120.0), ("1h", 3600.0), ("1.5", 1.5)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "-1s", "5 days", "soon"])
def test_a_bad_duration_is_a_usage_error(text):
    with pytest.raises(UsageError, match="--preempt-after must be a duration"):
        parse_duration(text)


def test_preempt_after_is_refused_where_it_does_nothing(cli, write):
    spec = write("job.yml", "command: echo hi\nenvironment: azureml:env@latest\ncompute: azureml:gpu\n")
    r = cli("submit", spec, "--preempt-after", "5s")
    assert r.returncode == 2 and "--preempt-after only applies to local runs" in r.stderr, r.stderr
    local = write("local.yml", "command: echo hi\nenvironment: azureml:env@latest\ncompute: local\n")
    r = cli("submit", local, "--preempt-after", "soon")
    assert r.returncode == 2 and "--preempt-after must be a duration" in r.stderr, r.stderr
    for extra in (["--dry-run"], ["--matrix", "inputs.x=1,2"]):
        r = cli("submit", local, "--preempt-after", "5s", *extra)
        assert r.returncode == 2 and "--preempt-after applies to one job" in r.stderr, (extra, r.stderr)


@pytest.mark.slow
def test_a_preempted_attempt_is_retried_and_the_next_one_resumes(cli, tmp_path):
    code = tmp_path / "stub-code"
    code.mkdir()
    shutil.copy(ROOT / "tests" / "stubs" / "train_stub.py", code / "single_node.py")
    env = {**ENV, "DTRAIN_HOME": str(tmp_path / "home")}
    # 20 epochs of 32 steps at 0.02 s a step, a checkpoint every 10: attempt 1 runs past the drill's 5 s
    r = cli("submit", ROOT / "job_templates" / "single-node.yml", "--local", "--wait", "--name", "drill",
            "--retries", "1", "--preempt-after", "5s", "--set", f"code={code}", "--set", "inputs.epochs=20",
            "--set", "inputs.checkpoint_every=10", env=env, timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "attempt 2 of 2 submitted: drill-r1" in r.stderr and "preempted by the eviction drill" in r.stderr
    attempts = json.loads(cli("status", "drill", "-o", "json", env=env).stdout)["attempts"]
    assert [(a["status"], a["outcome"], a["exit_code"]) for a in attempts] == [
        ("NotResponding", "infrastructure", 5), ("Completed", "completed", 0)]
    assert [a["cause"] for a in attempts] == ["preempted", None]       # recorded in attempt 1's tags
    resumed = re.search(r"resumed from step (\d+)", cli("logs", "drill-r1", env=env).stdout)
    assert resumed and int(resumed.group(1)) > 0
    why = json.loads(cli("why", "drill", "-o", "json", env=env).stdout)     # the chain's latest: completed
    assert why["causes"] == []


NOTICE = """\
command: bash -c 'trap "echo rank $RANK got SIGTERM; exit 143" TERM; sleep 60 & wait'
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
compute: local
distribution:
  type: pytorch
  process_count_per_instance: 1
resources:
  instance_count: 2
"""


@pytest.mark.slow
def test_every_rank_gets_the_notice_and_the_job_ends_preempted(cli, write, tmp_path):
    env = {**ENV, "DTRAIN_HOME": str(tmp_path / "home")}
    r = cli("submit", write("job.yml", NOTICE), "--wait", "--name", "evicted", "--preempt-after", "1s", env=env,
            timeout=90)
    assert r.returncode == 5, r.stderr[-3000:]                      # infrastructure
    assert "rank 0 got SIGTERM" in r.stdout and "rank 1 got SIGTERM" in r.stdout
    assert "evicted: why: preempted: the job was preempted (NotResponding)" in r.stderr
    info = json.loads(cli("status", "evicted", "-o", "json", env=env).stdout)
    assert info["status"] == "NotResponding" and "--preempt-after 1s" in info["failure"]["message"]
