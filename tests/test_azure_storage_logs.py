"""Logs of Azure jobs from the second place azure-ai-ml reads them (issue 24): when the run details'
logFiles hold no user logs, the job's default output folder listed on its datastore's storage, path-style
under DTRAIN_STORAGE_ENDPOINT; a storage account that refuses key-based access ends `logs` with exit 2."""
from __future__ import annotations

import pytest

from dtrain.backends.azure.storage_endpoint import account_url, storage_endpoint_from_env
from dtrain.backends.azure.storage_logs import default_output_folder
from dtrain.errors import ConfigError


@pytest.mark.parametrize("url", ["http://10.0.0.1:10000", "https://evil.example.com", "http://127.1:10000",
                                 "http://evil.example.com\\@127.0.0.1:10000", "http://user@127.0.0.1:1"])
def test_a_storage_endpoint_that_is_not_loopback_is_refused(url):
    with pytest.raises(ConfigError) as err:
        storage_endpoint_from_env({"DTRAIN_STORAGE_ENDPOINT": url})
    assert "DTRAIN_STORAGE_ENDPOINT" in str(err.value)


def test_storage_accounts_path_style_under_a_loopback_endpoint_else_azures_host():
    endpoint = storage_endpoint_from_env({"DTRAIN_STORAGE_ENDPOINT": "http://127.0.0.1:10000/"})
    assert endpoint == "http://127.0.0.1:10000" and storage_endpoint_from_env({}) is None
    assert account_url("acct", "core.windows.net", endpoint) == "http://127.0.0.1:10000/acct"
    assert account_url("acct", "core.chinacloudapi.cn", None) == "https://acct.blob.core.chinacloudapi.cn"


def test_the_default_output_folder_is_parsed_as_the_sdk_parses_it():
    uri = "azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.job1"
    assert default_output_folder({"outputs": {"default": {"uri": uri, "jobOutputType": "uri_folder"}}}) == (
        "workspaceartifactstore", "ExperimentRun/dcid.job1")
    assert default_output_folder({"outputs": {"default": {"uri": uri, "jobOutputType": "uri_file"}}}) is None
    assert default_output_folder({"outputs": {}}) is None


# --- through azure-ai-ml and the CLI, in process, against the emulator ---------------------------------

from azure_emulator import AzureMLEmulator  # noqa: E402
from fakes import run_main  # noqa: E402
from test_azure_backend import JOB_YML, emu_env, expected_lines, printed_lines, project  # noqa: E402,F401

TF_JOB = JOB_YML.split("distribution:")[0] + ("distribution:\n  type: tensorflow\n  worker_count: 4\n"
                                              "  parameter_server_count: 2\n")


def _in_process(monkeypatch, emu, where, **extra):
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    monkeypatch.chdir(where)
    for k, v in emu_env(emu, where, DTRAIN_STORAGE_ENDPOINT=emu.url, **extra).items():
        if k.startswith(("DTRAIN_", "AZURE")):
            monkeypatch.setenv(k, v)


def _storage_lists(emu):
    return [r for r in emu.requests_to(r"^/[^/]+/azureml$", "GET") if r.query.get("comp") == "list"]


@pytest.mark.slow
@pytest.mark.sdk
def test_logs_without_user_logs_in_logfiles_come_from_the_datastore(monkeypatch, project, capsys):  # noqa: F811
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2, log_name_width=2) as emu:
        emu.artifacts.mode = "datastore"
        emu.script_job_statuses(["Queued", "Running", "Running", "Completed"], 0.3, job="tf")
        (project / "tf.yml").write_text(TF_JOB)
        _in_process(monkeypatch, emu, project)
        code, out, err = run_main(capsys, "submit", "tf.yml", "--name", "tf", "--wait")
        assert code == 0, err
        want = expected_lines(emu, "tf")
        assert len(want) == 6 and all(want.values())
        assert printed_lines(out) == want                    # every rank once, the _ps files (4, 5) too
        code, out, err = run_main(capsys, "logs", "tf")
        assert code == 0, err
        assert printed_lines(out) == want
        lists = _storage_lists(emu)
        assert lists and {r.query["prefix"] for r in lists} == {"ExperimentRun/dcid.tf/user_logs/",
                                                                "ExperimentRun/dcid.tf/azureml-logs/"}
        assert all(r.query.get("sig") == "YWNjb3VudC1zYXM=" for r in lists)   # the SAS listSecrets answered
        assert emu.requests_to(r"/datastores/workspaceartifactstore/listSecrets$", "POST")


@pytest.mark.slow
@pytest.mark.sdk
def test_storage_refusing_key_access_is_a_clear_usage_error(monkeypatch, project, capsys):  # noqa: F811
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2) as emu:
        emu.artifacts.mode = "refused"
        emu.script_job_statuses(["Queued", "Running"], 0.2, job="locked")
        _in_process(monkeypatch, emu, project)
        assert run_main(capsys, "submit", "job.yml", "--name", "locked")[0] == 0
        code, out, err = run_main(capsys, "logs", "locked", "-f")
        assert code == 2, err
        assert "workspaceartifactstore" in err and "KeyBasedAuthenticationNotPermitted" in err
        assert "Storage Blob Data Reader" in err and out == ""
        assert [r.status for r in _storage_lists(emu)] == [403]


@pytest.mark.slow
@pytest.mark.sdk
def test_submit_wait_under_refused_storage_says_so_once_and_follows_the_status(monkeypatch, project, capsys):  # noqa: F811
    """The job was submitted: exit 2 ("nothing submitted") would be a lie. The reason is said once, as a
    warning, and the wait ends with the job's own outcome."""
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2) as emu:
        emu.artifacts.mode = "refused"
        emu.script_job_statuses(["Queued", "Running", "Running", "Completed"], None, job="locked")
        _in_process(monkeypatch, emu, project)
        code, out, err = run_main(capsys, "submit", "job.yml", "--name", "locked", "--wait")
        assert code == 0, err
        assert err.count("KeyBasedAuthenticationNotPermitted") == 1 and "following its status without logs" in err
        assert "Completed" in err and emu.job_status("locked") == "Completed"


@pytest.mark.slow
@pytest.mark.sdk
def test_the_failure_summary_reads_the_datastore_logs(monkeypatch, project, capsys):  # noqa: F811
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2) as emu:
        emu.artifacts.mode, emu.artifacts.key_secrets = "datastore", True     # signed here with the key
        emu.script_job_statuses(["Queued", "Running", "Failed"], None, job="bad",
                                error={"code": "UserError", "message": "rank 2 failed"})
        _in_process(monkeypatch, emu, project)
        assert run_main(capsys, "submit", "job.yml", "--name", "bad")[0] == 0
        emu.append_log("bad", "Traceback (most recent call last):\nValueError: bad batch on rank 2\n", rank=2)
        code, out, err = run_main(capsys, "wait", "bad")
        assert code == 1, err
        assert "ValueError: bad batch on rank 2" in err
        assert all(r.headers.get("authorization") for r in _storage_lists(emu))   # SharedKey: the account key
