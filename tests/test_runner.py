"""dtrain.runner: the library under the CLI (and dtrain's Python API). Routing a job name to the backend that owns it (recorded at
submit), and following jobs as events (follow.py) that the CLI prints."""
from __future__ import annotations

import pytest

from dtrain import follow, jobindex
from dtrain.backends.base import JobInfo, LogLine
from dtrain.errors import JobNotFound
from dtrain.runner import Runner, Workspace


# --- routing -----------------------------------------------------------------------------------

def test_an_unknown_job_without_a_workspace_is_not_found():
    with pytest.raises(JobNotFound) as ei:
        Runner()._owner("nobody-ran-this")
    assert ei.value.exit_code == 2 and "no Azure ML workspace" in ei.value.message


def test_an_azure_job_recorded_at_submit_is_found_in_its_workspace_without_flags():
    jobindex.record("trained-elsewhere", "azureml", {"subscription_id": "sub-1", "resource_group": "rg-1",
                                                     "workspace_name": "ws-1"})
    backend = Runner()._owner("trained-elsewhere")
    assert backend.name == "azureml"
    assert backend.inner._flags == ("sub-1", "rg-1", "ws-1")


def test_flags_win_over_the_recorded_workspace_part_by_part():
    jobindex.record("j1", "azureml", {"subscription_id": "sub-1", "resource_group": "rg-1", "workspace_name": "ws-1"})
    backend = Runner(Workspace(workspace="ws-2"))._owner("j1")
    assert backend.inner._flags == ("sub-1", "rg-1", "ws-2")


def test_one_backend_per_workspace_within_a_session():
    jobindex.record("a1", "azureml", {"subscription_id": "s", "resource_group": "r", "workspace_name": "w"})
    jobindex.record("a2", "azureml", {"subscription_id": "s", "resource_group": "r", "workspace_name": "w"})
    jobindex.record("b1", "azureml", {"subscription_id": "s", "resource_group": "r", "workspace_name": "other"})
    s = Runner()
    assert s._owner("a1") is s._owner("a2")
    assert s._owner("b1") is not s._owner("a1")


@pytest.mark.parametrize("content", ["", "[]", "{not json", '{"backend": "azureml", "workspace": []}'])
def test_an_unreadable_index_entry_is_as_if_there_were_none(dtrain_home, content):
    (dtrain_home / "index").mkdir(parents=True)
    (dtrain_home / "index" / "broken.json").write_text(content)
    assert jobindex.lookup("broken") is None
    with pytest.raises(JobNotFound):
        Runner()._owner("broken")


def test_the_index_refuses_names_that_are_not_job_names(dtrain_home):
    jobindex.record("../escape", "azureml", {"workspace_name": "w"})
    assert not (dtrain_home / "escape.json").exists() and jobindex.lookup("../escape") is None


# --- following as events, over a fake backend registered the real way -------------------------------

def test_following_yields_each_change_once_then_ended(fake_backend):
    fake_backend.add(JobInfo("j", "local", "Queued"), ["Queued", "Running", "Running", "Completed"])
    events = list(Runner().follow(["j"]))
    changed = [e.info.status for e in events if isinstance(e, follow.StatusChanged)]
    assert changed == ["Queued", "Running", "Completed"]
    assert isinstance(events[-1], follow.Ended) and events[-1].infos["j"].status == "Completed"


def test_streaming_yields_the_lines_in_order_then_ended(fake_backend):
    fake_backend.add(JobInfo("j", "local", "Completed"))
    fake_backend.lines["j"] = [f"step {i}" for i in range(5)]
    events = list(Runner().follow(["j"], stream=True))
    assert [e.line.text for e in events if isinstance(e, follow.LogReceived)] == [f"step {i}" for i in range(5)]
    assert isinstance(events[-1], follow.Ended) and events[-1].infos["j"].status == "Completed"


def test_streaming_reports_the_start_while_nothing_is_printed(fake_backend):
    class Slow(type(fake_backend)):
        def logs(self, name, *, follow=False, rank=None):
            import time
            time.sleep(0.5)
            yield LogLine("hello", rank=0, node=0)

    from fakes import register

    slow = Slow()
    slow.add(JobInfo("j", "local", "Queued"), ["Queued", "Running", "Running", "Completed"])
    restore = register(slow)
    try:
        first = JobInfo(name="j", backend="local", status="Queued")
        events = list(follow.stream(Runner(), "j", tick_s=0.05, start_poll_s=0.1, first=first))
    finally:
        restore()
    kinds = [type(e).__name__ for e in events]
    assert "Quiet" in kinds and kinds.index("Quiet") < kinds.index("LogReceived")
    changed = [e.info.status for e in events if isinstance(e, follow.StatusChanged)]
    assert changed and changed[0] == "Running"        # Queued was already known (first=)
    assert kinds[-1] == "Ended"


def test_a_timeout_ends_following_with_wait_timeout(fake_backend):
    fake_backend.add(JobInfo("j", "local", "Running"))
    with pytest.raises(follow.WaitTimeout) as ei:
        list(Runner().follow(["j"], timeout=0.05))
    assert ei.value.infos["j"].status == "Running"


def test_many_jobs_are_read_with_one_list_call_per_poll(fake_backend):
    calls = []
    real_list = fake_backend.list

    def counting_list(**kw):
        calls.append(kw.get("names"))
        return real_list(**kw)

    fake_backend.list = counting_list
    for n in ("a", "b", "c"):
        fake_backend.add(JobInfo(n, "local", "Running"), ["Running", "Completed"])
    final = Runner().wait("a", "b", "c")
    assert {i.status for i in final.values()} == {"Completed"}
    assert calls and all(sorted(c) in (["a", "b", "c"], ["a", "b"], ["a"], ["b"], ["c"], ["a", "c"], ["b", "c"])
                         for c in calls)
    assert len(calls) <= 3


def test_the_python_api_submits_a_spec_and_waits_for_it(fake_backend, tmp_path):
    (tmp_path / "job.yml").write_text("command: echo hi\nenvironment: azureml:env@latest\ncompute: local\n")
    notes = []
    r = Runner(notify=notes.append)
    job = r.submit(tmp_path / "job.yml", local=True)
    assert fake_backend.submitted == [job.name]
    assert r.wait(job.name)[job.name].status == "Completed"
    assert r.status(job.name).status == "Completed"


@pytest.mark.slow
@pytest.mark.sdk
@pytest.mark.timeout(240)  # several dtrain processes through the emulator: 60-90 s at load 30
def test_status_finds_an_azure_job_submitted_from_here_without_workspace_flags(tmp_path, monkeypatch, conformance_dir):
    """Through the real SDK against the emulator: submit names the workspace with flags only; status,
    logs and wait given just the job name go to that workspace (the index), not 'no workspace'."""
    from test_azure_backend import JOB_YML, TRAIN_PY, AzureMLEmulator, dtrain, emu_env

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN_PY)
    (tmp_path / "job.yml").write_text(JOB_YML)
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2) as emu:
        env = emu_env(emu, tmp_path)
        for k in ("DTRAIN_SUBSCRIPTION_ID", "DTRAIN_RESOURCE_GROUP", "DTRAIN_WORKSPACE"):
            env.pop(k)
        flags = ["--subscription", emu.subscription_id, "-g", emu.resource_group, "-w", emu.workspace]
        r = dtrain("submit", "job.yml", "--name", "routed", *flags, env=env, cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
        r = dtrain("wait", "routed", env=env, cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
        r = dtrain("status", "routed", "--output", "json", env=env, cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
        assert '"backend": "azureml"' in r.stdout and '"status": "Completed"' in r.stdout
        # a job this machine never submitted still needs a workspace
        r = dtrain("status", "never-submitted", env=env, cwd=tmp_path, timeout=60)
        assert r.returncode == 2 and "no Azure ML workspace" in r.stderr
