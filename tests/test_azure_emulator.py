"""The Azure ML emulator, driven by the real azure-ai-ml SDK over http on 127.0.0.1."""

from __future__ import annotations

import io
import json
import re
import time
import urllib.error
import urllib.request
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from azure.ai.ml import load_job
from azure.ai.ml.exceptions import JobException
from azure.storage.blob import BlobClient

from azure_emulator import (
    BLOB_CONTAINER,
    AzureMLEmulator,
    StaticTokenCredential,
    fake_jwt,
    load_example,
    make_ml_client,
    validate_job_body,
)

TRAIN_PY = "import sys\nprint('training', sys.argv[1:])\n"


@pytest.fixture
def emu(monkeypatch):
    # MLClient(cloud=...) records the cloud name in os.environ; put it back afterwards
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    with AzureMLEmulator(lro_retry_after=0.2) as emulator:
        yield emulator


@pytest.fixture
def ml(emu):
    return make_ml_client(emu)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN_PY)
    (tmp_path / "src" / "config.json").write_text('{"lr": 0.1}\n')
    (tmp_path / "job.yml").write_text(
        """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python train.py --epochs ${{inputs.epochs}}
code: src
inputs:
  epochs: 3
environment:
  image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04
compute: azureml:gpu-cluster
resources:
  instance_count: 2
distribution:
  type: pytorch
  process_count_per_instance: 2
environment_variables:
  NCCL_DEBUG: INFO
experiment_name: emulator-tests
display_name: emulated
tags: {suite: emulator}
"""
    )
    (tmp_path / "registered.yml").write_text(
        """\
command: python train.py
code: src
environment: azureml:my-env@latest
compute: azureml:cpu-cluster
experiment_name: emulator-tests
"""
    )
    return tmp_path


def _submit(ml, path: Path):
    return ml.jobs.create_or_update(load_job(str(path)))


def _text(status) -> str:
    return str(getattr(status, "value", status))  # the SDK hands back a str-valued enum


def _status(ml, name: str) -> str:
    return _text(ml.jobs.get(name).status)


# ---------------------------------------------------------------------------------------------


def test_submit_uploads_code_once_and_sends_a_valid_body(emu, ml, project):
    job = _submit(ml, project / "job.yml")

    assert list(emu.jobs) == [job.name]
    body = emu.jobs[job.name]
    assert validate_job_body(body) == [] and emu.violations == []
    props = body["properties"]
    assert props["jobType"] == "Command"
    assert props["distribution"] == {"distributionType": "PyTorch", "processCountPerInstance": 2}
    assert props["resources"]["instanceCount"] == 2
    assert props["computeId"] == emu.arm_id("computes", "gpu-cluster")
    assert props["environmentVariables"] == {"NCCL_DEBUG": "INFO"}
    assert props["inputs"]["epochs"] == {"jobInputType": "literal", "value": "3"}

    # the code version it points at exists, and its files were uploaded to the SAS URL handed out
    code_name, code_version = props["codeId"].split("/codes/")[1].split("/versions/")
    code = emu.codes[(code_name, code_version)]
    assert code["properties"]["codeUri"].startswith(emu.storage_url)
    uploaded = emu.uploaded_files()
    assert {Path(n).name: data for n, data in uploaded.items()} == {
        "train.py": TRAIN_PY.encode(),
        "config.json": b'{"lr": 0.1}\n',
    }
    env_name = props["environmentId"].split("/environments/")[1].split("/versions/")[0]
    assert env_name == "CliV2AnonymousEnvironment"
    assert any(k[0] == env_name for k in emu.environments)

    # every management call carried a bearer token over http; blob calls used the SAS instead
    arm = [r for r in emu.requests if r.path.startswith("/subscriptions/")]
    assert arm and all(r.bearer for r in arm)
    assert all(r.headers.get("authorization") == "Bearer <redacted>" for r in arm)
    blob_puts = emu.requests_to(r"^/dtrainemustorage/", "PUT")
    assert blob_puts and all("sig" in r.query and not r.bearer for r in blob_puts)

    # same code again: the content-hash lookup finds it, nothing is uploaded again
    before = len(emu.requests)
    second = _submit(ml, project / "job.yml")
    again = emu.requests[before:]
    assert second.name != job.name
    assert emu.jobs[second.name]["properties"]["codeId"] == props["codeId"]
    assert not [r for r in again if r.path.startswith("/dtrainemustorage/")]
    assert not [r for r in again if r.path.endswith("/startPendingUpload")]
    lookups = [r for r in again if r.method == "GET" and r.path.endswith("/versions") and "/codes/" in r.path]
    assert lookups and lookups[0].query["hash"] == code["properties"]["properties"]["hash_sha256"]

    # changed code: uploaded again as a new version
    (project / "src" / "train.py").write_text(TRAIN_PY + "# v2\n")
    third = _submit(ml, project / "job.yml")
    assert emu.jobs[third.name]["properties"]["codeId"] != props["codeId"]
    assert len(emu.uploaded_files()) == 4


def test_registered_environment_at_latest(emu, ml, project):
    emu.add_environment("my-env", "1")
    time.sleep(0.01)
    emu.add_environment("my-env", "2", image="example.azurecr.io/train:2")
    job = _submit(ml, project / "registered.yml")
    assert emu.jobs[job.name]["properties"]["environmentId"] == emu.arm_id("environments", "my-env", "2")
    lookup = emu.requests_to(r"/environments/my-env/versions$", "GET")
    assert lookup and lookup[0].query.get("$orderBy") == "createdtime desc"


@pytest.mark.parametrize(
    "script",
    [
        ["NotStarted", "Queued", "Preparing", "Starting", "Running", "Finalizing", "Completed"],
        ["Queued", "Running", "Failed"],
        ["Queued", "Preparing", "NotResponding"],
    ],
)
def test_get_follows_the_scripted_statuses(emu, ml, project, script):
    emu.script_job_statuses(script, seconds_per_step=None)  # one step per status read
    job = _submit(ml, project / "job.yml")
    assert _text(job.status) == script[0]
    seen = [_status(ml, job.name) for _ in range(len(script) + 1)]
    assert seen == script[1:] + [script[-1]] * 2


def test_statuses_move_on_wall_clock_and_per_job(emu, ml, project):
    emu.script_job_statuses(["Queued", "Running", "Completed"], seconds_per_step=0.3)
    first = _submit(ml, project / "job.yml")
    emu.script_job_statuses(["Queued", "Failed"], seconds_per_step=None, job="doomed")
    job = load_job(str(project / "job.yml"))
    job.name = "doomed"
    ml.jobs.create_or_update(job)
    assert _status(ml, "doomed") == "Failed"
    deadline = time.time() + 5
    while _status(ml, first.name) != "Completed":
        assert time.time() < deadline
        time.sleep(0.1)


def test_list_follows_next_links(emu, ml, project):
    emu.page_size = 2
    names = {_submit(ml, project / "job.yml").name for _ in range(5)}
    listed = [j.name for j in ml.jobs.list()]
    assert sorted(listed) == sorted(names)
    pages = emu.requests_to(r"/workspaces/[^/]+/jobs$", "GET")
    assert [r.query.get("$skipToken") for r in pages] == [None, "2", "4"]
    assert all(r.query.get("listViewType") == "ActiveOnly" for r in pages)


def test_begin_cancel_polls_the_operation_to_canceled(emu, ml, project):
    emu.script_job_statuses(["Queued", "Running"], seconds_per_step=0.1)
    job = _submit(ml, project / "job.yml")
    poller = ml.jobs.begin_cancel(job.name)
    assert poller.result() is None and poller.done()
    assert _status(ml, job.name) == "Canceled"
    cancel = emu.requests_to(r"/jobs/[^/]+/cancel$", "POST")
    assert len(cancel) == 1 and cancel[0].status == 202
    # the recorded cancel's only poll target: a Location under the region's mfeOperationResults
    assert emu.requests_to(r"/mfeOperationResults/", "GET") and not emu.requests_to(r"/operationStatuses/", "GET")


@pytest.mark.sdk
@pytest.mark.slow  # seconds of retry back-off
def test_throttling_and_unavailable_are_retried_without_duplicates(emu, ml, project):
    throttled = emu.throttle(r"/jobs/[^/]+$", retry_after=1, method="PUT")
    unavailable = emu.fail(r"/jobs/[^/]+$", 503, method="PUT")
    job = _submit(ml, project / "job.yml")
    assert throttled.hits == 1 and unavailable.hits == 1
    attempts = emu.requests_to(r"/jobs/[^/]+$", "PUT")
    assert [r.status for r in attempts] == [429, 503, 201]
    assert attempts[1].time - attempts[0].time >= 0.9  # Retry-After honoured
    assert list(emu.jobs) == [job.name] and len(emu.job_puts) == 1


def test_connection_reset_and_lost_answer_are_retried(emu, ml, project):
    job = _submit(ml, project / "job.yml")
    emu.reset_connection(r"/jobs/[^/]+$", method="GET")
    assert _status(ml, job.name) in ("NotStarted", "Queued", "Preparing", "Starting", "Running")
    # the PUT is processed but its answer lost: the SDK retries the (idempotent) PUT by name
    emu.reset_connection(r"/jobs/[^/]+$", method="PUT", after_processing=True)
    second = _submit(ml, project / "job.yml")
    assert [r.fault for r in emu.requests_to(f"/jobs/{second.name}$", "PUT")] == ["reset after processing", None]
    assert len(emu.jobs) == 2


def test_slow_answer(emu, ml, project):
    job = _submit(ml, project / "job.yml")
    emu.slow(r"/jobs/", 0.5, method="GET")
    start = time.time()
    ml.jobs.get(job.name)
    assert time.time() - start >= 0.5


def test_expired_token_gets_a_claims_challenge_and_a_fresh_token(emu, project):
    credential = StaticTokenCredential("token-1")
    ml = make_ml_client(emu, credential)
    job = _submit(ml, project / "job.yml")
    _status(ml, job.name)  # the jobs.get client now caches token-1 (each service client has its own)
    emu.expire_token("token-1", after_requests=0)  # revoked from now on
    credential.rotate("token-2")
    assert _status(ml, job.name)
    rejected = [r for r in emu.requests if r.status == 401]
    assert len(rejected) == 1 and rejected[0].fault == "token expired"
    assert [req["claims"] for req in credential.requests if req["claims"]]  # CAE claims reached get_token
    assert emu.tokens_seen == ["token-1", "token-2"]

    emu.expire_token("token-2", after_requests=0, challenge="invalid_token")
    from azure.core.exceptions import ClientAuthenticationError

    with pytest.raises(ClientAuthenticationError, match="ExpiredAuthenticationToken"):
        ml.jobs.get(job.name)


def test_invalid_job_body_is_rejected_with_an_azure_error(emu):
    assert validate_job_body(load_example("Job/CommandJob/createOrUpdate.json")["parameters"]["body"]) == []
    body = {"properties": {"jobType": "Command", "command": "python x.py", "resources": {"instanceCount": "2"},
                           "distribution": {"distributionType": "Horovod"}, "bogus": True}}
    request = urllib.request.Request(
        f"{emu.url}{emu.workspace_arm_id}/jobs/bad-job?api-version=2024-04-01",
        data=json.dumps(body).encode(),
        method="PUT",
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + fake_jwt()},
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request)
    assert info.value.code == 400
    error = json.loads(info.value.read())["error"]
    assert error["code"] == "UserError"
    errors = emu.violations[0]["errors"]
    for fragment in ("environmentId: required", "instanceCount: expected integer", "'Horovod'", "bogus: unknown"):
        assert any(fragment in e for e in errors), (fragment, errors)
    assert emu.jobs == {}


def test_unknown_compute_is_rejected(emu, ml, project):
    from azure.core.exceptions import HttpResponseError

    job = load_job(str(project / "job.yml"))
    job.compute = "no-such-cluster"
    with pytest.raises(HttpResponseError, match="no-such-cluster"):
        ml.jobs.create_or_update(job)
    assert emu.jobs == {}
    emu.add_compute("no-such-cluster", vm_size="STANDARD_NC6")
    assert ml.jobs.create_or_update(job).name in emu.jobs


def test_run_details_log_files_grow_and_honour_ranges(emu, ml, project):
    emu.script_job_statuses(["Queued"] + ["Running"] * 20 + ["Completed"], seconds_per_step=0.2)
    job = _submit(ml, project / "job.yml")
    time.sleep(0.3)
    details = ml.jobs._runs_operations.get_run_details(job.name)  # the SDK's run-history client
    assert details.status == "Running"
    assert sorted(details.log_files) == [f"user_logs/std_log_process_{i}.txt" for i in range(4)]
    url = details.log_files["user_logs/std_log_process_1.txt"]
    assert url.startswith(emu.storage_url) and "sig=" in url

    first = BlobClient.from_blob_url(url).download_blob().readall()
    time.sleep(0.5)
    second = BlobClient.from_blob_url(url).download_blob().readall()
    assert first and second.startswith(first) and len(second) > len(first)
    assert b"[rank 1/4]" in second

    tail = BlobClient.from_blob_url(url).download_blob(offset=len(first), length=10).readall()
    assert tail == second[len(first):len(first) + 10]
    ranged = [r for r in emu.requests if "x-ms-range" in r.headers or "range" in r.headers]
    assert ranged and ranged[-1].status == 206

    emu.append_log(job.name, "custom line\n", rank=1)
    assert emu.log_content(job.name, "user_logs/std_log_process_1.txt").endswith("custom line\n")


def test_job_resources_have_the_shape_the_service_answers_with(emu, ml, project):
    """Not an echo of the PUT: the fields the recorded service answers add (see shapes.py)."""
    emu.script_job_statuses(["Starting", "Starting", "Running", "Completed"], seconds_per_step=None)
    job = _submit(ml, project / "job.yml")
    put = [r for r in emu.requests_to(r"/jobs/[^/]+$", "PUT") if r.status in (200, 201)][-1]
    assert "default" not in put.body["properties"]["outputs"]
    url = f"{emu.url}{emu.workspace_arm_id}/jobs/{job.name}?api-version=2024-01-01-preview"
    read = lambda: json.loads(urllib.request.urlopen(urllib.request.Request(  # noqa: E731
        url, headers={"Authorization": "Bearer " + fake_jwt()})).read())
    res = read()
    props = res["properties"]
    assert props["status"] == "Starting"
    assert props["outputs"]["default"] == {
        "description": None, "uri": f"azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.{job.name}",
        "assetName": None, "assetVersion": None, "mode": "ReadWriteMount", "pathOnCompute": None,
        "autoDeleteSetting": None, "jobOutputType": "uri_folder"}
    sent_bag = put.body["properties"]["properties"]
    assert props["properties"] == {**sent_bag, "_azureml.ComputeTargetType": "amlctrain",
                                   "_azureml.ClusterName": "gpu-cluster"}
    assert props["resources"] == {"instanceCount": 2, "maxInstanceCount": None, "instanceType": None,
                                  "locations": None, "properties": {}, "shmSize": "2g", "dockerArgs": None}
    assert props["services"]["Tracking"]["endpoint"].endswith("?") and props["services"]["Studio"]["port"] is None
    for absent in ("description", "componentId", "notificationSetting", "limits", "autologgerSettings",
                   "secretsConfiguration", "identity"):
        assert absent in props and props[absent] is None, absent
    assert props["queueSettings"] == {"jobTier": "Null", "priority": None}
    assert props["inputs"]["epochs"] == {"description": None, "value": "3", "jobInputType": "literal"}
    assert set(res["systemData"]) == {"createdAt", "createdBy", "createdByType"}
    running = read()["properties"]["properties"]
    assert running["ProcessInfoFile"] == "azureml-logs/process_info.json" and "StartTimeUtc" in running
    # the SDK reads these answers as it reads the service's
    got = ml.jobs.get(job.name)
    assert got.outputs["default"].path.endswith(f"dcid.{job.name}") and _text(got.status) == "Completed"


@pytest.mark.sdk
@pytest.mark.slow  # waits for emulated jobs to end
def test_stream_prints_rank_zero_until_completed_or_raises_on_failure(emu, ml, project):
    # with outputs.default (as the service adds it) jobs.stream lists logs through the artifact
    # datastore over https, out of a loopback emulator's reach: leave it out so the SDK reads logFiles
    emu.default_output = False
    # one step per status read: the job GET and the first run-details read see Queued/Running,
    # the next read (after the SDK's 2 s poll interval) sees Completed
    emu.script_job_statuses(["Queued", "Queued", "Running", "Completed"], seconds_per_step=None)
    job = _submit(ml, project / "job.yml")
    out = io.StringIO()
    with redirect_stdout(out):
        ml.jobs.stream(job.name)
    text = out.getvalue()
    assert "Streaming user_logs/std_log_process_0.txt" in text
    assert f"[rank 0/4] {job.name} finished" in text and "Execution Summary" in text

    emu.script_job_statuses(["Queued", "Queued", "Running", "Failed"], seconds_per_step=None,
                            error={"code": "UserError", "message": "loss is NaN"})
    failing = _submit(ml, project / "job.yml")
    with redirect_stdout(io.StringIO()), pytest.raises(JobException, match="loss is NaN"):
        ml.jobs.stream(failing.name)


def test_blob_storage_speaks_the_storage_sdk(emu):
    from azure.storage.blob import ContainerClient

    sas = f"{emu.storage_url}/{BLOB_CONTAINER}?sv=2021-08-06&sig=x"
    container = ContainerClient.from_container_url(sas, max_single_put_size=8, max_block_size=8)
    data = b"0123456789" * 5
    container.upload_blob("runs/a/blocks.bin", data, metadata={"owner": "dtrain"})  # Put Block + Block List
    container.upload_blob("runs/a/small.txt", b"hi")
    container.upload_blob("runs/b/other.txt", b"x")
    assert emu.requests_to(r"blocks\.bin$", "PUT")[0].query.get("comp") == "block"
    assert emu.blob_bytes(BLOB_CONTAINER, "runs/a/blocks.bin") == data

    pages = container.list_blobs(name_starts_with="runs/a/", include=["metadata"], results_per_page=1).by_page()
    listed = [(b.name, b.size, dict(b.metadata or {})) for page in pages for b in page]
    assert listed == [("runs/a/blocks.bin", 50, {"owner": "dtrain"}), ("runs/a/small.txt", 2, {})]
    assert [p.name for p in container.walk_blobs(name_starts_with="runs/", delimiter="/")] == ["runs/a/", "runs/b/"]

    blob = container.get_blob_client("runs/a/blocks.bin")
    assert blob.get_blob_properties().metadata == {"owner": "dtrain"}
    assert blob.download_blob(offset=45, length=5).readall() == b"56789"
    assert blob.exists() and not container.get_blob_client("runs/nope").exists()


def _conformance_command_jobs():
    """Loadable command-job YAMLs of the conformance set whose dependencies the emulator can serve
    (no environment build context, no local-path or data-asset inputs: see docs/azure-emulator.md)."""
    from azure_emulator.spec import CONFORMANCE_DIR

    manifest = json.loads((CONFORMANCE_DIR / "manifest.json").read_text())
    out = []
    for case in manifest["cases"]:
        if case["kind"] != "command-job" or not case["sdk_loads"]:
            continue
        text = (CONFORMANCE_DIR / case["file"]).read_text()
        if (re.search(r"^\s*build:", text, re.M) or re.search(r"environment:\s*file:", text)
                or re.search(r"path:\s*(\.|[A-Za-z_][^:\n]*$)", text, re.M)
                or re.search(r"path:\s*azureml:(?!//)", text)):
            continue
        out.append(CONFORMANCE_DIR / case["file"])
    return out


@pytest.mark.sdk
@pytest.mark.slow  # every conformance YAML through the SDK
def test_conformance_command_jobs_submit_with_spec_valid_bodies(emu, ml):
    cases = _conformance_command_jobs()
    assert len(cases) >= 20
    for path in cases:
        job = load_job(str(path))
        if isinstance(job.compute, str) and job.compute.split(":")[-1] not in emu.computes:
            emu.add_compute(job.compute.split(":")[-1])
        created = ml.jobs.create_or_update(job)
        body = emu.jobs[created.name]
        assert validate_job_body(body) == [], path
    assert emu.violations == []
