"""`submit --name X` decides whether an existing job is "this job" from the service's answer, which is
not the body sent (outputs.default, _azureml.* properties, shmSize "2g", services, nulls): what the
service adds is ignored, a real change of spec is not. No network: the service's answer comes from
the emulator's recorded shapes."""
from __future__ import annotations

import copy

import pytest

from azure_emulator.shapes import service_job_properties
from dtrain.backends.azure.plan import differences

SENT = {
    "jobType": "Command", "command": "python train.py --lr ${{inputs.lr}}", "codeId": "src",
    "computeId": "gpu-cluster", "environmentId": "azureml:CliV2AnonymousEnvironment:abc",
    "environmentVariables": {"NCCL_DEBUG": "INFO"}, "experimentName": "exp", "displayName": "run",
    "inputs": {"lr": {"jobInputType": "literal", "value": "0.01"},
               "data": {"jobInputType": "uri_folder", "uri": "azureml://datastores/d/paths/x/", "mode": "ReadOnlyMount"}},
    "outputs": {"model": {"jobOutputType": "uri_folder"}, "ckpt": {"jobOutputType": "uri_folder", "mode": "Upload"}},
    "distribution": {"distributionType": "PyTorch", "processCountPerInstance": 2},
    "resources": {"instanceCount": 2}, "limits": {"jobLimitsType": "Command", "timeout": "PT1H"},
    "isArchived": False, "properties": {}, "tags": {},
}
WS = "/subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w"


def answer(sent: dict, *, status="Running", put=False) -> dict:
    resolved = dict(sent, computeId=f"{WS}/computes/gpu-cluster", codeId=f"{WS}/codes/c/versions/1",
                    environmentId=f"{WS}/environments/CliV2AnonymousEnvironment/versions/abc")
    return service_job_properties("job-1", resolved, status=status, put=put, created=0.0,
                                  tracking_uri="azureml://x/mlflow?", studio_url="https://studio/runs/job-1")


@pytest.mark.parametrize("status,put", [("Starting", True), ("Queued", False), ("Running", False),
                                        ("Completed", False)])
def test_what_the_service_adds_is_not_a_difference(status, put):
    theirs = answer(SENT, status=status, put=put)
    assert theirs["outputs"]["default"]["uri"].endswith("/ExperimentRun/dcid.job-1")
    assert theirs["resources"]["shmSize"] == "2g" and theirs["description"] is None
    assert differences(SENT, theirs, name="job-1") == []


def test_a_minimal_spec_is_the_same_job_too():
    sent = {"jobType": "Command", "command": "echo hi", "environmentId": "azureml:CliV2AnonymousEnvironment:abc",
            "properties": {}, "tags": {}, "inputs": {}, "outputs": {}, "environmentVariables": {}}
    assert differences(sent, answer(sent), name="job-1") == []


@pytest.mark.parametrize("change,field", [
    (lambda b: b.update(command="python train2.py"), "command"),
    (lambda b: b["outputs"]["ckpt"].update(mode="ReadWriteMount"), "outputs.ckpt"),
    (lambda b: b["outputs"].pop("model"), "outputs"),
    (lambda b: b["outputs"].update(default={"jobOutputType": "uri_file"}), "outputs.default"),
    (lambda b: b["inputs"]["lr"].update(value="0.1"), "inputs.lr"),
    (lambda b: b["resources"].update(instanceCount=4), "resources.instanceCount"),
    (lambda b: b["distribution"].update(processCountPerInstance=4), "distribution.processCountPerInstance"),
    (lambda b: b["limits"].update(timeout="PT2H"), "limits.timeout"),
    (lambda b: b.update(computeId="cpu-cluster"), "computeId"),
])
def test_a_real_change_of_spec_is_still_caught(change, field):
    ours = copy.deepcopy(SENT)
    change(ours)
    assert field in differences(ours, answer(SENT), name="job-1")


def test_a_setting_dropped_from_the_spec_is_caught_when_the_job_holds_more_than_the_default():
    shm = dict(SENT, resources={"instanceCount": 2, "shmSize": "16g"})
    assert differences(SENT, answer(shm), name="job-1") == ["resources.shmSize"]
    assert differences(dict(SENT, resources={}), answer(SENT), name="job-1") == []  # 2 nodes kept: the spec's field
    no_limits = {k: v for k, v in SENT.items() if k != "limits"}
    assert differences(no_limits, answer(SENT), name="job-1") == ["limits"]


def test_another_jobs_artifact_folder_is_not_ignored():
    theirs = answer(SENT)
    theirs["outputs"]["default"]["uri"] = "azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.other"
    assert "outputs" in differences(SENT, theirs, name="job-1")
