"""`submit --local` inside the job's environment (issue 27): a virtual environment built once from the conda
file's pip part for the Python it asks for, under $DTRAIN_HOME/envs/<hash>, reused by later jobs and rebuilt
when the file changes; every rank runs in it. Wheels are built in the test and installed with
`--no-index --find-links` (no network)."""
from __future__ import annotations

import json
import sys

import pytest
from fakes import run_main
from wheelhouse import make_wheel

from dtrain.backends.local import jobenv
from dtrain.envcheck.resolve import find_uv

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
needs_uv = pytest.mark.skipif(find_uv() is None, reason="uv is not installed (the test extra brings it)")
RUN = "import sys, envonlypkg; print('imported', envonlypkg.VERSION, 'prefix', sys.prefix)\n"


def _conda(write, wheels, pin, python=PY):
    return write("conda.yml", f"dependencies:\n  - python={python}\n  - pip\n  - cudatoolkit=11.8\n  - pip:\n"
                              f"    - --no-index\n    - --find-links {wheels}\n    - {pin}\n")


def _spec(write, extra=""):
    write("src/run.py", RUN)
    return write("job.yml", "command: python run.py\ncode: src\ncompute: local\nenvironment:\n"
                            "  image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04\n  conda_file: conda.yml\n"
                            + extra)


def test_the_plan_runs_in_the_jobs_environment_unless_the_host_is_asked_for(capsys, write, tmp_path, dtrain_home,
                                                                             monkeypatch):
    _conda(write, tmp_path / "wheels", "envonlypkg==1.2")
    spec = _spec(write)
    code, out, err = run_main(capsys, "render", "--local", spec)
    plan = json.loads(out)
    env_dir = plan["job_env"]["path"]
    assert code == 0 and env_dir.startswith(str(dtrain_home / "envs")) and plan["job_env"]["python"] == PY
    assert plan["processes"][0]["env"]["PATH"].split(":")[0] == env_dir + "/bin"
    assert "not installable this way (conda packages): cudatoolkit=11.8" in plan["notes"][0]
    assert not (dtrain_home / "envs").exists()          # a plan builds nothing
    code, out, _ = run_main(capsys, "submit", spec, "--local", "--dry-run", "--host-python")
    assert code == 0 and json.loads(out)["job_env"] is None
    monkeypatch.setenv("DTRAIN_LOCAL_PYTHON", sys.executable)
    code, out, _ = run_main(capsys, "render", "--local", spec)
    assert json.loads(out)["job_env"] is None


@needs_uv
def test_a_python_the_machine_lacks_is_a_clear_error_and_leaves_nothing(capsys, write, tmp_path, dtrain_home):
    _conda(write, tmp_path / "wheels", "envonlypkg==1.2", python="3.99")
    code, _, err = run_main(capsys, "submit", _spec(write), "--local", "--name", "nopy")
    assert code == 2 and "asks for Python 3.99, and no Python 3.99 is on this machine" in err
    assert "--host-python" in err and not (dtrain_home / "jobs" / "nopy").exists()
    assert [p.name for p in (dtrain_home / "envs").iterdir() if not p.name.endswith(".lock")] == []


@needs_uv
def test_a_half_built_environment_is_never_used(tmp_path):
    make_wheel(tmp_path / "wheels", "envonlypkg", "1.2")
    env = jobenv.JobEnv(hash="h", path=str(tmp_path / "envs" / "h"), python=PY,
                        requirements=f"--no-index\n--find-links {tmp_path / 'wheels'}\nenvonlypkg==1.2\n",
                        conda_file="conda.yml", cwd=str(tmp_path))
    (tmp_path / "envs" / "h" / "bin").mkdir(parents=True)          # a build killed half-way: no ready marker
    (tmp_path / "envs" / "h" / "junk").write_text("x")
    seen = []
    assert jobenv.ensure(env, seen.append) is True
    assert not (tmp_path / "envs" / "h" / "junk").exists() and (tmp_path / "envs" / "h" / jobenv.READY).is_file()
    assert any("+ envonlypkg==1.2" in n.text for n in seen)        # the build's progress was shown
    assert jobenv.ensure(env, seen.append) is False


@pytest.mark.slow
@needs_uv
def test_jobs_run_in_their_environment_reuse_it_and_an_edit_rebuilds_it(cli, write, tmp_path, dtrain_home):
    wheels = tmp_path / "wheels"
    make_wheel(wheels, "envonlypkg", "1.2")
    make_wheel(wheels, "envonlypkg", "1.3")
    _conda(write, wheels, "envonlypkg==1.2")
    spec = _spec(write, "distribution: {type: pytorch, process_count_per_instance: 2}\n")
    first = cli("submit", spec, "--local", "--wait", "--name", "one")
    assert first.returncode == 0, first.stderr
    envs = [p for p in (dtrain_home / "envs").iterdir() if p.is_dir()]
    assert len(envs) == 1 and "building the job's environment" in first.stderr
    assert first.stdout.count(f"imported 1.2 prefix {envs[0]}") == 2          # every rank, inside it
    built = (envs[0] / "requirements.txt").stat().st_mtime_ns              # written by the build alone
    used = (envs[0] / jobenv.READY).stat().st_mtime_ns

    second = cli("submit", spec, "--local", "--wait", "--name", "two")
    assert second.returncode == 0 and "reusing the job's environment" in second.stderr
    assert "building" not in second.stderr and (envs[0] / "requirements.txt").stat().st_mtime_ns == built
    assert (envs[0] / jobenv.READY).stat().st_mtime_ns > used                 # its last use, for clean --envs

    _conda(write, wheels, "envonlypkg==1.3")
    third = cli("submit", spec, "--local", "--wait", "--name", "three")
    assert third.returncode == 0 and "building the job's environment" in third.stderr
    assert third.stdout.count("imported 1.3 prefix") == 2 and str(envs[0]) not in third.stdout

    gone = cli("clean", "--older-than", "0s", "--envs")                     # nothing unfinished needs either
    assert gone.returncode == 0 and "removed 3 job folder(s) and 2 job environment(s)" in gone.stderr, gone.stderr
    assert [p for p in (dtrain_home / "envs").iterdir() if p.is_dir()] == []
