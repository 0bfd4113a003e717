"""Capacity and quota on Azure ML through the real azure-ai-ml SDK against the emulator (docs/capacity.md): a job
that can never start is refused before any upload or PUT, one that will wait is submitted with a warning,
a waiting job says why (resizing, an allocation error), and an ended job shows what it cost. The command line
runs in process (run_main) over the emulator's thread: a few seconds in all."""
from __future__ import annotations

import json
import re

import pytest

from azure_emulator import AzureMLEmulator, fake_jwt
from azure_emulator import load_example
from azure_emulator.capacity import set_compute, total, usage, vm_size
from fakes import run_main

pytestmark = [pytest.mark.slow, pytest.mark.sdk]

JOB = """\
command: python train.py
code: src
environment:
  image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04
compute: azureml:gpu-cluster
resources:
  instance_count: {nodes}
distribution:
  type: pytorch
  process_count_per_instance: 1
"""
T4 = "Standard_NC8as_T4_v3"          # 8 vCPUs (dtrain's table); quota family NCASv3_T4; eastus 0.752 USD/h


@pytest.fixture
def emu(monkeypatch, tmp_path):
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2) as e:
        for k, v in dict(DTRAIN_ARM_ENDPOINT=e.url, DTRAIN_ARM_TOKEN=fake_jwt(audience=e.url + "/"),
                         DTRAIN_SUBSCRIPTION_ID=e.subscription_id, DTRAIN_RESOURCE_GROUP=e.resource_group,
                         DTRAIN_WORKSPACE=e.workspace, DTRAIN_AZURE_POLL_CAP_S="0.3", DTRAIN_AZURE_CAPACITY_TTL_S="0",
                         DTRAIN_AZURE_RETRY_BACKOFF_S="0.1", DTRAIN_PRICES_OFFLINE="1").items():
            monkeypatch.setenv(k, v)
        set_compute(e, "gpu-cluster", vmSize=T4.upper())           # the service writes sizes in capitals
        yield e


@pytest.fixture
def job(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)

    def write(nodes: int) -> str:
        (tmp_path / "job.yml").write_text(JOB.format(nodes=nodes))
        return "job.yml"
    return write


def _sent(emu) -> list:
    """Job PUTs and code uploads (startPendingUpload, blob writes): what a refusal must not have sent."""
    return [r.path for r in emu.requests if r.method == "PUT" or r.path.endswith("/startPendingUpload")]


def test_more_nodes_than_the_cluster_maximum_exits_2_with_both_numbers_and_sends_nothing(emu, job, capsys):
    set_compute(emu, "gpu-cluster", maxNodeCount=2)
    code, out, err = run_main(capsys, "submit", job(4), "--name", "big")
    assert code == 2 and out == ""
    assert "instance_count 4 is more than cluster gpu-cluster's maximum of 2 nodes" in err
    assert "scaleSettings.maxNodeCount, GET computes/gpu-cluster" in err and "nothing was submitted" in err
    assert _sent(emu) == [] and "big" not in emu.jobs


def test_another_vm_size_than_the_clusters_is_refused(emu, job, capsys):
    code, _, err = run_main(capsys, "submit", job(1), "--set", "resources.instance_type=Standard_NC4as_T4_v3")
    assert code == 2 and f"is not cluster gpu-cluster's VM size {T4.upper()}" in err and _sent(emu) == []
    code, _, err = run_main(capsys, "submit", job(1), "--set", f"resources.instance_type={T4}", "--name", "same")
    assert code == 0, err                                       # compared without regard to case


def test_quota_limit_refuses_and_quota_in_use_warns(emu, job, capsys):
    emu.capacity.usages["eastus"] = [total(14, 100), usage("NCASv3_T4", 14, 20)]
    code, _, err = run_main(capsys, "submit", job(3), "--name", "q3")          # 24 vCPUs > the limit of 20
    assert code == 2 and "need 24 vCPUs (8 each: VM sizes list for eastus)" in err
    assert "above the NCASv3_T4 family quota limit of 20 vCPUs" in err and "Usages list for eastus" in err
    assert _sent(emu) == []
    code, out, err = run_main(capsys, "submit", job(1), "--name", "q1")         # 14 in use + 8 > 20: it waits
    assert code == 0 and out.strip() == "q1" and "q1" in emu.jobs
    assert "quota: 14 of 20 vCPUs of NCASv3_T4 family in use" in err and "it waits until 2 are freed" in err


def test_a_waiting_job_says_the_cluster_is_resizing_then_its_allocation_error(emu, job, capsys):
    emu.script_job_statuses(["Queued"] * 50, 10)
    assert run_main(capsys, "submit", job(2), "--name", "w")[0] == 0
    set_compute(emu, "gpu-cluster", allocationState="Resizing", currentNodeCount=0, targetNodeCount=2)
    code, out, err = run_main(capsys, "status", "w")
    assert code == 0 and out.startswith("w\tQueued") and "waiting: cluster resizing 0 -> 2 nodes (0 min)" in err
    assert json.loads(run_main(capsys, "status", "w", "-o", "json")[1])["waiting"].startswith("cluster resizing 0 -> 2")
    code, _, err = run_main(capsys, "wait", "w", "--timeout", "1")            # the wait's progress line says it too
    assert code == 4 and "w: Queued (cluster resizing 0 -> 2 nodes" in err
    code, _, err = run_main(capsys, "submit", "job.yml", "--name", "w2", "--wait", "--timeout", "2")
    assert code == 4 and re.search(r"^w2: Queued: cluster resizing 0 -> 2 nodes \(0 min\) after \d+ s$", err, re.M), err
    error = {"error": {"code": "QuotaExceeded", "message": "Operation could not be completed as it results in "
                                                            "exceeding approved Standard NCASv3_T4 Family Cores quota."}}
    set_compute(emu, "gpu-cluster", errors=[error])
    code, _, err = run_main(capsys, "status", "w")
    assert "waiting: allocation failed: Operation could not be completed" in err and "(QuotaExceeded)" in err


def test_a_job_on_a_full_cluster_counts_the_jobs_queued_ahead_of_it(emu, job, capsys, monkeypatch):
    emu.script_job_statuses(["Queued"] * 50, 10)
    for name in ("first", "second", "third"):
        assert run_main(capsys, "submit", job(1), "--name", name)[0] == 0
    set_compute(emu, "gpu-cluster", currentNodeCount=4, nodeStateCounts={"runningNodeCount": 4})
    code, out, err = run_main(capsys, "status", "third")
    assert code == 0 and "waiting: cluster at max 4 nodes, all running other jobs; 2 jobs ahead" in err, err
    assert "; first in line" in run_main(capsys, "status", "first")[2]
    code, _, err = run_main(capsys, "submit", job(1), "--name", "fourth")        # warned before it is sent
    assert code == 0 and "cluster gpu-cluster is at its maximum of 4 nodes, all busy" in err
    assert "the job waits for them (3 jobs ahead in the Jobs list)" in err, err
    lists = [r for r in emu.requests if r.method == "GET" and r.path.endswith("/jobs")]
    assert lists and all(r.query.get("listViewType") == "ActiveOnly" for r in lists)
    monkeypatch.setattr("dtrain.backends.azure.capacity.MAX_LISTED", 3)   # a workspace too big to list whole
    assert "; at least 1 job ahead" in run_main(capsys, "status", "third")[2]   # newest first: fourth, third, second
    assert "; jobs ahead not known (more than 3 active jobs to list)" in run_main(capsys, "status", "first")[2]


def test_a_preparing_job_says_its_environment_image_is_building(emu, job, capsys):
    emu.script_job_statuses(["Preparing"] * 50, 10)
    emu.artifacts.image_builds.add("img")
    assert run_main(capsys, "submit", job(1), "--name", "img")[0] == 0
    code, out, err = run_main(capsys, "status", "img")
    assert code == 0 and "waiting: building the environment image (azureml-logs/20_image_build_log.txt)" in err, err
    emu.artifacts.image_builds.clear()                                     # built: the run lists its other logs
    assert "building the environment image" not in run_main(capsys, "status", "img")[2]


def test_an_ended_job_costs_price_x_nodes_x_its_measured_run_time(emu, job, capsys):
    emu.script_job_statuses(["Queued", "Running", "Running", "Completed"], 0.3)
    code, out, err = run_main(capsys, "submit", job(2), "--name", "done", "--wait", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["instance_type"] == T4 and doc["status"] == "Completed"
    c = doc["cost"]
    from dtrain.cost import run_seconds

    secs = run_seconds(doc["started"], doc["ended"])
    assert c["seconds"] == round(secs, 3) and c["total"] == round(0.752 * 2 * secs / 3600, 2)
    assert c["price"]["source"].startswith("snapshot: SkyPilot catalog") and c["local"] is False
    code, _, err = run_main(capsys, "status", "done")
    assert f"cost: ${c['total']:,.2f} (2 nodes x" in err and "at $0.752/h" in err


def test_the_usages_examples_numbers_and_the_services_family_of_a_size_dtrain_does_not_know(emu, job, capsys,
                                                                                               conformance_dir):
    """Usage/list.json as the service answers it: the NC family has 12 of 24 vCPUs in use. The cluster's
    STANDARD_NC24 is not in dtrain's table; the region's VM sizes list says its family and vCPUs."""
    emu.capacity.usages["eastus"] = load_example("Usage/list.json")["responses"]["200"]["body"]["value"]
    emu.capacity.vm_sizes.append(vm_size("Standard_NC24", "standardNCFamily", 24, 4, 224))
    set_compute(emu, "gpu-cluster", vmSize="STANDARD_NC24")
    code, _, err = run_main(capsys, "submit", job(2), "--name", "nc2")
    assert code == 2 and "2 x STANDARD_NC24 need 48 vCPUs (24 each: VM sizes list for eastus), above the NC family " \
                         "quota limit of 24 vCPUs ('Standard NC Family Cluster Dedicated vCPUs'" in err
    code, _, err = run_main(capsys, "submit", job(1), "--name", "nc1")
    assert code == 0 and "quota: 12 of 24 vCPUs of NC family in use" in err and "regional total" in err


def test_validate_with_a_workspace_checks_capacity_and_sends_nothing(emu, job, capsys):
    set_compute(emu, "gpu-cluster", maxNodeCount=2)
    emu.capacity.usages["eastus"] = [total(14, 100), usage("NCASv3_T4", 14, 20)]
    ws = ("--workspace", emu.workspace, "-g", emu.resource_group, "--subscription", emu.subscription_id)
    code, _, err = run_main(capsys, "validate", job(4), *ws)
    assert code == 2 and "job.yml: resources.instance_count 4 is more than cluster gpu-cluster's maximum of 2" in err
    assert "job.yml: invalid" in err
    code, out, err = run_main(capsys, "validate", job(1), *ws, "-o", "json")
    assert code == 0 and json.loads(out)["capacity"][0].startswith("capacity: quota: 14 of 20 vCPUs")
    assert [r for r in emu.requests if r.method != "GET"] == []                     # validate sends nothing
    assert run_main(capsys, "validate", job(4))[0] == 0                              # offline as before
    code, out, err = run_main(capsys, "submit", job(4), "--dry-run", *ws)            # the same checks, nothing sent
    assert code == 2 and "maximum of 2 nodes" in err and "nothing was submitted" in err
    code, out, err = run_main(capsys, "submit", job(1), "--dry-run", *ws)
    assert code == 0 and "instance_count: 1" in out and "capacity: quota: 14 of 20 vCPUs" in err
    assert [r for r in emu.requests if r.method != "GET"] == []


def test_a_job_that_names_only_its_cluster_is_priced_by_the_clusters_vm_size(emu, job, capsys):
    """Most Azure ML YAMLs name a cluster and no instance_type: the price is the cluster's vmSize (read from the
    workspace, in its region), for `dtrain cost` with the workspace flags and for submit's --max-cost gate."""
    ws = ("--workspace", emu.workspace, "-g", emu.resource_group, "--subscription", emu.subscription_id)
    code, _, err = run_main(capsys, "cost", job(2), "--hours", "1")
    assert code == 2 and "names no resources.instance_type" in err and "--workspace" in err
    code, out, err = run_main(capsys, "cost", job(2), "--hours", "1", *ws)
    assert code == 0, err
    assert out.startswith(f"2 x {T4} (cluster gpu-cluster) x 1 h (--hours) in eastus at $0.752/h per node")
    assert out.rstrip().endswith("= $1.50") and "the default" not in err          # the workspace's region
    doc = json.loads(run_main(capsys, "cost", job(2), "--hours", "1", *ws, "-o", "json")[1])["jobs"][0]
    assert (doc["vm_size"], doc["vm_size_from"], doc["region_from"]) == (T4, "cluster gpu-cluster", "the workspace's")
    timed = ["--set", "limits.timeout=3600"]
    code, _, err = run_main(capsys, "submit", job(2), *timed, "--max-cost", "1", "--name", "dear")
    assert code == 2 and "$1.50, above --max-cost 1" in err and _sent(emu) == []
    code, _, err = run_main(capsys, "submit", job(2), *timed, "--max-cost", "2", "--name", "fine")
    assert code == 0 and "fine" in emu.jobs, err


def test_a_retry_chain_costs_each_attempt_from_its_own_run_time(emu, job, capsys, monkeypatch):
    monkeypatch.setenv("DTRAIN_RETRY_BACKOFF_S", "0.1")
    lost = {"code": "NodeLost", "message": "a node was preempted (scripted)"}
    set_compute(emu, "gpu-cluster", vmSize="STANDARD_ND96AMSR_A100_V4")      # 32.77 USD/h: cents show
    emu.script_job_statuses(["Queued", "Running", "NotResponding"], 0.3, job="ch", error=lost)
    emu.script_job_statuses(["Queued", "Running", "Running", "Completed"], 0.3, job="ch-r1")
    code, out, err = run_main(capsys, "submit", job(2), "--name", "ch", "--retries", "1", "--wait", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    from dtrain.cost import run_seconds

    measured = {a["name"]: run_seconds(a["started"], a["ended"]) for a in doc["attempts"]}
    costs = {a["name"]: a for a in doc["cost"]["attempts"]}
    assert set(costs) == {"ch", "ch-r1"} and measured["ch"] != measured["ch-r1"]
    for name, secs in measured.items():
        assert costs[name]["seconds"] == round(secs, 3) and costs[name]["total"] == round(32.77 * 2 * secs / 3600, 2)
    assert doc["cost"]["total"] == round(sum(a["total"] for a in costs.values()), 2) > 0
