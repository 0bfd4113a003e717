"""Matrix submission and the scaling report end to end on the local backend: real `python -m dtrain`
processes, real local jobs (tiny scripts, and the shipped PyTorch DDP template for the scale report)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dtrain import scale as report

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TRAIN_PY = """\
import sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
print("lr", args["--lr"], "epochs", args["--epochs"])
sys.exit(1 if args["--lr"] == "0.3" else 0)
"""
JOB = """\
command: python train.py --lr ${{inputs.lr}} --epochs ${{inputs.epochs}}
code: src
environment: azureml:env@latest
compute: local
inputs: {lr: 0.01, epochs: 1}
"""
MATRIX = ["--matrix", "inputs.lr=0.1,0.2", "--matrix", "inputs.epochs=1,2"]


@pytest.fixture
def project(write):
    write("src/train.py", TRAIN_PY)
    return write("job.yml", JOB).parent


def local_jobs(cli, cwd) -> list[dict]:
    r = cli("list", "--local", "--output", "json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_grid_runs_every_combination_once_and_a_rerun_starts_nothing(cli, project):
    r = cli("submit", "job.yml", "--local", *MATRIX, "--wait", "--name", "lrs", cwd=project)
    assert r.returncode == 0, r.stderr
    jobs = local_jobs(cli, project)
    assert len(jobs) == 4 and all(j["status"] == "Completed" for j in jobs)
    values = {(j["tags"]["dtrain.matrix.inputs.lr"], j["tags"]["dtrain.matrix.inputs.epochs"]) for j in jobs}
    assert values == {("0.1", "1"), ("0.1", "2"), ("0.2", "1"), ("0.2", "2")}
    assert {j["tags"]["dtrain.group"] for j in jobs} == {"lrs"}
    # each job ran with its own values
    for j in jobs:
        log = cli("logs", j["name"], "--local", cwd=project).stdout
        assert f"lr {j['tags']['dtrain.matrix.inputs.lr']} epochs {j['tags']['dtrain.matrix.inputs.epochs']}" in log
    # the final table: one row per combination, on stdout
    rows = [line.split() for line in r.stdout.splitlines()]
    assert rows[0][:5] == ["job", "status", "duration", "inputs.lr", "inputs.epochs"]
    assert sorted((row[3], row[4]) for row in rows[1:]) == sorted(values)

    again = cli("submit", "job.yml", "--local", *MATRIX, "--wait", "--name", "lrs", cwd=project)
    assert again.returncode == 0, again.stderr
    after = local_jobs(cli, project)
    assert len(after) == 4
    # the same jobs, not started again: same start times
    assert {j["name"]: j["started"] for j in after} == {j["name"]: j["started"] for j in jobs}


def test_one_failing_combination_fails_the_group_and_the_others_complete(cli, project, tmp_path):
    summary = tmp_path / "summary.md"
    r = cli("submit", "job.yml", "--local", "--matrix", "inputs.lr=0.1,0.3,0.2", "--wait", "--output", "json",
            cwd=project, env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode == 1, r.stderr
    rows = json.loads(r.stdout)
    assert [row["combination"]["inputs.lr"] for row in rows] == ["0.1", "0.3", "0.2"]
    assert [row["status"] for row in rows] == ["Completed", "Failed", "Completed"]
    assert rows[1]["failure"]["exit_code"] == 1
    assert len({row["group"] for row in rows}) == 1 and len(local_jobs(cli, project)) == 3
    # the GitHub job summary: the table with the --matrix values, and the failure
    md = summary.read_text()
    assert "| job | status | inputs.lr | nodes x processes |" in md
    for row in rows:
        assert f"| {row['name']} | {row['status']} | {row['combination']['inputs.lr']} | 1 x 1 |" in md
    assert f"**{rows[1]['name']}: Failed: rank 0 exited 1**" in md
    assert "::error title=" in r.stderr


def test_an_invalid_combination_submits_nothing(cli, project, dtrain_home):
    r = cli("submit", "job.yml", "--local", "--matrix", "inputs.lr=0.1,0.2",
            "--matrix", "resources.instance_count=1,0", "--wait", cwd=project)
    assert r.returncode == 2, r.stderr
    # every invalid combination is named
    assert "[inputs.lr=0.1, resources.instance_count=0]" in r.stderr
    assert "[inputs.lr=0.2, resources.instance_count=0]" in r.stderr
    assert "nothing was submitted" in r.stderr and "Traceback" not in r.stderr
    assert local_jobs(cli, project) == []
    assert not (dtrain_home / "jobs").exists() or not any((dtrain_home / "jobs").iterdir())


def test_max_parallel_one_runs_the_jobs_one_after_the_other(cli, project):
    r = cli("submit", "job.yml", "--local", "--matrix", "inputs.lr=0.1,0.2,0.4", "--max-parallel", "1",
            "--wait", "--output", "json", cwd=project)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    # each job started only after the one before it had ended
    for before, after in zip(rows, rows[1:]):
        assert after["created"] >= before["ended"]


def test_without_wait_it_prints_the_names(cli, project):
    r = cli("submit", "job.yml", "--local", "--matrix", "inputs.lr=0.1,0.2", "--name", "nowait", cwd=project)
    assert r.returncode == 0, r.stderr
    names = r.stdout.split()
    assert len(names) == 2 and all(n.startswith("nowait-0_") for n in names)
    w = cli("wait", *names, "--local", cwd=project)
    assert w.returncode == 0, w.stderr


@pytest.mark.timeout(300)  # two real DDP jobs, allowed 240 s
def test_scale_reports_the_throughput_the_jobs_logged(cli, tmp_path):
    """The shipped PyTorch DDP template, 1 process per node, at 1 and 2 nodes, 40 steps each."""
    env = {"PATH": os.environ["PATH"]}
    r = cli("scale", ROOT / "job_templates" / "pytorch-ddp.yml", "--local", "--nodes", "1,2", "--steps", "40",
            "--set", "distribution.process_count_per_instance=1", "--set", "inputs.samples=2048",
            "--name", "scaling", "--output", "json", cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["metric"] == "samples_per_s" and doc["group"] == "scaling"
    assert [(row["nodes"], row["processes"]) for row in doc["rows"]] == [(1, 1), (2, 2)]
    for row in doc["rows"]:
        assert row["status"] == "Completed" and row["last_step"] == 40
        # throughput and efficiency are measured values: how good they are is benchmarks' business
        # (benchmarks/, docs/benchmarks.md), not a functional test's, whose machine may be loaded
        assert row["throughput"] > 0 and row["efficiency"] > 0
        # the mean is over what the job itself logged, as `dtrain metrics` reads it back
        m = json.loads(cli("metrics", row["job"], "--local", "--key", "samples_per_s", "--output", "json",
                           cwd=tmp_path).stdout)
        logged = m["metrics"]["samples_per_s"]
        assert row["points"] + row["skipped"] == len(logged)
        expected = report.steady_mean([report_point(p) for p in logged])
        assert row["throughput"] == pytest.approx(expected.mean)
    assert doc["rows"][0]["efficiency"] == 1.0
    assert doc["rows"][1]["efficiency"] == pytest.approx(doc["rows"][1]["throughput"] / 2 / doc["rows"][0]["throughput"])


def report_point(p: dict):
    from collections import namedtuple

    return namedtuple("P", "step value timestamp")(p["step"], p["value"], p["timestamp"])


def test_scale_steps_needs_an_input_named_steps(cli, project):
    r = cli("scale", "job.yml", "--local", "--nodes", "1,2", "--steps", "10", cwd=project)
    assert r.returncode == 2 and "declares none" in r.stderr
    assert local_jobs(cli, project) == []
