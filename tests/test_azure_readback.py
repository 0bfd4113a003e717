"""Reading Azure jobs back as the service answers (issue 24): log names of every rank, failure text,
list by tag and by creation time, cancel that takes time. Unit tests of the backend's functions."""
from __future__ import annotations

from dtrain.backends.azure.logs import parse_log_name, rank_of, role_of, user_logs


def _files(*names: str) -> dict:
    return {n: f"https://acct.blob/{n}?sig" for n in names}


def test_every_rank_file_maps_to_its_rank_and_role_including_padded_and_ps():
    # a TensorFlow job of 2 workers and 2 parameter servers: workers are ranks 0-1, servers 2-3
    files = _files("user_logs/std_log_process_00.txt", "user_logs/std_log_process_01.txt",
                   "user_logs/std_log_process_00_ps.txt", "user_logs/std_log_process_01_ps.txt",
                   "azureml-logs/70_driver_log.txt", "user_logs/std_log_process_0_lifecycler.txt")
    got = user_logs(files, workers=2)
    assert {r: name for r, (name, _) in got.items()} == {
        0: "user_logs/std_log_process_00.txt", 1: "user_logs/std_log_process_01.txt",
        2: "user_logs/std_log_process_00_ps.txt", 3: "user_logs/std_log_process_01_ps.txt"}
    assert [role_of(got[r][0]) for r in range(4)] == ["worker", "worker", "ps", "ps"]
    assert got[2][1] == files["user_logs/std_log_process_00_ps.txt"]


def test_log_names_the_sdks_rank0_pattern_accepts():
    assert parse_log_name("user_logs/std_log.txt") == (0, "worker")
    assert parse_log_name("user_logs/std_log_process_0.txt") == (0, "worker")
    assert parse_log_name("user_logs/std_log_process_007.txt") == (7, "worker")
    assert parse_log_name("user_logs/std_log_process_00_ps.txt") == (0, "ps")
    assert parse_log_name("user_logs/std_log_process_0.txt.bak") is None
    assert rank_of("user_logs/std_log_process_03.txt") == 3
    assert rank_of("user_logs/std_log_process_01_ps.txt", workers=4) == 5
    assert rank_of("user_logs/std_log_process_01_ps.txt") is None      # no layout to place it in


def test_without_a_worker_count_servers_come_after_the_worker_files_and_numbered_beats_single():
    files = _files("user_logs/std_log.txt", "user_logs/std_log_process_0.txt", "user_logs/std_log_process_1.txt",
                   "user_logs/std_log_process_0_ps.txt")
    got = user_logs(files)
    assert {r: name for r, (name, _) in got.items()} == {
        0: "user_logs/std_log_process_0.txt", 1: "user_logs/std_log_process_1.txt",
        2: "user_logs/std_log_process_0_ps.txt"}
    assert {r: n for r, (n, _) in user_logs(_files("user_logs/std_log.txt")).items()} == {0: "user_logs/std_log.txt"}


# --- through the CLI against the emulator -----------------------------------------------------------

import json  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402

import pytest  # noqa: E402

from azure_emulator import AzureMLEmulator, fake_jwt  # noqa: E402
from test_azure_backend import JOB_YML, dtrain, emu_env, expected_lines, printed_lines, project  # noqa: E402,F401
from test_metrics_azure import BODY  # noqa: E402


def _emulator(monkeypatch, **kw):
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    e = AzureMLEmulator(**{"lro_retry_after": 0.2, "cancel_seconds": 0.2, **kw})
    e.add_environment("AzureML-sklearn-1.0-ubuntu20.04-py38-cpu", "1")
    return e


def _put(emu, name: str, tags: dict) -> urllib.request.addinfourl:
    body = json.loads(json.dumps(BODY))
    body["properties"]["tags"] = tags
    req = urllib.request.Request(f"{emu.url}{emu.workspace_arm_id}/jobs/{name}?api-version=2024-04-01",
                                 data=json.dumps(body).encode(), method="PUT",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + fake_jwt()})
    return urllib.request.urlopen(req)


@pytest.mark.slow
@pytest.mark.sdk
def test_list_sends_the_tag_key_filters_values_here_and_limit_is_newest_first(monkeypatch, tmp_path):
    with _emulator(monkeypatch, validate_jobs=False, check_references=False, list_order="oldest") as emu:
        for i, team in enumerate(["vision", "speech", "vision", "vision", "nlp", "vision"]):
            _put(emu, f"job{i}", {"team": team})
            time.sleep(0.01)                  # distinct creation times (milliseconds in systemData)
        env = emu_env(emu, tmp_path)
        tagged = dtrain("list", "--tag", "team=vision", "-o", "json", env=env, cwd=tmp_path)
        assert tagged.returncode == 0, tagged.stderr
        assert sorted(i["name"] for i in json.loads(tagged.stdout)) == ["job0", "job2", "job3", "job5"]
        assert [q.query.get("tag") for q in emu.requests_to(r"/jobs$", "GET")] == ["team"]
        newest = dtrain("list", "--limit", "3", "-o", "json", env=env, cwd=tmp_path)
        assert newest.returncode == 0, newest.stderr
        assert [i["name"] for i in json.loads(newest.stdout)] == ["job5", "job4", "job3"]


@pytest.mark.slow
@pytest.mark.sdk
def test_a_parameter_servers_padded_log_shows_as_its_rank(monkeypatch, project):  # noqa: F811
    with _emulator(monkeypatch, log_name_width=2) as emu:
        emu.script_job_statuses(["Queued", "Running", "Completed"], 0.2, job="tf")
        head = JOB_YML.split("distribution:")[0]
        (project / "tf.yml").write_text(head + "distribution:\n  type: tensorflow\n  worker_count: 4\n"
                                        "  parameter_server_count: 2\n")
        env = emu_env(emu, project)
        assert dtrain("submit", "tf.yml", "--name", "tf", "--wait", env=env, cwd=project).returncode == 0
        assert emu.log_file_names("tf")[4:] == ["user_logs/std_log_process_00_ps.txt",
                                                "user_logs/std_log_process_01_ps.txt"]
        logs = dtrain("logs", "tf", env=env, cwd=project)
        assert logs.returncode == 0, logs.stderr
        assert printed_lines(logs.stdout) == expected_lines(emu, "tf")            # every rank once, 4 and 5 too
        ps = dtrain("logs", "tf", "--rank", "5", env=env, cwd=project)
        assert set(printed_lines(ps.stdout)) == {5} and "[rank 5/6]" in ps.stdout


@pytest.mark.slow
@pytest.mark.sdk
def test_failure_message_loses_the_services_leading_newline(monkeypatch, project):  # noqa: F811
    with _emulator(monkeypatch) as emu:
        emu.script_job_statuses(["Queued", "Running", "Failed"], 0.2, job="bad", error={
            "code": "UserError", "message": "\nError Code: ScriptExecution.StreamDoesNotHaveData\n"
                                            "Native Error: error in stream\n\n"})
        env = emu_env(emu, project)
        assert dtrain("submit", "job.yml", "--name", "bad", "--wait", env=env, cwd=project).returncode == 1
        st = json.loads(dtrain("status", "bad", "-o", "json", env=env, cwd=project).stdout)
        assert st["failure"]["message"].startswith("Error Code: ScriptExecution.StreamDoesNotHaveData\n")
        assert "Native Error: error in stream (UserError)" in st["failure"]["message"]


@pytest.mark.slow
@pytest.mark.sdk
def test_cancel_that_takes_time_reads_cancel_requested_and_wait_ends_only_when_canceled(monkeypatch, project):  # noqa: F811
    with _emulator(monkeypatch, cancel_seconds=4) as emu:
        emu.script_job_statuses(["Queued", "Running"], 0.2, job="long")
        env = emu_env(emu, project, DTRAIN_AZURE_CANCEL_WAIT_S="0.3")
        assert dtrain("submit", "job.yml", "--name", "long", env=env, cwd=project).returncode == 0
        c = dtrain("cancel", "long", "-o", "json", env=env, cwd=project)
        assert c.returncode == 0, c.stderr
        assert json.loads(c.stdout)["status"] == "CancelRequested"      # requested, not done
        w = dtrain("wait", "long", env=env, cwd=project)
        assert w.returncode == 3, w.stderr
        assert emu.job_status("long") == "Canceled"


@pytest.mark.slow
@pytest.mark.sdk
def test_emulator_answers_in_the_recorded_shapes(monkeypatch, tmp_path):
    with _emulator(monkeypatch, validate_jobs=False, check_references=False) as emu:
        emu.script_job_statuses(["Starting", "Preparing", "Running"], None, job="rec")
        created = _put(emu, "rec", {})
        assert created.status == 201 and created.headers["Location"].endswith(
            f"{emu.workspace_arm_id}/jobs/rec?api-version=2025-01-01-preview")
        assert json.loads(created.read())["properties"]["status"] == "Starting"

        def details():
            req = urllib.request.Request(f"{emu.url}/history/v1.0{emu.workspace_arm_id}/runs/rec/details",
                                         headers={"Authorization": "Bearer " + fake_jwt()})
            return json.loads(urllib.request.urlopen(req).read())

        first = details()                                   # Starting -> Preparing: not started yet
        assert first["status"] == "Preparing" and first["startTimeUtc"] is None
        later = details()
        assert later["status"] == "Running" and later["startTimeUtc"] not in (None, later["createdTimeUtc"])

        req = urllib.request.Request(f"{emu.url}{emu.workspace_arm_id}/jobs/rec/cancel?api-version=2024-04-01",
                                     data=b"", method="POST", headers={"Authorization": "Bearer " + fake_jwt()})
        cancel = urllib.request.urlopen(req)
        assert cancel.status == 202 and "/mfeOperationResults/" in cancel.headers["Location"]
        assert "Azure-AsyncOperation" not in cancel.headers
