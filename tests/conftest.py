import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE = Path(os.environ.get("DTRAIN_CONFORMANCE", ROOT.parent / "shared" / "conformance")).resolve()


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    if not (CONFORMANCE / "manifest.json").is_file():
        pytest.fail(f"conformance material not found at {CONFORMANCE}; CI has it at ../shared/conformance "
                    "(set DTRAIN_CONFORMANCE to point elsewhere)")
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
