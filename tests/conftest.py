import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE = Path(os.environ.get("DTRAIN_CONFORMANCE", ROOT.parent / "shared" / "conformance")).resolve()
# Real Azure ML YAMLs and the Azure ML REST spec the emulator checks every job body against. It is not
# part of this repository (see README, Tests): a fresh clone without it skips what needs it.
HAVE_CONFORMANCE = (CONFORMANCE / "manifest.json").is_file() and (CONFORMANCE / "rest-spec").is_dir()
NO_CONFORMANCE = (f"needs the conformance material (real Azure ML YAMLs + REST spec), not found at {CONFORMANCE}: "
                  "put it at ../shared/conformance or set DTRAIN_CONFORMANCE")
# Fixtures that need it: the emulator validates every job PUT against the REST spec.
_NEEDS_CONFORMANCE = {"conformance_dir", "emu"}


def pytest_configure(config):
    # The local backend runs `python` from PATH, as Azure ML does; the jobs the tests start must get
    # the interpreter running the tests (with its torch, numpy, dtrain), whatever python is first on PATH.
    here = os.path.dirname(sys.executable)
    os.environ["PATH"] = os.pathsep.join([here] + [p for p in os.environ.get("PATH", "").split(os.pathsep)
                                                     if p != here])


@pytest.fixture(autouse=True)
def _sdk_cloud_stays_in_its_test(monkeypatch):
    # MLClient(cloud=...) writes AZUREML_CURRENT_CLOUD into os.environ for good; a later process that
    # inherits it (a fresh venv's pytest, a dtrain child) cannot import azure-ai-ml: "Unknown cloud".
    monkeypatch.delenv("AZUREML_CURRENT_CLOUD", raising=False)


def pytest_collection_modifyitems(config, items):
    if HAVE_CONFORMANCE:
        return
    skip = pytest.mark.skip(reason=NO_CONFORMANCE)
    for item in items:
        if _NEEDS_CONFORMANCE & set(getattr(item, "fixturenames", ())):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    if not HAVE_CONFORMANCE:
        pytest.skip(NO_CONFORMANCE)
    return CONFORMANCE


@pytest.fixture
def dtrain_home(tmp_path, monkeypatch):
    home = tmp_path / "dtrain-home"
    monkeypatch.setenv("DTRAIN_HOME", str(home))
    return home


def run_cli(*args, cwd=None, env=None, timeout=120, input=None):
    """Run `python -m dtrain ...` as a real process; returns CompletedProcess (text)."""
    e = dict(os.environ)
    e.pop("FORCE_COLOR", None)
    e["NO_COLOR"] = "1"
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "dtrain", *map(str, args)], cwd=cwd, env=e, timeout=timeout,
                          capture_output=True, text=True, input=input)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def write(tmp_path):
    """write("job.yml", text) -> path; creates parent folders."""
    def _write(rel, text):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p
    return _write
