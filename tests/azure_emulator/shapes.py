"""Job resources in the shape the real Azure ML service answers, not as they were sent.

Taken from recorded service answers (Azure/azure-sdk-assets, python/sdk/ml/azure-ai-ml/tests/recordings/
command_job/e2etests/: test_command_job_serverless, test_command_job_with_dataset, and `az ml job show`
output). What the service does to a command job it was sent:

- every field of the job model is present, an absent one as an explicit ``null`` (``description``,
  ``componentId``, ``notificationSetting``, ``codeId``, ``distribution``, ``limits``, ...), or as its
  default: ``tags``/``environmentVariables``/``parameters``/``inputs`` ``{}``, ``isArchived`` false,
  ``experimentName`` "Default", ``displayName`` the job name;
- ``resources`` gets ``instanceCount: 1`` and ``shmSize: "2g"`` unless sent, the rest ``null``;
- ``outputs`` gains ``default``, the run's artifact folder:
  ``azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.NAME`` (uri_folder, ReadWriteMount);
- the ``properties`` bag gains ``_azureml.ComputeTargetType`` ("amlctrain") and ``_azureml.ClusterName``
  (the compute's name, null for serverless), and once the run starts ``ContentSnapshotId``,
  ``ProcessInfoFile``, ``ProcessStatusFile``, ``StartTimeUtc``, then ``EndTimeUtc``;
- ``services`` gains ``Tracking`` (the MLflow URI, ending in ``?``) and ``Studio``, each service with
  ``port``/``status``/``errorMessage``/``properties``/``nodes`` null;
- ``queueSettings`` defaults to ``{"jobTier": "Null"}`` on a compute cluster, ``"Standard"`` serverless;
- inputs and outputs get ``description: null`` (and ``pathOnCompute``, ``assetName``, ... null);
- ``systemData`` holds only ``createdAt``, ``createdBy`` and ``createdByType``.

The answer to a PUT (api-version 2025-01-01-preview in the recordings) and to a GET or list
(2024-01-01-preview) differ slightly in which null fields they carry; both are reproduced.
"""

from __future__ import annotations

import copy
import uuid
from datetime import datetime, timezone
from typing import Any, Dict, Optional

ARTIFACT_OUTPUT = "default"
NOT_STARTED = ("NotStarted", "Queued", "Preparing", "Provisioning", "Starting")
TERMINAL = ("Completed", "Failed", "Canceled", "NotResponding", "Paused")

_SERVICE_NULLS = {"port": None, "status": None, "errorMessage": None, "properties": None, "nodes": None}


def _run_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _input(sent: Dict[str, Any], put: bool) -> Dict[str, Any]:
    out: Dict[str, Any] = {"description": None}
    out.update(sent)
    if sent.get("jobInputType") != "literal" and not put:
        out.setdefault("pathOnCompute", None)
    return out


def _output(sent: Dict[str, Any], put: bool) -> Dict[str, Any]:
    out: Dict[str, Any] = {"description": None, "uri": None, "assetName": None}
    if not put:
        out["assetVersion"] = None
    out["mode"] = "ReadWriteMount"
    if not put:
        out.update(pathOnCompute=None, autoDeleteSetting=None)
    out.update(sent)
    return out


def service_job_properties(
    name: str,
    sent: Dict[str, Any],
    *,
    status: str,
    put: bool,
    created: float,
    tracking_uri: str,
    studio_url: str,
    default_output: bool = True,
    started: Optional[float] = None,
    ended: Optional[float] = None,
) -> Dict[str, Any]:
    """The ``properties`` of a command job resource as the service answers it. ``sent`` is the
    ``properties`` object as PUT; ``put`` picks the PUT answer's fields over the GET/list ones."""
    sent = copy.deepcopy(sent)
    compute_id = sent.get("computeId")
    bag = dict(sent.get("properties") or {})
    bag["_azureml.ComputeTargetType"] = "amlctrain"
    bag["_azureml.ClusterName"] = compute_id.rstrip("/").rsplit("/", 1)[-1] if compute_id else None
    if status not in NOT_STARTED and not put:
        if sent.get("codeId"):
            bag["ContentSnapshotId"] = str(uuid.uuid5(uuid.NAMESPACE_URL, str(sent["codeId"])))
        bag["ProcessInfoFile"] = "azureml-logs/process_info.json"
        bag["ProcessStatusFile"] = "azureml-logs/process_status.json"
        bag["StartTimeUtc"] = _run_time(started or created)
        if status in TERMINAL and ended is not None:
            bag["EndTimeUtc"] = _run_time(ended)

    services: Dict[str, Any] = {}
    for key, svc in (sent.get("services") or {}).items():
        services[key] = dict(_SERVICE_NULLS, **(svc or {}))
        if status in ("Running", "Finalizing"):
            services[key].update(_started_service(name, key, services[key]))
    services["Tracking"] = dict({"jobServiceType": "Tracking"}, endpoint=tracking_uri, **_SERVICE_NULLS)
    services["Studio"] = dict({"jobServiceType": "Studio"}, endpoint=studio_url, **_SERVICE_NULLS)

    resources: Dict[str, Any] = {"instanceCount": 1}
    if put:
        resources.update(instanceType=None, properties=None, shmSize="2g", dockerArgs=None, dockerArgsList=None)
    else:
        resources.update(maxInstanceCount=None, instanceType=None, locations=None, properties=None, shmSize="2g",
                         dockerArgs=None)
    resources.update({k: v for k, v in (sent.get("resources") or {}).items() if v is not None})

    outputs = {k: _output(v or {}, put) for k, v in (sent.get("outputs") or {}).items()}
    if default_output and ARTIFACT_OUTPUT not in outputs:
        outputs[ARTIFACT_OUTPUT] = _output({
            "uri": f"azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.{name}",
            "mode": "ReadWriteMount", "jobOutputType": "uri_folder"}, put)

    queue = dict(sent.get("queueSettings") or {"jobTier": "Null" if compute_id else "Standard"})
    if not put:
        queue.setdefault("priority", None)
    limits = sent.get("limits")
    if limits is not None:
        limits = dict({"jobLimitsType": "Command", "timeout": None}, **limits)

    props: Dict[str, Any] = {
        "description": sent.get("description"),
        "tags": sent.get("tags") or {},
        "properties": bag,
    }
    if put:
        props["parentJobName"] = None
    props.update({
        "displayName": sent.get("displayName") or name,
        "status": status,
        "experimentName": sent.get("experimentName") or "Default",
        "services": services,
        "computeId": compute_id,
        "isArchived": bool(sent.get("isArchived", False)),
        "identity": sent.get("identity"),
        "componentId": sent.get("componentId"),
        "notificationSetting": sent.get("notificationSetting"),
    })
    if not put:
        props["secretsConfiguration"] = sent.get("secretsConfiguration")
    props.update({
        "jobType": sent.get("jobType"),
        "resources": resources,
        "codeId": sent.get("codeId"),
        "command": sent.get("command"),
        "environmentId": sent.get("environmentId"),
        "inputs": {k: _input(v or {}, put) for k, v in (sent.get("inputs") or {}).items()},
        "outputs": outputs,
        "distribution": sent.get("distribution"),
    })
    if not put:
        props["autologgerSettings"] = sent.get("autologgerSettings")
    props.update({
        "limits": limits,
        "environmentVariables": sent.get("environmentVariables") or {},
        "parameters": sent.get("parameters") or {},
        "queueSettings": queue,
    })
    for key, value in sent.items():           # anything else sent is kept as sent
        props.setdefault(key, value)
    return props


def service_environment_properties(sent: Dict[str, Any]) -> Dict[str, Any]:
    """An environment version's properties as the service answers its PUT (test_ray_command_job.json): the
    fields it adds, null or defaulted, around what was sent."""
    props: Dict[str, Any] = {"description": None, "tags": {}, "properties": {"azureml.labels": ""},
                             "isArchived": False, "isAnonymous": False, "autoDeleteSetting": None,
                             "environmentType": "UserCreated", "condaFile": "", "osType": "Linux",
                             "autoRebuild": "Disabled", "provisioningState": "Succeeded", "stage": "Logged",
                             "intellectualProperty": None}
    props.update({k: copy.deepcopy(v) for k, v in sent.items() if v is not None})
    return props


def _started_service(job: str, key: str, svc: Dict[str, Any]) -> Dict[str, Any]:
    """What a running job reports of an interactive service it was given: the REST spec's JobService status and
    endpoint (readOnly status; no recording shows one running, so the hosts here are illustrative)."""
    kind = svc.get("jobServiceType") or key
    host = f"{job}-{key}.eastus.nodes.azureml.ms".lower()
    endpoint = svc.get("endpoint") or (f"ssh://root@{host}:{svc.get('port') or 50000}" if kind == "SSH"
                                       else f"https://{host}/")
    return {"status": "Running", "endpoint": endpoint}
