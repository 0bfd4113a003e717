import os
import subprocess
import sys
import threading
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


# What the machine running the tests may have set, and dtrain (or azure-identity, or a training script)
# would read: a CI's own variables, a developer's workspace defaults and credentials, an Azure ML job's
# variables (the tests may run inside one). Cleared for every test; a test sets what it is about.
_CLEARED_PREFIXES = ("DTRAIN_", "AZURE_", "AZUREML_", "AZURESUBSCRIPTION_", "OMPI_COMM_WORLD_")
_CLEARED = (
    "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE", "RUNNER_TEMP",
    "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "TF_BUILD", "AGENT_TEMPDIRECTORY", "SYSTEM_OIDCREQUESTURI", "SYSTEM_ACCESSTOKEN",
    "IDENTITY_ENDPOINT", "IDENTITY_HEADER", "MSI_ENDPOINT", "MSI_SECRET",   # managed identity
    "FORCE_COLOR", "AZ_BATCH_MASTER_NODE", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "NODE_RANK",
    "WORLD_SIZE", "TF_CONFIG", "DISPLAY", "WAYLAND_DISPLAY",   # `--web` never opens a browser in a test
)
_KEPT = ("DTRAIN_CONFORMANCE",)   # where the conformance material is (see above): the tests' own setting


@pytest.fixture(scope="session")
def _empty_azure_config_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("azure-config-empty")


@pytest.fixture(autouse=True)
def _hermetic_environment(monkeypatch, tmp_path, _empty_azure_config_dir):
    """Every test, in process and in the processes it starts (they inherit os.environ), sees the same
    environment whatever the machine has: DTRAIN_HOME in the test's tmp_path, NO_COLOR, no CI, no
    workspace defaults, an empty az config folder (never the developer's ~/.azure). The interpreter is
    fixed by pytest_configure. A test's own monkeypatch.setenv comes after this and wins."""
    for k in list(os.environ):
        if (k in _CLEARED or k.startswith(_CLEARED_PREFIXES)) and k not in _KEPT:
            monkeypatch.delenv(k)
    monkeypatch.setenv("DTRAIN_HOME", str(tmp_path / "dtrain-home"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(_empty_azure_config_dir))


SLOW_TIMEOUT_S = 300    # a slow test without its own deadline (pyproject's 120 s is for the fast tier)


def pytest_collection_modifyitems(config, items):
    for item in items:     # slow tests start processes and jobs; on a loaded 2-core machine 120 s is tight
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
    # The longest tests first (installs, then the other slow ones, then the fast tier), so that with
    # several workers (pyproject addopts: -n) they start at once instead of ending the run alone. A
    # stable sort: every xdist worker collects the same order, as it must.
    items.sort(key=lambda item: 0 if item.get_closest_marker("install") else
               1 if item.get_closest_marker("slow") else 2)
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
def dtrain_home(tmp_path):
    """The test's DTRAIN_HOME (set by _hermetic_environment)."""
    home = tmp_path / "dtrain-home"
    assert os.environ["DTRAIN_HOME"] == str(home)
    return home


def run_cli(*args, cwd=None, env=None, timeout=120, input=None):
    """Run `python -m dtrain ...` as a real process; returns CompletedProcess (text)."""
    e = {**os.environ, **(env or {})}   # os.environ: see _hermetic_environment
    return subprocess.run([sys.executable, "-m", "dtrain", *map(str, args)], cwd=cwd, env=e, timeout=timeout,
                          capture_output=True, text=True, input=input)


def cli_in_process(*args, cwd=None, env=None, timeout=120, input=None):
    """The same as run_cli, but dtrain's main() runs in this process (about 0.4 CPU-s less per call, 2 with
    azure-ai-ml), unless stdin is given or the caller is not the main thread (concurrent calls)."""
    if input is not None or threading.current_thread() is not threading.main_thread():
        return run_cli(*args, cwd=cwd, env=env, timeout=timeout, input=input)
    from fakes import run_in_process

    return run_in_process([str(a) for a in args], env={**os.environ, **(env or {})}, cwd=cwd or os.getcwd())


@pytest.fixture
def cli():
    """dtrain's CLI, in process (tests that need a process of its own use run_cli)."""
    return cli_in_process


@pytest.fixture
def write(tmp_path):
    """write("job.yml", text) -> path; creates parent folders."""
    def _write(rel, text):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p
    return _write


@pytest.fixture
def fake_backend():
    """A FakeBackend (tests/fakes.py) registered as the "local" kind for the test: the runner, the follower
    and the CLI in-process use it as they would the real one."""
    from fakes import FakeBackend, register

    fake = FakeBackend("local")
    restore = register(fake)
    yield fake
    restore()


@pytest.fixture
def fake_spec(tmp_path):
    """A small valid local spec (its command is never run by the fake backend): the path, as a str."""
    p = tmp_path / "job.yml"
    p.write_text("command: python train.py\nenvironment: azureml:env@latest\ncompute: local\ninputs: {lr: 0.1}\n")
    return str(p)
