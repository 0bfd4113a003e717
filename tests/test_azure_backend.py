"""The Azure ML backend end to end: `python -m dtrain` (and AzureBackend in-process) through the real
azure-ai-ml SDK and its HTTP pipeline, against the emulator in tests/azure_emulator. Nothing of the
SDK is mocked: the emulator answers over http on 127.0.0.1 (DTRAIN_ARM_ENDPOINT + DTRAIN_ARM_TOKEN)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from azure_emulator import UNRESOLVABLE_SUFFIX, AzureMLEmulator, fake_jwt, validate_job_body
from fakes import run_in_process

# End to end through real processes and the emulator: about 2 minutes on 2 cores.
pytestmark = [pytest.mark.slow, pytest.mark.sdk]

TRAIN_PY = "import sys\nprint('training', sys.argv[1:])\n"
JOB_YML = """\
command: python train.py --epochs ${{inputs.epochs}} --lr ${{inputs.lr}}
code: src
inputs:
  epochs: 3
  lr: 0.01
environment:
  image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04
compute: azureml:gpu-cluster
resources:
  instance_count: 2
  shm_size: 16g
distribution:
  type: pytorch
  process_count_per_instance: 2
environment_variables:
  NCCL_DEBUG: INFO
experiment_name: emulator-tests
display_name: emulated
tags: {suite: azure}
"""
# SDK-resolved at submit: uploaded code, registered anonymous environment, compute name -> ARM id.
RESOLVED = ("codeId", "environmentId", "computeId")


@pytest.fixture
def emu(monkeypatch):
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2) as e:
        yield e


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN_PY)
    (tmp_path / "job.yml").write_text(JOB_YML)
    return tmp_path


def base_env(tmp: Path) -> dict:
    # conftest's _hermetic_environment already cleared CI, workspace and credential variables and points
    # AZURE_CONFIG_DIR at an empty folder, so this machine's `az configure` defaults never leak in
    return {**os.environ, "DTRAIN_HOME": str(tmp / "dtrain-home")}


def emu_env(emu, tmp: Path, **extra) -> dict:
    env = base_env(tmp)
    env.update(DTRAIN_ARM_ENDPOINT=emu.url, DTRAIN_ARM_TOKEN=fake_jwt(audience=emu.url + "/"),
               DTRAIN_SUBSCRIPTION_ID=emu.subscription_id, DTRAIN_RESOURCE_GROUP=emu.resource_group,
               DTRAIN_WORKSPACE=emu.workspace, DTRAIN_AZURE_POLL_CAP_S="0.5", DTRAIN_AZURE_LOG_POLL_S="0.1",
               DTRAIN_AZURE_LOG_POLL_CAP_S="0.4", DTRAIN_AZURE_RETRY_BACKOFF_S="0.1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def dtrain(*args, env, cwd, timeout=150, process=False) -> subprocess.CompletedProcess:
    """The real CLI against the emulator. In this process by default (azure-ai-ml's import, 1.5 to 2 CPU-s,
    is paid once per worker, not once per command); process=True where a process of its own is the point
    (what it imports, signals, exit on a broken pipe)."""
    if process or threading.current_thread() is not threading.main_thread():   # concurrent calls: processes
        return subprocess.run([sys.executable, "-m", "dtrain", *map(str, args)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
    return run_in_process([str(a) for a in args], env=env, cwd=cwd)


def expected_lines(emu, job: str) -> dict[int, list[str]]:
    """rank -> the lines the emulator holds for that rank."""
    out = {}
    for i, name in enumerate(emu.log_file_names(job)):
        out[i] = emu.log_content(job, name).splitlines()
    return out


def printed_lines(stdout: str) -> dict[int, list[str]]:
    """rank -> lines printed with a `nN/rR | ` prefix, in order."""
    out: dict[int, list[str]] = {}
    for line in stdout.splitlines():
        if " | " not in line or not line.startswith("n"):
            continue
        tag, _, text = line.partition(" | ")
        rank = int(tag.strip().split("/r")[1])
        out.setdefault(rank, []).append(text)
    return out


def job_puts(emu, name=None):
    return [r for r in emu.requests_to(r"/workspaces/[^/]+/jobs/[^/]+$", "PUT") if name is None or r.path.endswith("/" + name)]


# --- submit and the recorded body --------------------------------------------------------------

def test_submit_prints_name_and_sends_what_render_shows(emu, project):
    env = emu_env(emu, project)
    r = dtrain("submit", "job.yml", "--name", "body-check", "--set", "inputs.epochs=5", env=env, cwd=project)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "body-check"
    assert f"{emu.url}/studio/runs/body-check" in r.stderr
    assert "experimental" not in r.stderr and "\x1b" not in r.stderr      # no SDK noise

    sent = emu.jobs["body-check"]["properties"]
    assert validate_job_body(emu.jobs["body-check"]) == [] and emu.violations == []
    rendered = json.loads(dtrain("render", "job.yml", "--format", "rest", "--set", "inputs.epochs=5",
                                 env=env, cwd=project).stdout)["properties"]
    assert {k: v for k, v in sent.items() if k not in RESOLVED} == \
           {k: v for k, v in rendered.items() if k not in RESOLVED}
    assert sent["computeId"] == emu.arm_id("computes", "gpu-cluster")
    env_name, _, env_version = rendered["environmentId"].removeprefix("azureml:").partition(":")
    assert sent["environmentId"] == emu.arm_id("environments", env_name, env_version)
    assert "/codes/" in sent["codeId"] and rendered["codeId"] == "src"
    assert sent["inputs"]["epochs"] == {"jobInputType": "literal", "value": "5"}
    # the code snapshot went up once, through the SAS URL
    assert [Path(n).name for n in emu.uploaded_files()] == ["train.py"]
    # every ARM call carried a bearer token over http, to the loopback emulator only
    assert all(q.bearer for q in emu.requests if q.path.startswith("/subscriptions/"))


@pytest.mark.timeout(240)  # several dtrain processes through the emulator: 60-90 s at load 30
def test_same_spec_same_name_follows_the_existing_job_and_a_different_spec_is_a_conflict(emu, project):
    env = emu_env(emu, project)
    emu.script_job_statuses(["Queued", "Running", "Completed"], 0.3)
    first = dtrain("submit", "job.yml", "--name", "ci-run-1", env=env, cwd=project)
    assert first.returncode == 0, first.stderr
    uploads = len(emu.requests_to(r"/startPendingUpload$"))

    again = dtrain("submit", "job.yml", "--name", "ci-run-1", "--wait", env=env, cwd=project)
    assert again.returncode == 0, again.stderr
    assert "already exists with this spec" in again.stderr
    assert len(job_puts(emu, "ci-run-1")) == 1 and list(emu.jobs) == ["ci-run-1"]
    assert len(emu.requests_to(r"/startPendingUpload$")) == uploads

    conflict = dtrain("submit", "job.yml", "--name", "ci-run-1", "--set", "resources.instance_count=4",
                      env=env, cwd=project)
    assert conflict.returncode == 2, conflict.stderr
    assert "already exists with a different spec" in conflict.stderr and "resources.instanceCount" in conflict.stderr
    assert len(job_puts(emu, "ci-run-1")) == 1

    # same code under a new name: the SDK's content hash finds it, nothing is uploaded again
    other = dtrain("submit", "job.yml", "--name", "ci-run-2", env=env, cwd=project)
    assert other.returncode == 0, other.stderr
    assert len(emu.requests_to(r"/startPendingUpload$")) == uploads
    assert emu.jobs["ci-run-2"]["properties"]["codeId"] == emu.jobs["ci-run-1"]["properties"]["codeId"]


@pytest.mark.timeout(240)  # several dtrain processes through the emulator: 60-90 s at load 30
def test_same_name_resubmit_against_the_real_service_shapes(emu, project):
    """The service answers with what it adds (outputs.default, _azureml.* properties, shmSize "2g",
    Tracking/Studio services, nulls): the same spec under one --name is still the same job, and a
    changed command under that name is still refused, each time with no PUT."""
    (project / "out.yml").write_text(JOB_YML + "outputs:\n  model:\n    type: uri_folder\n"
                                     "  ckpt:\n    type: uri_folder\n    mode: upload\n"
                                     "limits:\n  timeout: 3600\n")
    env = emu_env(emu, project)
    first = dtrain("submit", "out.yml", "--name", "real-1", env=env, cwd=project)
    assert first.returncode == 0, first.stderr
    held = emu.jobs["real-1"]["properties"]
    answer = json.loads(urllib.request.urlopen(urllib.request.Request(
        f"{emu.url}{emu.workspace_arm_id}/jobs/real-1?api-version=2024-04-01",
        headers={"Authorization": "Bearer " + fake_jwt()})).read())["properties"]
    # the emulator answers as the service does, not with the body sent
    assert "default" not in held["outputs"] and answer["outputs"]["default"]["uri"] == \
        "azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.real-1"
    assert answer["properties"]["_azureml.ClusterName"] == "gpu-cluster" and answer["description"] is None

    again = dtrain("submit", "out.yml", "--name", "real-1", env=env, cwd=project)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "real-1" and "already exists with this spec" in again.stderr
    assert len(job_puts(emu, "real-1")) == 1

    (project / "changed.yml").write_text((project / "out.yml").read_text().replace("python train.py",
                                                                                   "python train2.py"))
    changed = dtrain("submit", "changed.yml", "--name", "real-1", env=env, cwd=project)
    assert changed.returncode == 2, changed.stderr
    assert "different spec (differs in command)" in changed.stderr
    for change in (["--set", "outputs.ckpt.mode=rw_mount"], ["--set", "resources.instance_count=1"]):
        r = dtrain("submit", "out.yml", "--name", "real-1", *change, env=env, cwd=project)
        assert r.returncode == 2, (change, r.stderr)
    assert len(job_puts(emu, "real-1")) == 1


# --- exit codes ------------------------------------------------------------------------------------

SCRIPTS = {
    "ok": (["Queued", "Running", "Running", "Completed"], 0),
    "failed": (["Queued", "Running", "Running", "Failed"], 1),
    "canceled": (["Queued", "Running", "Canceled"], 3),
    "notresponding": (["Queued", "Running", "NotResponding"], 5),
    "paused": (["Queued", "Paused"], 5),
    "timeout": (["Queued", "Running", "Running", "Running", "Canceled"], 4),
}


def test_submit_wait_exit_codes_and_every_line_once(emu, project):
    env = emu_env(emu, project)
    (project / "bad.py").write_text("")
    for name, (script, _) in SCRIPTS.items():
        error = {"code": "UserError", "message": "CUDA out of memory on rank 1"} if name == "failed" else None
        emu.script_job_statuses(script, 0.4, job=name, error=error)

    def run(name):
        extra = ["--set", "limits.timeout=1"] if name == "timeout" else []
        return name, dtrain("submit", "job.yml", "--name", name, "--wait", *extra, env=env, cwd=project, timeout=150)

    # the failing job's rank 1 prints a traceback before the end
    def traceback_writer():
        # bounded: if the job never arrives (a refused PUT), the pool below must still be able to exit
        deadline = time.monotonic() + 150   # five SDK processes at once: a minute and more under load
        # as soon as the job exists: its Running window is 0.8 s, which a starved thread on a loaded
        # machine could miss (seen once); the log is read from its start whenever it is appended
        while "failed" not in emu.jobs:
            if time.monotonic() > deadline:
                raise AssertionError("job 'failed' never reached the emulator")
            time.sleep(0.05)
        emu.append_log("failed", "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                                 "RuntimeError: CUDA out of memory\n", rank=1)

    with ThreadPoolExecutor(len(SCRIPTS) + 1) as pool:
        tb = pool.submit(traceback_writer)
        results = dict(pool.map(run, SCRIPTS))
        tb.result(timeout=30)
    for name, (_, code) in SCRIPTS.items():
        assert results[name].returncode == code, (name, results[name].stderr)
        assert len(job_puts(emu, name)) == 1
    assert emu.violations == []
    # every rank's lines, each exactly once and in order, the final ones included
    for name in ("ok", "failed"):
        assert printed_lines(results[name].stdout) == expected_lines(emu, name), name
    assert "finished" in expected_lines(emu, "ok")[3][-1]
    failed = results["failed"].stderr
    assert "CUDA out of memory on rank 1" in failed and "RuntimeError: CUDA out of memory" in failed
    assert "(timed out: limits.timeout)" in results["timeout"].stderr


@pytest.mark.timeout(240)  # several dtrain processes through the emulator
def test_status_list_logs_cancel_and_wait(emu, project):
    env = emu_env(emu, project)
    emu.script_job_statuses(["Queued", "Running", "Completed"], 0.3, job="done")
    emu.script_job_statuses(["Queued", "Running"], 0.3, job="long")
    assert dtrain("submit", "job.yml", "--name", "done", env=env, cwd=project).returncode == 0
    assert dtrain("submit", "job.yml", "--name", "long", "--set", "tags.kind=long", env=env,
                  cwd=project).returncode == 0
    time.sleep(1.0)

    calls = {"status": ("status", "done", "-o", "json"), "list": ("list", "--tag", "kind=long", "-o", "json"),
             "exp": ("list", "--experiment", "emulator-tests", "-o", "json"), "logs": ("logs", "done"),
             "rank": ("logs", "done", "--rank", "2"), "norank": ("logs", "done", "--rank", "9"),
             "nope": ("status", "nope")}
    with ThreadPoolExecutor(len(calls)) as pool:
        res = dict(zip(calls, pool.map(lambda a: dtrain(*a, env=env, cwd=project), calls.values())))

    st = res["status"]
    assert st.returncode == 0, st.stderr
    info = json.loads(st.stdout)
    assert info["backend"] == "azureml" and info["status"] == "Completed"
    assert (info["nodes"], info["processes_per_node"], info["experiment_name"]) == (2, 2, "emulator-tests")
    assert info["url"].startswith(emu.url + "/studio/runs/done") and info["ended"]

    assert res["list"].returncode == 0, res["list"].stderr
    assert [i["name"] for i in json.loads(res["list"].stdout)] == ["long"]
    # one call; the REST spec's `tag` is a key ("Jobs returned will have this tag key"), values filtered here
    lists = [q for q in emu.requests_to(r"/jobs$", "GET") if q.query.get("tag") == "kind"]
    assert len(lists) == 1 and not any("=" in q.query.get("tag", "") for q in emu.requests_to(r"/jobs$", "GET"))
    assert sorted(i["name"] for i in json.loads(res["exp"].stdout)) == ["done", "long"]

    logs = res["logs"]
    assert logs.returncode == 0, logs.stderr
    assert printed_lines(logs.stdout) == expected_lines(emu, "done")
    assert "n1/r3 | " in logs.stdout
    assert set(printed_lines(res["rank"].stdout)) == {2}
    assert res["norank"].returncode == 2 and res["nope"].returncode == 2

    c = dtrain("cancel", "long", env=env, cwd=project)
    assert c.returncode == 0, c.stderr
    assert c.stdout.split() == ["long", "Canceled"]
    assert len(emu.requests_to(r"/jobs/long/cancel$", "POST")) == 1
    w = dtrain("wait", "long", "done", env=env, cwd=project)
    assert w.returncode == 3, w.stderr                      # worst of Completed and Canceled


def test_one_shape_rule_for_status_list_watch_and_ranks_for_logs(emu, project):
    """A TensorFlow job with parameter servers reports one shape everywhere (status counted it, list and
    watch said 1 process per node), and a 3-node job without a distribution has one rank per node."""
    env = emu_env(emu, project)
    for job in ("tf", "plain"):
        emu.script_job_statuses(["Queued", "Running", "Completed"], 0.2, job=job)
    head = JOB_YML.split("distribution:")[0]
    (project / "tf.yml").write_text(head + "distribution:\n  type: tensorflow\n  worker_count: 4\n"
                                    "  parameter_server_count: 2\n")
    (project / "plain.yml").write_text(head.replace("  instance_count: 2", "  instance_count: 3"))
    assert dtrain("submit", "tf.yml", "--name", "tf", env=env, cwd=project).returncode == 0
    assert dtrain("submit", "plain.yml", "--name", "plain", env=env, cwd=project).returncode == 0
    assert dtrain("wait", "tf", "plain", env=env, cwd=project).returncode == 0

    st = json.loads(dtrain("status", "tf", "-o", "json", env=env, cwd=project).stdout)
    listed = {i["name"]: i for i in json.loads(dtrain("list", "-o", "json", env=env, cwd=project).stdout)}
    watched = dtrain("watch", "--once", "tf", env=env, cwd=project)
    assert (st["nodes"], st["processes_per_node"]) == (2, 3)
    assert (listed["tf"]["nodes"], listed["tf"]["processes_per_node"]) == (2, 3)
    assert "2 x 3" in watched.stdout + watched.stderr
    assert (listed["plain"]["nodes"], listed["plain"]["processes_per_node"]) == (3, 1)

    one = dtrain("logs", "plain", "--rank", "1", env=env, cwd=project)
    assert one.returncode == 0, one.stderr
    assert set(printed_lines(one.stdout)) == {1} and "n1/r1 | " in one.stdout
    assert dtrain("logs", "plain", "--rank", "3", env=env, cwd=project).returncode == 2
    assert dtrain("logs", "tf", "--rank", "5", env=env, cwd=project).returncode == 0


# --- faults ------------------------------------------------------------------------------------------

def test_submit_survives_throttling_errors_resets_and_slow_answers(emu, project):
    env = emu_env(emu, project)
    emu.script_job_statuses(["Queued"] + ["Running"] * 8 + ["Completed"], 0.4)
    emu.throttle(r"/jobs/[^/]+$", retry_after=1, method="PUT")
    emu.fail(r"/jobs/[^/]+$", 500, method="PUT")
    emu.fail(r"/jobs/[^/]+$", 503, method="GET")                        # the existence check
    emu.reset_connection(r"/jobs/[^/]+$", method="PUT", after_processing=True)   # processed, answer lost
    emu.slow(r"/runs/[^/]+/details$", 1.0)
    emu.fail(r"/runs/[^/]+/details$", 503, count=2, skip=2)
    emu.reset_connection(r"std_log_process_1\.txt$", count=3, skip=2)   # log reads drop mid-stream
    emu.fail(r"std_log_process_2\.txt$", 500, count=2, skip=3)
    r = dtrain("submit", "job.yml", "--name", "faulty", "--wait", env=env, cwd=project, timeout=120)
    assert r.returncode == 0, r.stderr
    puts = job_puts(emu, "faulty")
    assert [p.status for p in puts][:2] == [429, 500]
    assert puts[1].time - puts[0].time >= 0.9                         # Retry-After honoured
    assert list(emu.jobs) == ["faulty"] and len({n for n, _ in emu.job_puts}) == 1
    assert printed_lines(r.stdout) == expected_lines(emu, "faulty")   # nothing lost or repeated
    faults = {q.fault for q in emu.requests if q.fault}
    assert {"status 429", "status 500", "status 503", "reset after processing", "reset", "slow 1.0s"} <= faults
    # each log read asked only for the bytes after the previous one
    for rank in range(4):
        reads = [q for q in emu.requests_to(rf"std_log_process_{rank}\.txt$", "GET") if q.status in (200, 206)]
        assert all(q.headers.get("range", "").startswith("bytes=") for q in reads)


def test_existence_check_failing_says_nothing_was_submitted(emu, project):
    """Before anything is sent, an unreadable name lookup is not a lost job: exit 5, no PUT."""
    env = emu_env(emu, project, DTRAIN_AZURE_RETRIES=1, DTRAIN_AZURE_STATUS_ATTEMPTS=2)
    emu.fail(r"/jobs/[^/]+$", 503, count=None, method="GET")
    r = dtrain("submit", "job.yml", "--name", "unchecked", env=env, cwd=project)
    assert r.returncode == 5, r.stderr
    assert "nothing was submitted" in r.stderr and "keeps running" not in r.stderr and "lost track" not in r.stderr
    assert job_puts(emu) == [] and emu.jobs == {}


def test_refused_retry_of_a_processed_put_follows_the_job(emu, project):
    """The first PUT is processed and its answer lost; azure-core's retry of it is refused (409). The
    job exists, so dtrain does not say "nothing was submitted": it follows the job it created."""
    env = emu_env(emu, project)
    emu.reset_connection(r"/jobs/[^/]+$", method="PUT", after_processing=True)
    emu.add_fault(r"/jobs/[^/]+$", method="PUT", status=409, code="UserError",
                  message="A job with this name already exists.")
    r = dtrain("submit", "job.yml", "--name", "twice", env=env, cwd=project)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "twice"
    assert "nothing was submitted" not in r.stderr and "first request was processed" in r.stderr
    assert [p.status for p in job_puts(emu, "twice")] == [201, 409] and list(emu.jobs) == ["twice"]


def test_refused_put_and_unreadable_job_says_it_may_exist(emu, project):
    """The same, but the job cannot be read afterwards: exit 7, and the message says the job may exist."""
    env = emu_env(emu, project, DTRAIN_AZURE_RETRIES=1, DTRAIN_AZURE_STATUS_ATTEMPTS=2)
    emu.reset_connection(r"/jobs/[^/]+$", method="PUT", after_processing=True)
    emu.add_fault(r"/jobs/[^/]+$", method="PUT", status=409, code="UserError",
                  message="A job with this name already exists.")
    emu.fail(r"/jobs/[^/]+$", 503, count=None, method="GET", skip=1)   # the lookup before the PUT passes
    r = dtrain("submit", "job.yml", "--name", "unsure", env=env, cwd=project)
    assert r.returncode == 7, r.stderr
    assert "may have been submitted" in r.stderr and "nothing was submitted" not in r.stderr
    assert "dtrain status unsure" in r.stderr and list(emu.jobs) == ["unsure"]


def test_code_upload_refused_by_storage_ends_with_what_to_check(emu, project):
    """A blob PUT answered 403 (firewall, missing role) used to hang submit forever: now it ends, exit 6,
    naming the account and what to check, and no job is PUT. The subprocess timeout is the bound."""
    env = emu_env(emu, project)
    emu.refuse_uploads(403, "AuthorizationPermissionMismatch")
    r = dtrain("submit", "job.yml", "--name", "no-upload", env=env, cwd=project, timeout=120)
    assert r.returncode == 6, r.stderr
    assert "storage account 'dtrainemustorage' refused the code upload" in r.stderr
    assert "AuthorizationPermissionMismatch" in r.stderr and "Storage Blob Data Contributor" in r.stderr
    assert "Networking" in r.stderr and "nothing was submitted" in r.stderr
    assert "sig=" not in r.stderr and "Traceback" not in r.stderr
    assert job_puts(emu) == [] and emu.uploaded_files() == {}


def test_an_input_upload_to_a_storage_host_that_does_not_resolve_fails_at_once(project, monkeypatch):
    """A local uri_folder input goes to the datastore's account (https://ACCOUNT.blob.SUFFIX): a name that
    does not resolve used to be retried by azure-storage for a minute and a half, then end as
    `MlException: <colour code>`, exit 5. Now: not retried, exit 6, the input and the account named, no
    escape code. (PYTHONPATH passes through base_env, so the subprocess runs this checkout.)"""
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    (project / "data").mkdir()
    (project / "data" / "part-0.csv").write_text("x\n1\n")
    spec = JOB_YML.replace("inputs:\n", "inputs:\n  training_data:\n    type: uri_folder\n    path: ./data\n")
    (project / "job.yml").write_text(spec)
    with AzureMLEmulator(storage_account="dtrainmissingacct", storage_suffix=UNRESOLVABLE_SUFFIX) as emu:
        env = emu_env(emu, project, DTRAIN_STORAGE_SUFFIX=emu.storage_suffix)
        r = dtrain("submit", "job.yml", "--name", "az1", env=env, cwd=project, timeout=120)
    assert r.returncode == 6, r.stderr
    assert "\x1b[" not in r.stderr and "MlException" not in r.stderr and "Traceback" not in r.stderr
    assert "input 'training_data' (./data)" in r.stderr
    assert "storage account 'dtrainmissingacct'" in r.stderr and f"'{emu.datastore_host}' does not resolve" in r.stderr
    assert "nothing was submitted" in r.stderr and "hint:" in r.stderr
    assert job_puts(emu) == []


def test_code_upload_survives_one_dropped_connection(emu, project):
    env = emu_env(emu, project)
    drop = emu.reset_uploads(count=1)
    r = dtrain("submit", "job.yml", "--name", "one-reset", env=env, cwd=project, timeout=120)
    assert r.returncode == 0, r.stderr
    assert drop.hits == 1 and [Path(n).name for n in emu.uploaded_files()] == ["train.py"]
    assert [p.status for p in job_puts(emu, "one-reset")] == [201]


def test_the_upload_guard_ends_the_sdks_endless_wait(emu, project, monkeypatch):
    """The safety net on its own: with show_progress=False the SDK itself never returns from a refused
    upload; guarded() raises the upload's failure once the grace period after it has passed."""
    from azure.ai.ml import load_job
    from azure_emulator import make_ml_client

    from dtrain.backends.azure.upload_guard import guarded, is_storage_failure, upload_error
    from dtrain.errors import ConfigError

    emu.refuse_uploads(403, "AuthorizationFailure", "This request is not authorized to perform this operation.")
    ml = make_ml_client(emu, show_progress=False)
    job = load_job(str(project / "job.yml"))
    with pytest.raises(Exception) as err:
        guarded(lambda: ml.jobs.create_or_update(job), grace_s=1.0)
    assert is_storage_failure(err.value)
    mapped = upload_error(err.value, "j")
    assert isinstance(mapped, ConfigError) and "'dtrainemustorage'" in mapped.message
    assert "AuthorizationFailure" in mapped.message and "sig=" not in mapped.message
    assert job_puts(emu) == []


def test_expired_token_is_refreshed_from_the_token_file(emu, project, tmp_path):
    old, new = fake_jwt(audience=emu.url + "/", jti="old"), fake_jwt(audience=emu.url + "/", jti="new")
    token_file = tmp_path / "token"
    token_file.write_text(old)
    env = emu_env(emu, project, DTRAIN_ARM_TOKEN_FILE=token_file)
    env.pop("DTRAIN_ARM_TOKEN")
    # one step per status read, not per half second: under load the job must not end before the token does
    emu.script_job_statuses(["Queued"] + ["Running"] * 8 + ["Completed"], None)
    proc = subprocess.Popen([sys.executable, "-m", "dtrain", "submit", "job.yml", "--name", "tok", "--wait"],
                            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 150     # the process must hold the old token before it is revoked, however slow
    while not emu.requests_to(r"/runs/tok/details$", "GET") and time.time() < deadline:
        time.sleep(0.01)
    assert emu.requests_to(r"/runs/tok/details$", "GET"), "dtrain never read the run's details"
    # mid-job: the runner refreshes the token file, then the old token is revoked; the clients holding
    # it get a 401 claims challenge and the credential reads the file again
    token_file.write_text(new)
    emu.expire_token(old, after_requests=0)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert any(q.status == 401 for q in emu.requests)
    assert old in emu.tokens_seen and new in emu.tokens_seen
    assert old not in out + err and new not in out + err             # never printed
    assert list(emu.jobs) == ["tok"] and printed_lines(out) == expected_lines(emu, "tok")


def test_lost_track_after_repeated_failures_exits_7(emu, project):
    env = emu_env(emu, project, DTRAIN_AZURE_RETRIES=1, DTRAIN_AZURE_STATUS_ATTEMPTS=2)
    emu.script_job_statuses(["Queued", "Running"], 0.3)
    assert dtrain("submit", "job.yml", "--name", "gone", env=env, cwd=project).returncode == 0
    emu.fail(r"/jobs/gone$", 503, count=None, method="GET")
    r = dtrain("wait", "gone", env=env, cwd=project, timeout=60)
    assert r.returncode == 7, r.stderr
    assert "lost track" in r.stderr


# --- configuration ---------------------------------------------------------------------------------

def test_configuration_errors_exit_6(emu, project):
    env = base_env(project)
    r = dtrain("submit", "job.yml", env=env, cwd=project)
    assert r.returncode == 6
    assert "DTRAIN_SUBSCRIPTION_ID" in r.stderr and "--local" in r.stderr and "config.json" in r.stderr

    ws = dict(env, DTRAIN_SUBSCRIPTION_ID="s", DTRAIN_RESOURCE_GROUP="g", DTRAIN_WORKSPACE="w")
    r = dtrain("submit", "job.yml", env=dict(ws, DTRAIN_ARM_ENDPOINT="https://arm.example.com",
                                             DTRAIN_ARM_TOKEN="secret-token"), cwd=project)
    assert r.returncode == 6 and "DTRAIN_ARM_TOKEN" in r.stderr and "loopback" in r.stderr
    assert "secret-token" not in r.stderr
    r = dtrain("submit", "job.yml", env=dict(ws, DTRAIN_ARM_ENDPOINT="http://arm.example.com"), cwd=project)
    assert r.returncode == 6 and "plain http" in r.stderr
    r = dtrain("submit", "job.yml", env=dict(ws, DTRAIN_ARM_TOKEN="x"), cwd=project)
    assert r.returncode == 6

    # config.json found upward; a workspace the service does not know: 6, nothing sent
    (project / "config.json").write_text(json.dumps({"subscription_id": emu.subscription_id,
                                                     "resource_group": emu.resource_group,
                                                     "workspace_name": "no-such-ws"}))
    e = emu_env(emu, project)
    for k in ("DTRAIN_SUBSCRIPTION_ID", "DTRAIN_RESOURCE_GROUP", "DTRAIN_WORKSPACE"):
        e.pop(k)
    r = dtrain("submit", "../job.yml", env=e, cwd=project / "src")
    assert r.returncode == 6, r.stderr
    assert "no-such-ws" in r.stderr and emu.job_puts == []


def test_authentication_failure_exits_6_with_a_hint(emu, project):
    token = fake_jwt(audience=emu.url + "/", jti="revoked")
    emu.expire_token(token, challenge="invalid_token")
    r = dtrain("status", "whatever", env=emu_env(emu, project, DTRAIN_ARM_TOKEN=token, DTRAIN_AZURE_RETRIES=0),
               cwd=project)
    assert r.returncode == 6, r.stderr
    assert "az login" in r.stderr and "AZURE_FEDERATED_TOKEN_FILE" in r.stderr
    assert token not in r.stderr


# --- watch -------------------------------------------------------------------------------------------

def test_watch_50_jobs_costs_the_same_list_requests_every_poll(emu, project):
    env = emu_env(emu, project)
    assert dtrain("submit", "job.yml", "--name", "template", env=env, cwd=project).returncode == 0
    body = emu.jobs["template"]
    body["properties"]["tags"] = {"batch": "w"}
    emu.script_job_statuses(["Queued", "Running"], 0.5)     # running until two polls have seen them (below)
    for i in range(50):                      # the resolved body PUT under 50 names, straight to the REST API
        req = urllib.request.Request(f"{emu.url}{emu.workspace_arm_id}/jobs/w{i}?api-version=2024-04-01",
                                     data=json.dumps(body).encode(), method="PUT",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + fake_jwt()})
        urllib.request.urlopen(req).read()
    before = len(emu.requests)
    emu.end_after_list_polls([f"w{i}" for i in range(50)], polls=2)
    r = dtrain("watch", "--tag", "batch=w", "--interval", "0.3", "-o", "jsonl", env=env, cwd=project, timeout=60)
    assert r.returncode == 0, r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines()]
    assert {e["job"] for e in events if e["status"] == "Completed"} == {f"w{i}" for i in range(50)}
    during = [q for q in emu.requests[before:] if q.path.startswith("/subscriptions/")]
    per_job = [q for q in during if "/jobs/" in q.path or "/runs/" in q.path]
    assert per_job == []                                              # nothing per job
    lists = [q for q in during if q.path.endswith("/jobs") and q.method == "GET"]
    pages = [q.query.get("$skipToken") for q in lists]
    polls = pages.count(None)
    assert polls >= 2 and pages == [None, "20", "40"] * polls          # 3 pages of 20 on every poll


def test_wait_for_many_jobs_lists_once_per_poll(emu, project):
    """`dtrain wait A B ...` polls with one (paged) list call, not one GET per job; each job is read
    once more only when it ends (for its failure details), and the exit is the worst outcome."""
    env = emu_env(emu, project)
    assert dtrain("submit", "job.yml", "--name", "base", env=env, cwd=project).returncode == 0
    body = emu.jobs["base"]
    names = [f"m{i}" for i in range(12)]
    # long enough that `dtrain wait` (several seconds to start on a loaded machine) polls more than once
    emu.script_job_statuses(["Queued"] + ["Running"] * 8 + ["Completed"], 1.2)
    for n in names:
        req = urllib.request.Request(f"{emu.url}{emu.workspace_arm_id}/jobs/{n}?api-version=2024-04-01",
                                     data=json.dumps(body).encode(), method="PUT",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + fake_jwt()})
        urllib.request.urlopen(req).read()
    before = len(emu.requests)
    r = dtrain("wait", *names, env=env, cwd=project, timeout=120)
    assert r.returncode == 0, r.stderr
    during = [q for q in emu.requests[before:] if q.path.startswith("/subscriptions/")]
    gets = [q for q in during if q.method == "GET" and any(q.path.endswith(f"/jobs/{n}") for n in names)]
    lists = [q for q in during if q.method == "GET" and q.path.endswith("/jobs") and not q.query.get("$skipToken")]
    assert len(lists) >= 2
    assert len(gets) <= len(names)   # at most one read per job, when it ends, however many polls


# --- secrets the service echoes ------------------------------------------------------------------

ECHOED_SAS = "https://acct.blob.core.windows.net/azureml/logs/std.txt?sv=2021-08-06&sr=b&sig=EchoedSasSig%2Bx%3D"
ECHOED_KEY = "AccountKey=RWNob2VkQWNjb3VudEtleQ=="


@pytest.mark.parametrize("status", [400, 403, 500])
def test_service_errors_echoing_the_token_a_sas_and_a_key_are_redacted(emu, project, monkeypatch, status):
    from azure_emulator import StaticTokenCredential

    from dtrain import untrusted
    from dtrain.backends.azure import AzureBackend
    from dtrain.errors import DtrainError

    # an opaque token that no pattern knows, handed out by the credential: only the registry can mask it
    token = "opaque-emulator-token-7f3a9c"
    for k, v in dict(DTRAIN_ARM_ENDPOINT=emu.url, DTRAIN_SUBSCRIPTION_ID=emu.subscription_id,
                     DTRAIN_RESOURCE_GROUP=emu.resource_group, DTRAIN_WORKSPACE=emu.workspace,
                     DTRAIN_AZURE_RETRIES="0", DTRAIN_AZURE_STATUS_ATTEMPTS="1").items():
        monkeypatch.setenv(k, v)
    untrusted.forget_secrets()
    emu.fail(r"/jobs/echo$", status, count=None, method="GET", code="BadRequest",
             message=f"denied for {{authorization}} (token {{token}}) reading {ECHOED_SAS} with {ECHOED_KEY}")
    backend = AzureBackend(credential=StaticTokenCredential(token))
    with pytest.raises(DtrainError) as info:
        backend.status("echo")
    text = f"{info.value} {getattr(info.value, 'hint', '')}"
    assert emu.requests_to(r"/jobs/echo$", "GET"), "the request reached the emulator"
    assert "Bearer ***" in text and "(token ***)" in text and "sig=***" in text and "AccountKey=***" in text, text
    for secret in (token, "EchoedSasSig", "RWNob2VkQWNjb3VudEtleQ"):
        assert secret not in text
    untrusted.forget_secrets()


def test_cli_status_does_not_print_an_echoed_token(emu, project):
    token = "opaque-cli-token-2b8e4d1c"
    emu.fail(r"/jobs/echo$", 400, count=None, method="GET", message=f"bad token {{authorization}} {ECHOED_KEY}")
    r = dtrain("status", "echo", env=emu_env(emu, project, DTRAIN_ARM_TOKEN=token, DTRAIN_AZURE_RETRIES=0),
               cwd=project)
    assert r.returncode == 2, r.stderr
    assert "Bearer ***" in r.stderr and token not in r.stderr and "RWNob2VkQWNjb3VudEtleQ" not in r.stderr
