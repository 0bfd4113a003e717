"""The capacity checks and waiting reasons as pure functions of what the compute and Usages reads return
(backends/azure/capacity.py; the reads themselves: test_capacity_azure.py), and the CI summary's cost table."""
from __future__ import annotations

from datetime import datetime, timezone

from dtrain.backends.azure.capacity import Compute, Usage, findings, image_build_log, waiting
from dtrain.backends.base import JobInfo
from dtrain.ci import summary_markdown

FAMILY = "Microsoft.MachineLearningServices/vmFamily/usages"
TOTAL = "Microsoft.MachineLearningServices/dedicatedCores/usages"


def cluster(**kw) -> Compute:
    base = dict(name="gpu", vm_size="STANDARD_ND96ISR_H100_V5", priority="Dedicated", min_nodes=0, max_nodes=4,
                allocation_state="Steady", since=None, current=0, target=0,
                states={"runningNodeCount": 0, "idleNodeCount": 0, "preparingNodeCount": 0})
    return Compute(**{**base, **kw})


def quota(current: int, limit: int, family: str = "NDSH100v5", tier: str = "Dedicated") -> list:
    return [Usage(f"Total Cluster {tier} Regional vCPUs", TOTAL, current, 10_000),
            Usage(f"Standard {family} Family Cluster {tier} vCPUs", FAMILY, current, limit)]


def levels(found) -> list:
    return [f.level for f in found]


def test_more_nodes_than_the_maximum_and_another_vm_size_are_refused():
    found = findings(vm_size=None, nodes=6, compute=cluster(), usages=quota(0, 1000), region="eastus",
                     spec_vm_size="Standard_NC24ads_A100_v4")
    assert levels(found) == ["refuse", "refuse"]
    assert "instance_count 6 is more than cluster gpu's maximum of 4 nodes" in found[0].text
    assert "Standard_NC24ads_A100_v4 is not cluster gpu's VM size STANDARD_ND96ISR_H100_V5" in found[1].text
    same = findings(vm_size=None, nodes=2, compute=cluster(), usages=quota(0, 1000), region="eastus",
                    spec_vm_size="Standard_ND96isr_H100_v5")
    assert same == []                                    # the service's capitals are the same size


def test_quota_limit_refuses_quota_in_use_warns_idle_nodes_need_none():
    over = findings(vm_size=None, nodes=3, compute=cluster(), usages=quota(0, 192), region="eastus")
    assert levels(over) == ["refuse"] and "need 288 vCPUs (96 each" in over[0].text and "limit of 192" in over[0].text
    busy = findings(vm_size=None, nodes=2, compute=cluster(), usages=quota(96, 192), region="eastus")
    assert levels(busy) == ["warn"] and busy[0].text.startswith("quota: 96 of 192 vCPUs of NDSH100v5 family in use")
    idle = cluster(current=1, states={"idleNodeCount": 1, "runningNodeCount": 0})
    assert findings(vm_size=None, nodes=2, compute=idle, usages=quota(96, 192), region="eastus") == []


def test_serverless_gets_the_quota_check_alone_and_low_priority_its_own_family():
    sl = findings(vm_size="Standard_NC8as_T4_v3", nodes=1, compute=None, usages=quota(14, 20, "NCASv3_T4"),
                  region="eastus")
    assert levels(sl) == ["warn"] and "14 of 20 vCPUs of NCASv3_T4 family" in sl[0].text
    low = findings(vm_size="Standard_NC8as_T4_v3", nodes=3, compute=None, low_priority=True, region="eastus",
                   usages=quota(0, 20, "NCASv3_T4") + quota(0, -1, "NCASv3_T4", "LowPriority"))
    assert low == []                                     # -1: no limit of its own (Usage/list.json's LowPriority)


def test_a_family_missing_from_the_usages_is_said_not_guessed():
    found = findings(vm_size=None, nodes=1, compute=cluster(), usages=quota(0, 10, "NC"), region="westus3")
    assert levels(found) == ["warn"] and "no NDSH100v5 family quota in the Usages list for westus3" in found[0].text


def test_cluster_at_max_and_allocation_errors_warn():
    full = cluster(current=4, states={"runningNodeCount": 4})
    error = "exceeding approved Standard NDSH100v5 Family Cores quota (QuotaExceeded)"
    found = findings(vm_size=None, nodes=2, compute=cluster(current=4, states={"runningNodeCount": 4}, errors=[error]),
                     usages=None, region="eastus")
    assert levels(found) == ["warn", "warn"] and "maximum of 4 nodes, all busy" in found[0].text
    assert error in found[1].text
    assert waiting("Queued", full, None, vm_size=None, nodes=2, region="eastus") == \
        "cluster at max 4 nodes, all running other jobs"


def test_why_it_waits():
    now = datetime(2026, 1, 1, 10, 3, 30, tzinfo=timezone.utc)
    resizing = cluster(allocation_state="Resizing", target=2, since="2026-01-01T10:00:00Z")
    assert waiting("Queued", resizing, None, vm_size=None, nodes=2, region="eastus", now=now) == \
        "cluster resizing 0 -> 2 nodes (3 min)"
    failed = cluster(errors=["Allocation failed: no capacity (ZonalAllocationFailed)"])
    assert waiting("Preparing", failed, None, vm_size=None, nodes=2, region="eastus") == \
        "allocation failed: Allocation failed: no capacity (ZonalAllocationFailed)"
    q = waiting("Queued", None, quota(80, 100, "NCADSH100v5"), vm_size="Standard_NC40ads_H100_v5", nodes=1,
                region="eastus")
    assert q == "quota: 80 of 100 vCPUs of NCADSH100v5 family in use"
    never = waiting("Queued", None, quota(0, 24, "NCADSH100v5"), vm_size="Standard_NC40ads_H100_v5", nodes=1,
                    region="eastus")
    assert never.startswith("quota: 1 x Standard_NC40ads_H100_v5 need 40 vCPUs") and "limit of 24 vCPUs" in never
    assert waiting("Running", resizing, None, vm_size=None, nodes=2, region="eastus") is None
    assert waiting("Queued", cluster(), quota(0, 1000), vm_size=None, nodes=2, region="eastus") is None


def test_why_it_waits_on_a_full_cluster_and_while_its_image_builds():
    full = cluster(current=4, states={"runningNodeCount": 4})
    base = dict(vm_size=None, nodes=2, region="eastus")
    assert waiting("Queued", full, None, ahead=(2, False), **base) == \
        "cluster at max 4 nodes, all running other jobs; 2 jobs ahead"
    assert waiting("Queued", full, None, ahead=(1, False), **base).endswith("; 1 job ahead")
    assert waiting("Queued", full, None, ahead=(0, False), **base).endswith("; first in line")
    assert waiting("Queued", full, None, ahead=(500, True), **base).endswith("; at least 500 jobs ahead")
    assert waiting("Queued", full, None, **base) == "cluster at max 4 nodes, all running other jobs"
    build = "azureml-logs/20_image_build_log.txt"
    assert waiting("Preparing", full, None, image_build=build, **base) == f"building the environment image ({build})"
    assert waiting("Queued", full, None, image_build=build, **base).startswith("cluster at max")  # built by then


def test_the_image_build_log_says_a_build_is_on_until_a_later_log_appears():
    build = "azureml-logs/20_image_build_log.txt"
    assert image_build_log({build: "u"}) == build
    assert image_build_log({"azureml-logs/20_image_build_log_0.txt": "u"}) == "azureml-logs/20_image_build_log_0.txt"
    assert image_build_log({build: "u", "azureml-logs/55_azureml-execution-tvmps_0.txt": "u"}) is None
    assert image_build_log({build: "u", "user_logs/std_log.txt": "u"}) is None
    assert image_build_log({"user_logs/std_log.txt": "u"}) is None and image_build_log({}) is None


def test_compute_from_the_rest_specs_example_shape():
    body = {"properties": {"computeType": "AmlCompute", "properties": {
        "vmSize": "STANDARD_NC6", "vmPriority": "Dedicated", "scaleSettings": {"maxNodeCount": 1, "minNodeCount": 0},
        "allocationState": "Resizing", "allocationStateTransitionTime": "2017-09-27T22:28:08.998Z", "errors": None,
        "currentNodeCount": 0, "targetNodeCount": 1, "nodeStateCounts": {"runningNodeCount": 0}}}}
    c = Compute.from_rest("compute123", body)                     # Compute/get/AmlCompute.json
    assert (c.vm_size, c.max_nodes, c.allocation_state, c.current, c.target, c.errors) == \
        ("STANDARD_NC6", 1, "Resizing", 0, 1, [])


def test_ci_summary_has_a_cost_table_with_the_total(monkeypatch):
    monkeypatch.setenv("DTRAIN_PRICES_OFFLINE", "1")
    jobs = [JobInfo(name=n, backend="azureml", status="Completed", nodes=2, instance_type="Standard_ND96amsr_A100_v4",
                    started="2026-01-01T10:00:00Z", ended=f"2026-01-01T1{h}:00:00Z") for n, h in (("a", 1), ("b", 2))]
    md = summary_markdown(jobs)
    assert "#### cost" in md and "| a | 65.54 | 32.77/h x 2 |" in md and "| b | 131.08 |" in md
    assert "| total | 196.62 |" in md and "SkyPilot catalog a7fff17" in md
