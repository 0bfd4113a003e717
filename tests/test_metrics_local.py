"""Metrics of local jobs: every process gets Azure ML's MLflow variables pointing at the job's own store,
so `mlflow.log_metric` in a rank lands in the job's run; `dtrain metrics` reads it back (json, csv,
text), `submit --wait` ends with the final values, and a CI summary shows them as a table."""
from __future__ import annotations

import csv
import io
import json

import pytest

from dtrain.backends.base import MetricPoint
from dtrain.backends.local import mlflowstore

JOB = """\
command: python log.py
code: src
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
compute: local
experiment_name: metrics-local
distribution:
  type: pytorch
  process_count_per_instance: 2
resources:
  instance_count: 2
"""
LOG_PY = """\
import os
rank = int(os.environ["RANK"])
if rank == 0:
    import mlflow
    with mlflow.start_run():
        for s in range(20):
            mlflow.log_metric("loss", 2.0 / (s + 1), step=s)
print("rank", rank, "done")
"""


def test_plan_gives_every_process_the_mlflow_variables(write, dtrain_home):
    from dtrain.backends.base import SubmitOptions
    from dtrain.backends.local import LocalBackend
    from dtrain.spec.validate import load_spec

    write("src/log.py", LOG_PY)
    spec, _ = load_spec(str(write("job.yml", JOB)))
    plan = LocalBackend().plan(spec, SubmitOptions(name="mplan"))
    envs = [p.env for p in plan.processes]
    assert len(envs) == 4
    for e in envs:
        assert e["MLFLOW_TRACKING_URI"] == f"file://{dtrain_home.resolve()}/jobs/mplan/mlruns"
        assert e["MLFLOW_RUN_ID"] == "mplan" and e["MLFLOW_EXPERIMENT_NAME"] == "metrics-local"
        assert e["MLFLOW_EXPERIMENT_ID"] == mlflowstore.experiment_id("metrics-local")
    assert not (dtrain_home / "jobs" / "mplan").exists()           # a plan writes nothing


def test_reader_reads_only_complete_new_lines(tmp_path):
    mdir = tmp_path / "mlruns" / "e1" / "job" / "metrics"
    mdir.mkdir(parents=True)
    f = mdir / "loss"
    f.write_text("100 1.5 0\n101 1.25 1\n102 1.0")                 # the last line is half-written
    reader = mlflowstore.MetricsFiles(tmp_path, "job")
    assert reader.poll() == {"loss": [MetricPoint(0, 1.5, 100), MetricPoint(1, 1.25, 101)]}
    with open(f, "a") as fh:
        fh.write(" 2\n103 0.5 3\n")
    assert reader.poll() == {"loss": [MetricPoint(2, 1.0, 102), MetricPoint(3, 0.5, 103)]}
    assert reader.poll() == {}
    assert [p.step for p in reader.points["loss"]] == [0, 1, 2, 3]
    assert mlflowstore.latest(tmp_path, "job") == {"loss": MetricPoint(3, 0.5, 103)}


@pytest.mark.slow
@pytest.mark.timeout(240)  # two 2x2 jobs, each `submit --wait` allowed 180 s
def test_local_2x2_job_metrics_json_csv_text(cli, write, tmp_path):
    pytest.importorskip("mlflow")
    write("src/log.py", LOG_PY)
    spec = write("job.yml", JOB)
    summary = tmp_path / "summary.md"
    ci = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    r = cli("submit", str(spec), "--name", "mjob", "--wait", env=ci, timeout=180)
    assert r.returncode == 0, r.stderr
    assert "mjob: final metrics: loss 0.1000 (step 19)" in r.stderr.splitlines()[-1]
    assert "| mjob | loss | 0.1000 | 19 |" in summary.read_text()

    j = cli("metrics", "mjob", "--output", "json")
    assert j.returncode == 0, j.stderr
    doc = json.loads(j.stdout)
    assert doc["job"] == "mjob" and list(doc["metrics"]) == ["loss"]
    assert [(p["step"], p["value"]) for p in doc["metrics"]["loss"]] == [(s, 2.0 / (s + 1)) for s in range(20)]
    assert all(isinstance(p["timestamp"], int) and p["timestamp"] > 1.7e12 for p in doc["metrics"]["loss"])

    c = cli("metrics", "mjob", "--output", "csv")
    rows = list(csv.reader(io.StringIO(c.stdout)))
    assert rows[0] == ["job", "key", "step", "value", "timestamp"]
    assert [(r[0], r[1], int(r[2]), float(r[3]), int(r[4])) for r in rows[1:]] == \
        [("mjob", "loss", p["step"], p["value"], p["timestamp"]) for p in doc["metrics"]["loss"]]

    t = cli("metrics", "mjob")
    assert t.returncode == 0
    assert "loss" in t.stdout and "*" in t.stdout and "step 0" in t.stdout
    assert max(len(line) for line in t.stdout.splitlines()) <= 80 and "\x1b" not in t.stdout

    f = cli("metrics", "mjob", "--follow", "--output", "csv", "--key", "loss")   # ended: drains and exits
    assert f.returncode == 0 and f.stdout == c.stdout

    w = cli("submit", str(spec), "--name", "mjob2", "--wait", "--output", "json", timeout=180)
    assert json.loads(w.stdout)["metrics"]["loss"]["step"] == 19


@pytest.mark.slow
def test_unknown_job_exits_2_and_no_metrics_exits_0(cli, write):
    assert cli("metrics", "no-such-job", "--local").returncode == 2
    write("src/log.py", "print('no metrics here')\n")
    spec = write("job.yml", JOB)
    assert cli("submit", str(spec), "--name", "quiet", "--wait").returncode == 0
    r = cli("metrics", "quiet")
    assert r.returncode == 0 and "no metrics" in r.stderr and r.stdout == ""
    assert json.loads(cli("metrics", "quiet", "-o", "json").stdout) == {"job": "quiet", "metrics": {}}


NAN_JOB = """\
command: m=${MLFLOW_TRACKING_URI#file://}/$MLFLOW_EXPERIMENT_ID/$MLFLOW_RUN_ID/metrics; printf '100 nan 0\\n101 inf 1\\n102 0.5 2\\n' > $m/loss
environment: azureml:env:1
compute: local
"""


@pytest.mark.timeout(120)
def test_nan_and_inf_are_json_null_and_min_max_leave_nan_out(cli, write):
    spec = write("job.yml", NAN_JOB)
    assert cli("submit", spec, "--name", "nanjob", "--wait").returncode == 0
    r = cli("metrics", "nanjob", "-o", "json")
    assert r.returncode == 0, r.stderr

    def refuse(c):
        raise ValueError(f"not JSON: {c}")

    doc = json.loads(r.stdout, parse_constant=refuse)
    assert [(p["step"], p["value"]) for p in doc["metrics"]["loss"]] == [(0, None), (1, None), (2, 0.5)]
    t = cli("metrics", "nanjob")
    row = next(ln for ln in t.stdout.splitlines() if ln.startswith("loss"))
    assert row.split() == ["loss", "0.5000", "0.5000", "inf", "3"]          # last, min, max, steps
    assert "(loss: 1 NaN value left out of min and max)" in t.stdout
    from dtrain.metrics_view import json_safe, summary

    pts = [MetricPoint(0, float("nan"), 1), MetricPoint(1, float("inf"), 2), MetricPoint(2, 0.5, 3)]
    for order in (pts, pts[::-1], pts[1:] + pts[:1]):
        assert summary({"loss": order})[0][2:4] == (0.5, float("inf"))
    assert json_safe({"a": [float("nan"), float("-inf"), 1.0], "b": (2, "x")}) == {"a": [None, None, 1.0], "b": [2, "x"]}


RANKS_JOB = (
    "command: d=${MLFLOW_TRACKING_URI#file://}/$MLFLOW_EXPERIMENT_ID/$MLFLOW_RUN_ID/metrics; "
    "for k in loss samples_per_s{,_rank{0,1,2,10,11}}; do printf '100 1.5 0\\n101 0.5 1\\n' > $d/$k; done\n"
    "environment: azureml:env:1\n"
    "compute: local\n")
NATURAL = ["loss", "samples_per_s", "samples_per_s_rank0", "samples_per_s_rank1", "samples_per_s_rank2",
           "samples_per_s_rank10", "samples_per_s_rank11"]


@pytest.mark.timeout(120)
def test_per_rank_keys_in_natural_order_and_a_wrong_key_exits_2(cli, write):
    """rank2 before rank10 in the table, JSON and CSV alike; `-k los` names no metric: exit 2, did-you-mean."""
    spec = write("job.yml", RANKS_JOB)
    assert cli("submit", spec, "--name", "ranks", "--wait").returncode == 0
    j = cli("metrics", "ranks", "-o", "json")
    assert j.returncode == 0, j.stderr
    assert list(json.loads(j.stdout)["metrics"]) == NATURAL
    rows = list(csv.reader(io.StringIO(cli("metrics", "ranks", "-o", "csv").stdout)))[1:]
    assert list(dict.fromkeys(r[1] for r in rows)) == NATURAL
    table = cli("metrics", "ranks").stdout.split("\n\n")[0].splitlines()[1:]
    assert [ln.split()[0] for ln in table] == NATURAL

    for output in ("text", "json", "csv"):
        r = cli("metrics", "ranks", "-k", "los", "-o", output)
        assert r.returncode == 2 and r.stdout == "", (output, r.stderr)
        assert "ranks: no metric named 'los'" in r.stderr and "did you mean 'loss'?" in r.stderr
        assert "ranks logged: " + ", ".join(NATURAL) in r.stderr
    assert cli("metrics", "ranks", "-k", "loss").returncode == 0


def test_a_wrong_key_among_good_ones_exits_2_but_a_job_without_metrics_exits_0(fake_backend, capsys):
    from dtrain.backends.base import JobInfo
    from dtrain.cli import main

    for name in ("m", "none"):
        fake_backend.add(JobInfo(name=name, backend="local", status="Completed"))
    fake_backend.points["m"] = {"loss": [(0, 1.0)], "learning_rate": [(0, 0.1)]}
    assert main(["metrics", "m", "-k", "loss", "-k", "learning_rat"]) == 2
    err = capsys.readouterr().err
    assert "m: no metric named 'learning_rat'" in err and "did you mean 'learning_rate'?" in err
    assert main(["metrics", "m", "-k", "zzz"]) == 2
    err = capsys.readouterr().err
    assert "did you mean" not in err and "m logged: learning_rate, loss" in err
    assert main(["metrics", "none", "-k", "loss"]) == 0                 # nothing logged: not a wrong key
    assert "none: no metrics named loss logged" in capsys.readouterr().err
