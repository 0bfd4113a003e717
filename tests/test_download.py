"""dtrain download (issue 24): every output file and log of a finished local and emulated Azure job, byte
for byte; a second run resumes (complete files are not fetched again, a .part continues) and never overwrites
a different file."""
from __future__ import annotations

import json
import os

import pytest

from azure_emulator import AzureMLEmulator
from azure_emulator.wire import BLOB_CONTAINER, Blob
from fakes import run_main
from test_azure_backend import JOB_YML, expected_lines, project  # noqa: F401
from test_azure_storage_logs import _in_process

LOCAL_JOB = """\
command: mkdir -p ${{outputs.model}}/sub && head -c 200000 /dev/urandom > ${{outputs.model}}/sub/w.bin && echo trained
environment: azureml:x:1
compute: local
outputs:
  model: {type: uri_folder}
"""


def _tree(root) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_local_jobs_outputs_and_logs_byte_exact_resumed_and_never_overwritten(tmp_path, capsys, monkeypatch):
    (tmp_path / "job.yml").write_text(LOCAL_JOB)
    monkeypatch.chdir(tmp_path)
    assert run_main(capsys, "submit", "job.yml", "--local", "--name", "dl", "--wait")[0] == 0
    job = tmp_path / "dtrain-home" / "jobs" / "dl"
    dest = tmp_path / "got"
    code, out, err = run_main(capsys, "download", "dl", "--all", "--path", dest, "--local")
    assert code == 0, err
    got = _tree(dest)
    assert got["named-outputs/model/sub/w.bin"] == (job / "outputs" / "model" / "sub" / "w.bin").read_bytes()
    assert {k: v for k, v in got.items() if k.startswith("logs/")} == {
        "logs/" + k: v for k, v in _tree(job).items() if k.startswith(("user_logs/", "system_logs/"))}
    assert b"trained" in got["logs/user_logs/std_log_process_00.txt"]

    # interrupted: one file gone, another cut short into its .part; the rest is not read again
    (dest / "logs" / "user_logs" / "std_log_process_00.txt").unlink()
    weights = dest / "named-outputs" / "model" / "sub" / "w.bin"
    weights.rename(weights.with_name("w.bin.part"))
    with open(weights.with_name("w.bin.part"), "r+b") as f:
        f.truncate(50000)
    code, out, err = run_main(capsys, "download", "dl", "--all", "--path", dest, "--local", "-o", "json")
    report = json.loads(out)
    assert sorted(report["fetched"]) == ["logs/user_logs/std_log_process_00.txt", "named-outputs/model/sub/w.bin"]
    assert report["bytes"] == 200000 - 50000 + len(got["logs/user_logs/std_log_process_00.txt"])
    assert _tree(dest) == got

    weights.write_bytes(b"mine")                   # a different file: refused, untouched
    code, out, err = run_main(capsys, "download", "dl", "--path", dest, "--local")
    assert code == 2 and "named-outputs/model/sub/w.bin" in err and weights.read_bytes() == b"mine"


@pytest.mark.slow
@pytest.mark.sdk
def test_an_azure_jobs_outputs_and_logs_from_its_datastores(monkeypatch, project, capsys):  # noqa: F811
    weights = os.urandom(300000)
    with AzureMLEmulator(lro_retry_after=0.2, cancel_seconds=0.2) as emu:
        emu.artifacts.mode = "datastore"
        emu.script_job_statuses(["Queued", "Running", "Completed"], None, job="az")
        emu.blobs[(BLOB_CONTAINER, "models/az/w.bin")] = Blob(weights)
        emu.blobs[(BLOB_CONTAINER, "models/az2/other.bin")] = Blob(b"not this output's")
        (project / "job.yml").write_text(JOB_YML + "outputs:\n  model:\n    type: uri_folder\n"
                                         "    path: azureml://datastores/workspaceblobstore/paths/models/az\n")
        _in_process(monkeypatch, emu, project)
        assert run_main(capsys, "submit", "job.yml", "--name", "az", "--wait")[0] == 0
        dest = project / "got"
        code, out, err = run_main(capsys, "download", "az", "--all", "--path", dest)
        assert code == 0, err
        got = _tree(dest)
        logs = {f"user_logs/std_log_process_{r}.txt": "\n".join(lines) + "\n"
                for r, lines in expected_lines(emu, "az").items()}
        assert got.pop("named-outputs/model/w.bin") == weights
        assert got == {**{f"logs/{k}": v.encode() for k, v in logs.items()},
                       **{f"named-outputs/default/{k}": v.encode() for k, v in logs.items()}}

        (dest / "named-outputs" / "model" / "w.bin").unlink()
        before = len(emu.requests_to(r"/azureml/ExperimentRun/", "GET"))
        code, out, err = run_main(capsys, "download", "az", "--all", "--path", dest, "-o", "json")
        assert code == 0, err
        assert json.loads(out)["fetched"] == ["named-outputs/model/w.bin"]
        assert (dest / "named-outputs" / "model" / "w.bin").read_bytes() == weights
        reads = [r for r in emu.requests_to(r"/azureml/ExperimentRun/", "GET")[before:] if "comp" not in r.query]
        assert all(r.headers.get("range") == "bytes=0-0" for r in reads)   # sizes only: no log fetched again
