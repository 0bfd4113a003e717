"""Which `python` a local job runs, said truthfully (issue: a user's second day): an activated
environment's python first; where `python` resolves to nothing, dtrain's own virtual environment's;
--python / DTRAIN_LOCAL_PYTHON to choose; and a command whose program is missing exits 2 before any
process starts."""
from __future__ import annotations

import os
import sys

import pytest

from dtrain.backends.local import interpreter
from dtrain.errors import UsageError

SPEC = ("command: python -c \"import os, sys; print('exe', os.path.realpath(sys.executable))\"\n"
        "environment: azureml:env@latest\ncompute: local\n")
IN_VENV = sys.prefix != sys.base_prefix


def test_python_first_on_path_is_kept(tmp_path):
    (tmp_path / "python").write_text("#!/bin/sh\n")
    (tmp_path / "python").chmod(0o755)
    it = interpreter.choose("/jobs/j", base_path=str(tmp_path))
    assert it.path is None and it.python == str(tmp_path / "python") and it.link is None


@pytest.mark.skipif(not IN_VENV, reason="the tests run outside a virtual environment")
def test_without_python_on_path_dtrains_own_environment_goes_first(tmp_path):
    it = interpreter.choose("/jobs/j", base_path=str(tmp_path))
    venv_bin = os.path.dirname(sys.executable)
    assert it.path.split(os.pathsep)[0] == venv_bin and it.python == os.path.join(venv_bin, "python")


def test_a_chosen_python_is_linked_from_the_job_folder(tmp_path, monkeypatch):
    it = interpreter.choose("/jobs/j", chosen=sys.executable, base_path="/usr/bin")
    assert it.link == os.path.abspath(sys.executable) and it.path.split(os.pathsep)[0] == "/jobs/j/bin"
    monkeypatch.setenv("DTRAIN_LOCAL_PYTHON", str(tmp_path / "nope"))
    with pytest.raises(UsageError, match="no such interpreter"):
        interpreter.choose("/jobs/j")


@pytest.mark.parametrize("command, prog", [("python train.py", "python"), ("A=1 B=2 torchrun x.py", "torchrun"),
                                           ("cd src && python x.py", None), ("$PY x.py", None),
                                           ("./run.sh --x", "./run.sh"), ("echo hi", None)])
def test_the_program_a_command_starts(command, prog):
    assert interpreter.program(command) == prog


def test_a_missing_program_is_refused_before_anything_starts(cli, write, dtrain_home):
    spec = write("job.yml", "command: nosuchprog --x\nenvironment: azureml:env@latest\ncompute: local\n")
    r = cli("submit", spec, "--local", "--wait", "--name", "np")
    assert r.returncode == 2 and "'nosuchprog'" in r.stderr and "no process was started" in r.stderr
    assert not (dtrain_home / "jobs" / "np").exists()


@pytest.mark.slow
@pytest.mark.skipif(not IN_VENV, reason="the tests run outside a virtual environment")
def test_a_venv_not_activated_runs_its_own_python(cli, write, tmp_path):
    """`.venv/bin/dtrain submit ... --local --wait` with no python on PATH: the job runs, with the venv's."""
    spec = write("job.yml", SPEC)
    r = cli("submit", spec, "--local", "--wait", "--name", "venv", env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert f"exe {os.path.realpath(sys.executable)}" in r.stdout
    assert f"python is {os.path.dirname(sys.executable)}/python" in r.stderr     # the note says which


@pytest.mark.slow
def test_python_flag_chooses_the_interpreter(cli, write):
    spec = write("job.yml", SPEC)
    r = cli("submit", spec, "--local", "--wait", "--name", "chosen", "--python", "/usr/bin/python3")
    assert r.returncode == 0, r.stderr
    assert f"exe {os.path.realpath('/usr/bin/python3')}" in r.stdout and "chosen with --python" in r.stderr
    r = cli("submit", spec, "--local", "--name", "bad", "--python", "/no/such/python")
    assert r.returncode == 2 and "no such interpreter" in r.stderr


@pytest.mark.slow
def test_the_supervisors_log_holds_no_runpy_warning(cli, write, dtrain_home):
    """The watchdog and supervisor start through backends/local/entry.py: `python -m` on a module its own
    package imports printed runpy's RuntimeWarning into every job's supervisor.txt."""
    spec = write("job.yml", "command: echo hi\nenvironment: azureml:env@latest\ncompute: local\n")
    r = cli("submit", spec, "--local", "--wait", "--name", "quiet")
    assert r.returncode == 0, r.stderr
    log = (dtrain_home / "jobs" / "quiet" / "system_logs" / "supervisor.txt").read_text()
    assert "RuntimeWarning" not in log and "found in sys.modules" not in log
