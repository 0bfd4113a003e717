"""What `az ml job update/archive/restore` and `az ml job list`'s filters do, on dtrain: update (tags, display
name, description), archive/restore (list hides archived jobs unless --include-archived / --archived-only),
list --status and --all-results. Local jobs and Azure jobs (through azure-ai-ml against the emulator)."""
from __future__ import annotations

import json
import time

import pytest

from test_azure_backend import dtrain, emu, emu_env, project  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow

LOCAL_JOB = """\
command: echo hi
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
compute: local
tags: {suite: local, drop: me}
"""


def _json(r):
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _names(r) -> list:
    return [i["name"] for i in _json(r)]


# --- local ---------------------------------------------------------------------------------------

def test_local_update_archive_restore_and_list_filters(cli, write):
    spec = write("job.yml", LOCAL_JOB)
    for name in ("a1", "a2"):
        assert cli("submit", spec, "--name", name, "--wait", timeout=120).returncode == 0

    info = _json(cli("update", "a1", "--tag", "lr=0.1", "--remove-tag", "drop", "--display-name", "first",
                     "--description", "the first run", "-o", "json"))
    assert info["tags"] == {"suite": "local", "lr": "0.1"}
    assert (info["display_name"], info["description"]) == ("first", "the first run")
    st = _json(cli("status", "a1", "-o", "json"))            # kept in state.json, not only printed
    assert st["tags"] == {"suite": "local", "lr": "0.1"} and st["description"] == "the first run"

    assert _json(cli("archive", "a1", "-o", "json"))["archived"] is True
    assert _names(cli("list", "-o", "json")) == ["a2"]
    assert sorted(_names(cli("list", "--include-archived", "-o", "json"))) == ["a1", "a2"]
    assert _names(cli("list", "--archived-only", "-o", "json")) == ["a1"]
    assert _json(cli("status", "a1", "-o", "json"))["status"] == "Completed"   # still readable by name
    assert _json(cli("restore", "a1", "-o", "json"))["archived"] is False
    assert sorted(_names(cli("list", "-o", "json"))) == ["a1", "a2"]

    assert sorted(_names(cli("list", "--status", "completed", "-o", "json"))) == ["a1", "a2"]
    assert _names(cli("list", "--status", "Failed", "--status", "Running", "-o", "json")) == []
    assert len(_names(cli("list", "--limit", "1", "-o", "json"))) == 1
    assert len(_names(cli("list", "--limit", "1", "--all-results", "-o", "json"))) == 2


def test_bad_input_is_a_usage_error(cli, write):
    assert cli("submit", write("job.yml", LOCAL_JOB), "--name", "b1", "--wait", timeout=120).returncode == 0
    r = cli("list", "--status", "Runing")
    assert r.returncode == 2 and "not a job status" in r.stderr and "did you mean 'Running'" in r.stderr
    r = cli("update", "b1")
    assert r.returncode == 2 and "nothing to update" in r.stderr
    r = cli("update", "b1", "--tag", "x=1", "--remove-tag", "x")
    assert r.returncode == 2 and "both set and removed" in r.stderr
    r = cli("update", "b1", "--tag", "novalue")
    assert r.returncode == 2 and "has no '='" in r.stderr
    r = cli("list", "--include-archived", "--archived-only")
    assert r.returncode == 2
    assert cli("update", "nope", "--tag", "x=1").returncode == 2          # no such job
    assert "Traceback" not in r.stderr


def test_a_running_job_cannot_be_archived(cli, write):
    r = cli("submit", write("job.yml", LOCAL_JOB.replace("echo hi", "sleep 30")), "--name", "run1")
    assert r.returncode == 0, r.stderr
    try:
        a = cli("archive", "run1")
        assert a.returncode == 2 and "only a job that has ended can be archived" in a.stderr
    finally:
        cli("cancel", "run1")


def test_a_backend_without_these_abilities_says_so(fake_backend, capsys, monkeypatch):
    from dtrain.backends.base import Backend, JobInfo
    from dtrain.cli import main

    monkeypatch.setattr(type(fake_backend), "update", Backend.update)   # the fake has one (retry causes)

    fake_backend.add(JobInfo(name="f1", backend="local", status="Completed"))
    for argv in (["update", "f1", "--tag", "k=v"], ["archive", "f1"], ["list", "--include-archived"]):
        assert main(argv) == 2
        assert "not supported by the local backend" in capsys.readouterr().err


# --- Azure (azure-ai-ml against the emulator) -----------------------------------------------------

@pytest.mark.sdk
def test_azure_update_archive_restore_and_list_filters(emu, project):  # noqa: F811
    env = emu_env(emu, project)
    emu.script_job_statuses(["Completed"], 0.01, job="z1")
    emu.script_job_statuses(["Completed"], 0.01, job="z2")
    for name in ("z1", "z2"):
        assert dtrain("submit", "job.yml", "--name", name, env=env, cwd=project).returncode == 0
    time.sleep(0.2)

    info = _json(dtrain("update", "z1", "--tag", "lr=0.1", "--remove-tag", "suite", "--display-name", "first",
                        "--description", "the first run", "-o", "json", env=env, cwd=project))
    assert info["tags"] == {"lr": "0.1"}
    assert (info["display_name"], info["description"]) == ("first", "the first run")
    # the job resource answers with them where the REST spec puts them
    props = emu.job_resource("z1")["properties"]
    assert props["tags"] == {"lr": "0.1"} and props["displayName"] == "first"
    assert props["description"] == "the first run"
    assert [p[1] for p in emu.run_patches] == ["/", "/tags"]   # jobs.update, then the tag removal

    assert _json(dtrain("archive", "z1", "-o", "json", env=env, cwd=project))["archived"] is True
    assert emu.job_resource("z1")["properties"]["isArchived"] is True
    assert _names(dtrain("list", "-o", "json", env=env, cwd=project)) == ["z2"]
    assert sorted(_names(dtrain("list", "--include-archived", "-o", "json", env=env, cwd=project))) == ["z1", "z2"]
    assert _names(dtrain("list", "--archived-only", "-o", "json", env=env, cwd=project)) == ["z1"]
    assert _json(dtrain("restore", "z1", "-o", "json", env=env, cwd=project))["archived"] is False
    assert sorted(_names(dtrain("list", "-o", "json", env=env, cwd=project))) == ["z1", "z2"]

    assert sorted(_names(dtrain("list", "--status", "COMPLETED", "-o", "json", env=env, cwd=project))) == ["z1", "z2"]
    assert _names(dtrain("list", "--status", "running", "-o", "json", env=env, cwd=project)) == []
    assert len(_names(dtrain("list", "--limit", "1", "-o", "json", env=env, cwd=project))) == 1
    assert len(_names(dtrain("list", "--limit", "1", "--all-results", "-o", "json", env=env, cwd=project))) == 2
    assert dtrain("update", "nope", "--tag", "x=1", env=env, cwd=project).returncode == 2
