"""Metrics of Azure ML jobs: `dtrain metrics` and the incremental reader through the Azure backend's
own credential and azure-core pipeline, against the emulator's MLflow tracking API (the workspace's
mlFlowTrackingUri -> /mlflow/v2.0/<workspace>/api/2.0/mlflow/...), with injected 429/500 answers."""
from __future__ import annotations

import csv
import io
import json
import urllib.request

import pytest

from azure_emulator import AzureMLEmulator, fake_jwt
from fakes import run_in_process

pytestmark = [pytest.mark.slow, pytest.mark.sdk]

BODY = {"properties": {"jobType": "Command", "command": "python train.py", "environmentId":
                       "azureml:AzureML-sklearn-1.0-ubuntu20.04-py38-cpu:1", "computeId": None,
                       "experimentName": "metrics-tests", "tags": {"batch": "m"},
                       "resources": {"instanceCount": 1}}}


@pytest.fixture
def emu(monkeypatch):
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    with AzureMLEmulator(validate_jobs=False, check_references=False) as e:
        e.add_environment("AzureML-sklearn-1.0-ubuntu20.04-py38-cpu", "1")
        yield e


def env_for(emu, tmp_path) -> dict:
    import os

    return {**os.environ, "DTRAIN_HOME": str(tmp_path / "home"), "DTRAIN_ARM_ENDPOINT": emu.url,
            "DTRAIN_ARM_TOKEN": fake_jwt(audience=emu.url + "/"), "DTRAIN_SUBSCRIPTION_ID": emu.subscription_id,
            "DTRAIN_RESOURCE_GROUP": emu.resource_group, "DTRAIN_WORKSPACE": emu.workspace,
            "DTRAIN_AZURE_RETRY_BACKOFF_S": "0.05"}


def put_job(emu, name: str, experiment: str = "metrics-tests") -> None:
    body = json.loads(json.dumps(BODY))
    body["properties"]["experimentName"] = experiment
    req = urllib.request.Request(f"{emu.url}{emu.workspace_arm_id}/jobs/{name}?api-version=2024-04-01",
                                 data=json.dumps(body).encode(), method="PUT",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + fake_jwt()})
    urllib.request.urlopen(req).read()


def dtrain(*args, env, cwd):
    return run_in_process([str(a) for a in args], env=env, cwd=cwd)   # the SDK's import paid once


@pytest.mark.timeout(240)  # several dtrain processes through the emulator: 60-90 s at load 30
def test_metrics_json_csv_text_and_exit_codes(emu, tmp_path):
    put_job(emu, "m-json")
    put_job(emu, "m-none")
    for s in range(20):
        emu.log_metric("m-json", "loss", 1.0 / (s + 1), step=s, timestamp=1763856000000 + s)
    emu.throttle(r"/api/2\.0/mlflow/metrics/get-history$", retry_after=0, count=1)
    emu.fail(r"/api/2\.0/mlflow/runs/get$", 500, count=1)
    env = env_for(emu, tmp_path)

    r = dtrain("metrics", "m-json", "-o", "json", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["job"] == "m-json" and list(doc["metrics"]) == ["loss"]
    assert [(p["step"], p["value"], p["timestamp"]) for p in doc["metrics"]["loss"]] == \
        [(s, 1.0 / (s + 1), 1763856000000 + s) for s in range(20)]
    # the faults were met, and retried by the pipeline: no point lost or repeated
    assert [q.status for q in emu.requests_to(r"/mlflow/v2\.0/.*/get-history$")][:2] == [429, 200]
    assert [q.status for q in emu.requests_to(r"/mlflow/v2\.0/.*/runs/get$")][:2] == [500, 200]
    assert all(q.bearer for q in emu.requests_to(r"/mlflow/"))
    assert "eyJ" not in r.stderr + r.stdout                       # no token in output

    c = dtrain("metrics", "m-json", "-o", "csv", env=env, cwd=tmp_path)
    rows = list(csv.reader(io.StringIO(c.stdout)))
    assert rows[0] == ["job", "key", "step", "value", "timestamp"]
    assert [(int(x[2]), float(x[3])) for x in rows[1:]] == [(s, 1.0 / (s + 1)) for s in range(20)]

    t = dtrain("metrics", "m-json", env=env, cwd=tmp_path)
    assert t.returncode == 0 and "loss" in t.stdout and "*" in t.stdout and "step 0" in t.stdout

    none = dtrain("metrics", "m-none", env=env, cwd=tmp_path)
    assert none.returncode == 0 and "no metrics" in none.stderr and none.stdout == ""
    assert dtrain("metrics", "no-such-job", env=env, cwd=tmp_path).returncode == 2


def test_incremental_reads_under_faults_lose_and_repeat_nothing(emu, tmp_path, monkeypatch):
    """A reader polled while points arrive, pages are small (history pages of 7) and requests fail
    (429 and 500 beyond the pipeline's retries): every point once, in step order; a poll with nothing
    new costs one request."""
    for k, v in env_for(emu, tmp_path).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("DTRAIN_AZURE_RETRIES", "1")            # so that some polls fail outright
    monkeypatch.setenv("DTRAIN_AZURE_STATUS_ATTEMPTS", "1")
    emu.mlflow.history_page = 7
    put_job(emu, "m-follow")
    from dtrain.backends.azure import AzureBackend
    from dtrain.errors import LostTrack

    backend = AzureBackend()
    reader = backend.metrics_reader("m-follow")
    got, failed, step = [], 0, 0
    for rnd in range(12):
        for _ in range(5 + rnd % 4):                               # new points every round
            emu.log_metric("m-follow", "loss", 10.0 - step * 0.1, step=step)
            emu.log_metric("m-follow", "samples_per_s", 100.0 + step, step=step)
            step += 1
        if rnd % 3 == 1:
            emu.fail(r"/metrics/get-history$", 500, count=2)
        if rnd % 3 == 2:
            emu.throttle(r"/runs/get$", retry_after=0, count=2)
        try:
            got.append(reader.poll())
        except LostTrack:
            failed += 1
    emu.clear_faults()
    got.append(reader.poll())
    assert failed >= 2                                             # faults did get through
    for key, value in (("loss", lambda s: 10.0 - s * 0.1), ("samples_per_s", lambda s: 100.0 + s)):
        seen = [p for new in got for p in new.get(key, [])]
        assert [p.step for p in seen] == list(range(step)), key   # each point once, in order
        assert [p.value for p in seen] == [value(s) for s in range(step)]
        assert reader.points[key] == sorted(seen, key=lambda p: p.step)
    before = len(emu.requests_to(r"/mlflow/"))
    assert reader.poll() == {}
    assert len(emu.requests_to(r"/mlflow/")) == before + 1        # nothing new: one runs/get


@pytest.mark.timeout(240)  # 50 jobs through the emulator
def test_watch_50_jobs_metric_column_costs_one_search_per_poll(emu, tmp_path):
    env = env_for(emu, tmp_path)
    names = [f"w{i}" for i in range(50)]
    # running until two polls have seen them (run); never Queued, whose waiting reason reads the cluster
    # (cached for 30 s, docs/capacity.md) and would add to the first poll's count on a slow machine
    emu.script_job_statuses(["Running"], 0.4)
    for i in range(50):
        put_job(emu, f"w{i}")
        emu.log_metric(f"w{i}", "loss", 1.0 + i, step=3)
        emu.log_metric(f"w{i}", "samples_per_s", 500.0 + i, step=3)

    def run(*extra):
        before = len(emu.requests)
        emu.end_after_list_polls(names, polls=2)
        r = dtrain("watch", "--tag", "batch=m", "--interval", "0.3", *extra, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return r, emu.requests[before:], emu.job_list_polls(before)

    r0, plain, polls0 = run("--no-metrics")
    assert not [q for q in plain if "/mlflow/" in q.path]
    for n in names:                                                # the same 50 jobs again, running
        emu.script_job_statuses(["Running"], 0.4, job=n)
    r1, with_metric, polls1 = run("--metric", "loss")
    searches = [q for q in with_metric if q.path.endswith("/runs/search")]
    lookups = [q for q in with_metric if q.path.endswith("/experiments/get-by-name")]
    other = [q for q in with_metric if "/mlflow/" in q.path and q not in searches and q not in lookups]
    assert polls1 >= 2 and len(searches) == polls1 and other == []   # one batched search per poll
    assert len(lookups) == 1                                       # the experiment's id, once per watch
    # once per watch: the workspace GET for its MLflow tracking URI; per poll: the same job listing as
    # without the column (3 pages of 20), plus the one search and the GPU column's one Azure Monitor query
    # (tests/test_sysmetrics_azure.py)
    ws_gets = [q for q in with_metric if q.path == emu.workspace_arm_id and q.method == "GET"]
    assert len(ws_gets) == 1

    def per_poll(reqs, polls):
        return len([q for q in reqs if q.path.startswith("/subscriptions/") and q.path != emu.workspace_arm_id
                    or "/mlflow/" in q.path and not q.path.endswith("/get-by-name")]) / polls

    assert per_poll(plain, polls0) == 3
    assert per_poll(with_metric, polls1) == per_poll(plain, polls0) + 2
    assert "loss" in r1.stdout and "samples/s" in r1.stdout and "1.0000" in r1.stdout and "549.0" in r1.stdout


def test_metrics_the_service_keeps_failing_do_not_say_the_job_is_lost(emu, tmp_path):
    """MLflow answering 500 to every read of a Completed job's metrics: exit 7 (unreadable after retries),
    and the message is about the metrics, not 'the job keeps running on Azure'."""
    put_job(emu, "m-500")
    emu.log_metric("m-500", "loss", 0.5, step=1)
    emu.fail(r"/api/2\.0/mlflow/", 500, count=1000)
    env = {**env_for(emu, tmp_path), "DTRAIN_AZURE_RETRIES": "0", "DTRAIN_AZURE_STATUS_ATTEMPTS": "2"}
    r = dtrain("metrics", "m-500", env=env, cwd=tmp_path)
    assert r.returncode == 7, r.stderr
    assert "keeps running" not in r.stderr and "not affected" in r.stderr and "dtrain metrics m-500" in r.stderr
