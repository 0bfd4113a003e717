"""System metrics of Azure ML jobs (dtrain top, watch's GPU column, the findings) read from Azure Monitor's
metrics API through the Azure backend's own credential and azure-core pipeline, against the emulator's
Metrics_List (tests/azure_emulator/monitor.py), for both metric namings, with injected faults."""
from __future__ import annotations

import json
import urllib.request
from datetime import datetime, timezone

import pytest

from azure_emulator import AzureMLEmulator, fake_jwt

pytestmark = [pytest.mark.sdk]

H100 = "Standard_ND96isr_H100_v5"


@pytest.fixture
def emu(monkeypatch, tmp_path):
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    with AzureMLEmulator(validate_jobs=False, check_references=False) as e:
        e.add_compute("h100", vm_size=H100, max_nodes=2)
        for k, v in {"DTRAIN_HOME": str(tmp_path / "home"), "DTRAIN_ARM_ENDPOINT": e.url,
                     "DTRAIN_ARM_TOKEN": fake_jwt(audience=e.url + "/"), "DTRAIN_SUBSCRIPTION_ID": e.subscription_id,
                     "DTRAIN_RESOURCE_GROUP": e.resource_group, "DTRAIN_WORKSPACE": e.workspace,
                     "DTRAIN_AZURE_RETRY_BACKOFF_S": "0.01"}.items():
            monkeypatch.setenv(k, v)
        yield e


def put_job(emu, name: str, nodes: int = 2, minutes_ago: float = 20) -> float:
    body = {"properties": {"jobType": "Command", "command": "python train.py", "environmentId": "azureml:env:1",
                           "computeId": emu.arm_id("computes", "h100"), "experimentName": "hw",
                           "tags": {"batch": "hw"}, "resources": {"instanceCount": nodes}}}
    req = urllib.request.Request(f"{emu.url}{emu.workspace_arm_id}/jobs/{name}?api-version=2024-04-01",
                                 data=json.dumps(body).encode(), method="PUT",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + fake_jwt()})
    urllib.request.urlopen(req).read()
    with emu._lock:                                  # the job ran a while ago: its metrics lie in the past
        emu._jobs[name].created -= minutes_ago * 60
        return emu._jobs[name].created


def gpu_job(emu, name: str, naming: str, *, slow=(1, 3), ib: float = 0.0) -> list:
    created = put_job(emu, name)
    start = datetime.fromtimestamp(created + 30, timezone.utc).replace(microsecond=0)
    values = {"gpu_util": lambda n, d, m: 5.0 if (n, d) == slow else 95.0 - (d % 2),
              "cpu_util": lambda n, d, m: 40.0 + n, "gpu_mem": lambda n, d, m: 1000.0 * (d + 1),
              "gpu_mem_pct": lambda n, d, m: 50.0, "ib_tx": lambda n, d, m: ib, "ib_rx": lambda n, d, m: ib}
    return emu.monitor.record_job(name, nodes=2, gpus=8, start=start, minutes=6, naming=naming, values=values)


@pytest.mark.parametrize("naming", ["current", "legacy"])
def test_2_nodes_x_8_gpus_per_node_and_device_for_both_namings(emu, naming):
    from dtrain.backends.azure import AzureBackend

    nodes = gpu_job(emu, "hw-2x8", naming)
    emu.fail(r"/providers/Microsoft\.Insights/metrics$", 503, count=1)     # retried by the pipeline
    sm = AzureBackend().sysmetrics("hw-2x8")
    assert sm.naming == naming and sm.vm_size == H100 and sm.nodes == 2
    gpu = {(s.node, s.device): s for s in sm.of("gpu_util")}
    assert set(gpu) == {(n, str(d)) for n in nodes for d in range(8)}           # 16 series: one per GPU
    assert [v for _, v in gpu[(nodes[1], "3")].points] == [5.0] * 6
    assert [v for _, v in gpu[(nodes[0], "1")].points] == [94.0] * 6
    cpu = {s.node: s for s in sm.of("cpu_util")}
    assert set(cpu) == set(nodes) and cpu[nodes[1]].device == "" and cpu[nodes[1]].mean() == 41.0
    if naming == "current":
        assert {(s.node, s.device): s.mean() for s in sm.of("gpu_mem")}[(nodes[0], "7")] == 8000.0
        assert sm.of("ib_tx") and sm.of("ib_rx")
    else:
        assert not sm.of("ib_tx") and {s.mean() for s in sm.of("gpu_mem_pct")} == {50.0}
    queries = emu.requests_to(r"/providers/Microsoft\.Insights/metrics$")
    assert [q.status for q in queries] == [503, 200] and all(q.bearer for q in queries)
    q = queries[-1].query
    assert q["api-version"] == "2024-02-01" and int(q["top"]) >= 16 and q["ValidateDimensions"] == "false"
    assert "GpuUtilizationPercentage" in q["metricnames"] and "GpuUtilization," in q["metricnames"] + ","


def test_ib_zero_on_nd96isr_h100_x2_and_one_slow_gpu_are_flagged(emu):
    from dtrain.hwfindings import findings
    from dtrain.runner import Runner

    nodes = gpu_job(emu, "hw-sockets", "current", ib=0.0)
    got = Runner().hw_findings("hw-sockets")
    kinds = [f.kind for f in got]
    assert "nccl-sockets" in kinds
    nccl = got[kinds.index("nccl-sockets")]
    assert H100 in nccl.message and nccl.numbers["ib_tx_mb"] == 0.0 and nccl.numbers["nodes"] == 2
    slow = [f for f in got if f.kind == "straggler"]
    assert [(f.node, f.device) for f in slow] == [(nodes[1], "3")]
    assert "5.0%" in slow[0].message and slow[0].numbers["median_pct"] >= 94

    gpu_job(emu, "hw-ib", "current", slow=(9, 9), ib=5000.0)                    # IB busy, every GPU busy
    assert findings(Runner().sysmetrics("hw-ib")) == []


def test_top_json_and_csv_in_process(emu, capsys):
    from fakes import run_main

    nodes = gpu_job(emu, "hw-top", "current")
    code, out, err = run_main(capsys, "top", "hw-top", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["job"] == "hw-top" and doc["source"] == "azure-monitor"
    assert len([s for s in doc["series"] if s["metric"] == "gpu_util"]) == 16
    assert any(f["kind"] == "straggler" and f["node"] == nodes[1] and f["device"] == "3" for f in doc["findings"])
    code, out, err = run_main(capsys, "top", "hw-top", "-o", "csv")
    assert code == 0 and out.splitlines()[0] == "job,node,device,metric,unit,timestamp,value"
    assert f"hw-top,{nodes[1]},3,gpu_util,%," in out
    code, out, err = run_main(capsys, "top", "hw-top")
    assert code == 0 and "GPU%" in out and "straggler: node " in out and "(node)" in out


def test_monitor_answers_its_documented_errors(emu):
    from dtrain.backends.azure import AzureBackend
    from dtrain.backends.azure.monitor import MonitorError

    b = AzureBackend()
    b.ml
    rest = b._monitor()
    with pytest.raises(MonitorError) as e:
        rest.query(["NoSuchMetric"], "RunId eq 'x'", "2026-01-01T00:00:00Z/2026-01-01T01:00:00Z", "PT1M")
    assert e.value.status == 400 and "Failed to find metric configuration" in str(e.value)
    data = rest.query(["CpuUtilizationPercentage"], "RunId eq 'x'", "2026-01-01T00:00:00Z/2026-01-01T01:00:00Z", "PT1M")
    assert data["value"][0]["timeseries"] == [] and data["value"][0]["name"]["value"] == "CpuUtilizationPercentage"


@pytest.mark.slow
@pytest.mark.timeout(240)      # 50 jobs through the emulator, twice
def test_watch_50_jobs_gpu_column_costs_one_request_per_poll(emu, capsys):
    from fakes import run_main

    names = [f"hw{i:02d}" for i in range(50)]
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    emu.script_job_statuses(["Running"], 0.4)
    for i, n in enumerate(names):
        put_job(emu, n, nodes=1, minutes_ago=0)
        emu.monitor.record_job(n, nodes=1, gpus=2, start=now, minutes=1, values={"gpu_util": lambda k, d, m, i=i: float(i)})

    def run(*extra):
        before = len(emu.requests)
        emu.end_after_list_polls(names, polls=2)
        code, out, err = run_main(capsys, "watch", "--tag", "batch=hw", "--interval", "0.2", *extra)
        assert code == 0, err
        return out, emu.requests[before:], emu.job_list_polls(before)

    plain_out, plain, polls0 = run("--no-metrics")
    assert not [q for q in plain if "Insights/metrics" in q.path]
    for n in names:
        emu.script_job_statuses(["Running"], 0.4, job=n)
    out, reqs, polls = run()
    monitor = [q for q in reqs if q.path.endswith("/providers/Microsoft.Insights/metrics")]
    searches = [q for q in reqs if q.path.endswith("/runs/search")]
    assert polls >= 2 and len(monitor) == len(searches) == polls       # one Monitor query per poll, not fifty
    # per poll: the job listing (3 pages of 20) as without the columns, the metrics search, the Monitor query
    per_poll = len([q for q in reqs if q.path.startswith("/subscriptions/") and q.path != emu.workspace_arm_id
                    and not q.path.endswith("/get-by-name") or "/mlflow/" in q.path
                    and not q.path.endswith("/get-by-name")]) / polls
    assert per_poll == len([q for q in plain if q.path.startswith("/subscriptions/")]) / polls0 + 2
    assert monitor[0].query["$filter"].count("RunId eq") == 50
    assert "GPU %" in out and "49.0" in out


def test_monitor_failing_past_the_retries_exits_cleanly(emu, capsys, monkeypatch):
    from fakes import run_main

    monkeypatch.setenv("DTRAIN_AZURE_RETRIES", "0")
    monkeypatch.setenv("DTRAIN_AZURE_STATUS_ATTEMPTS", "2")
    gpu_job(emu, "hw-down", "current")
    emu.fail(r"/providers/Microsoft\.Insights/metrics$", 500, count=None)
    code, out, err = run_main(capsys, "top", "hw-down", "-o", "json")
    assert code == 7 and out == "" and "Traceback" not in err
    assert "system metrics" in err and "dtrain top hw-down" in err
    assert len(emu.requests_to(r"/providers/Microsoft\.Insights/metrics$")) == 2


def test_monitor_refusing_the_identity_is_a_clear_error(emu, capsys):
    from fakes import run_main

    gpu_job(emu, "hw-403", "current")
    emu.fail(r"/providers/Microsoft\.Insights/metrics$", 403, count=None, code="AuthorizationFailed",
             message="The client does not have authorization to perform action 'Microsoft.Insights/metrics/read'")
    code, out, err = run_main(capsys, "top", "hw-403")
    assert code == 6 and "Traceback" not in err and "Microsoft.Insights/metrics/read" in err
    assert "Monitoring Reader" in err
    assert len(emu.requests_to(r"/providers/Microsoft\.Insights/metrics$")) == 1      # not retried
    code, out, err = run_main(capsys, "why", "hw-403", "-o", "json")
    assert code == 0 and json.loads(out)["hardware"] == []          # why still answers from the logs
