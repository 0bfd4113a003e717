"""`status` shows a job's interactive services with their endpoints once the service reports them, and
`--web` opens the job's Studio page where a browser can be opened, else prints it (issue 24)."""
from __future__ import annotations

import json
import webbrowser

import pytest

from azure_emulator import AzureMLEmulator
from dtrain.browser import has_display
from fakes import run_main
from test_azure_backend import JOB_YML, project  # noqa: F401
from test_azure_storage_logs import _in_process

SERVICES = """services:
  my_tb:
    type: tensor_board
    log_dir: outputs/tblogs
  my_ssh:
    type: ssh
    ssh_public_keys: ssh-rsa AAAAB3NzaC1yc2E dtrain@test
"""


def test_a_browser_is_tried_only_where_a_display_exists():
    assert not has_display({}, "linux") and has_display({"DISPLAY": ":0"}, "linux")
    assert has_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux") and has_display({}, "darwin")


@pytest.mark.slow
@pytest.mark.sdk
def test_status_shows_services_and_web_opens_or_prints_the_studio_url(monkeypatch, project, capsys):  # noqa: F811
    opened = []
    monkeypatch.setattr(webbrowser, "open", lambda url, new=0: opened.append(url) or True)
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2) as emu:
        emu.script_job_statuses(["Queued", "Running"], None, job="svc")
        (project / "job.yml").write_text(JOB_YML + SERVICES)
        _in_process(monkeypatch, emu, project)
        code, out, err = run_main(capsys, "submit", "job.yml", "--name", "svc", "--web")
        assert code == 0, err
        studio = emu.job_resource("svc")["properties"]["services"]["Studio"]["endpoint"]
        assert f"svc: open {studio}" in err and "in a browser (none can be opened here)" in err
        assert opened == []                                                 # no display: printed only
        code, out, err = run_main(capsys, "status", "svc")                  # Queued -> Running
        code, out, err = run_main(capsys, "status", "svc")
        assert code == 0, err
        assert "my_tb (TensorBoard): https://svc-my_tb.eastus.nodes.azureml.ms/ [Running]" in err
        assert "my_ssh (SSH): ssh://root@svc-my_ssh.eastus.nodes.azureml.ms:50000 [Running]" in err
        assert "Tracking" not in err and "Studio" not in err
        info = json.loads(run_main(capsys, "status", "svc", "-o", "json")[1])
        assert info["services"]["my_ssh"] == {"type": "SSH", "endpoint": "ssh://root@svc-my_ssh.eastus.nodes"
                                              ".azureml.ms:50000", "status": "Running"}
        monkeypatch.setenv("DISPLAY", ":0")
        code, out, err = run_main(capsys, "status", "svc", "--web")
        assert code == 0 and opened == [info["url"]] and f"opened {info['url']}" in err
        assert info["url"].startswith(studio)
