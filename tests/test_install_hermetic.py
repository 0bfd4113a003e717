"""The suite runs its jobs with its own interpreter: the local backend runs `python` from PATH (as Azure
ML does), so tests/conftest.py puts sys.executable's folder first on PATH for the whole session."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


def test_python_on_path_is_the_interpreter_running_the_tests():
    r = subprocess.run(["python", "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert os.path.samefile(r.stdout.strip(), sys.executable)


@pytest.mark.slow   # a second pytest session
def test_an_unrelated_python_first_on_path_does_not_reach_the_tests(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text("#!/bin/sh\necho 'an unrelated python' >&2\nexit 97\n")
    (fake / "python").chmod(0o755)
    here = os.path.dirname(sys.executable)
    path = [str(fake)] + [p for p in os.environ["PATH"].split(os.pathsep) if p != here]
    env = dict(os.environ, PATH=os.pathsep.join(path))
    assert subprocess.run(["python"], env=env, capture_output=True, timeout=60).returncode == 97
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                        f"{__file__}::test_python_on_path_is_the_interpreter_running_the_tests"],
                       env=env, capture_output=True, text=True, timeout=100, cwd=os.path.dirname(__file__))
    assert r.returncode == 0, r.stdout[-2000:]
