"""dtrain installed as users install it, each time into a fresh virtual environment.

* the README's Quickstart block, read from README.md and run as written, in a copy of this checkout;
* the wheel, installed outside the source tree: templates, init, and the scaffold run locally;
* the lowest versions the declared ranges allow (uv's lowest-direct resolution), under the offline
  and emulator tests.

Minutes each (marked slow and install). Installs come from the index and find-links the machine's pip
is configured with (on CI a local CPU torch wheel), so nothing here names a package source.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Each test has its own deadline (the suite default is 120 s): a few minutes on a loaded 2-core machine,
# the deadline about three times that.
pytestmark = [pytest.mark.slow, pytest.mark.install]

# what a clean clone holds; build outputs and environments of this checkout stay behind
_NOT_IN_A_CLONE = shutil.ignore_patterns(".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__",
                                         ".pytest_cache", ".dtrain")


def readme_block(section: str) -> str:
    """The one ```sh block under `## <section>` in README.md."""
    text = (ROOT / "README.md").read_text().split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert len(blocks) == 1, f"README's {section} must hold exactly one sh block"
    return blocks[0].strip()


def clone(tmp_path: Path) -> Path:
    dest = tmp_path / "dtrain"
    shutil.copytree(ROOT, dest, ignore=_NOT_IN_A_CLONE, symlinks=True)
    return dest


def clean_env(tmp_path: Path, **extra: str) -> dict:
    """This process's environment without the interpreter running the tests: a fresh shell's PATH,
    no PYTHONPATH, no virtual environment, no AZUREML_* an earlier MLClient left behind; jobs keep their state under tmp_path."""
    here = os.path.dirname(sys.executable)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith(("DTRAIN_", "PYTEST", "AZUREML_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != here)
    env.update(DTRAIN_HOME=str(tmp_path / "dtrain-home"), NO_COLOR="1", PIP_PROGRESS_BAR="off", **extra)
    return env


def run(args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, **kw)


def uv(*args, env) -> None:
    r = run([sys.executable, "-m", "uv", *map(str, args)], env=env, timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def pip_find_links() -> list[str]:
    """--find-links options for uv, from pip's own configuration (uv does not read pip.conf)."""
    r = run([sys.executable, "-m", "pip", "config", "list"], timeout=60)
    links = []
    for line in r.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("find-links"):
            links += value.strip("'\"").split()
    return [arg for link in dict.fromkeys(links) for arg in ("--find-links", link)]


def lower_bounds() -> dict[str, str]:
    """{distribution: X} for every `name>=X` in pyproject's dependencies."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {m.group(1).lower(): m.group(2) for d in deps if (m := re.match(r"([\w.-]+)\s*>=\s*([\w.]+)", d))}


@pytest.mark.timeout(900)
def test_readme_quickstart_runs_as_written_in_a_fresh_environment(tmp_path):
    block = readme_block("Quickstart")
    install, job = block.split(" && dtrain ", 1)
    job = "dtrain " + job
    assert "venv" in install and "pip install" in install and job.endswith("--local --wait")
    src = clone(tmp_path)
    env = clean_env(tmp_path)
    r = run(["bash", "-euo", "pipefail", "-c", block], cwd=src, env=env, timeout=780)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert re.search(r"\bCompleted\b", r.stdout + r.stderr)

    # Every training script finds what it imports in that environment; the TensorFlow ones,
    # which the Quickstart leaves out, say in one line what to add and exit 2.
    python = src / ".venv" / "bin" / "python"
    scripts = src / "training_scripts"
    r = run([str(python), "-c", "import common, torch_common, numpy, torch"], cwd=scripts, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    for script in ("tf_multiworker.py", "tf_parameter_server.py"):
        r = run([str(python), script], cwd=scripts, env=env, timeout=300)
        assert r.returncode == 2 and "pip install 'dtrain[tensorflow]'" in r.stderr, r.stderr


@pytest.mark.timeout(600)
def test_wheel_outside_the_source_tree_lists_inits_and_runs_the_scaffold(tmp_path):
    src = clone(tmp_path)
    dist = tmp_path / "dist"
    r = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
            timeout=300)
    assert r.returncode == 0, r.stderr
    wheel = next(dist.glob("dtrain-*.whl"))
    shutil.rmtree(src)                                   # nothing may come from the source tree
    venv, work = tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    env = clean_env(tmp_path)
    uv("venv", "-q", "--python", sys.executable, venv, env=env)
    uv("pip", "install", "-q", "--python", venv / "bin" / "python", *pip_find_links(), f"{wheel}[torch]", env=env)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env["PATH"]])
    dtrain = str(venv / "bin" / "dtrain")

    r = run([dtrain, "templates", "--output", "json"], cwd=work, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    templates = json.loads(r.stdout)
    assert len(templates) == 6
    assert all(str(venv) in t["path"] for t in templates)

    r = run([dtrain, "init", "scaffold", "-t", "single-node"], cwd=work, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    files = sorted(str(p.relative_to(work / "scaffold")) for p in (work / "scaffold").rglob("*") if p.is_file())
    assert files == ["job.yml", "src/common.py", "src/single_node.py", "src/torch_common.py"]
    r = run([dtrain, "submit", "scaffold/job.yml", "--local", "--wait"], cwd=work, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"\bCompleted\b", r.stdout + r.stderr)


@pytest.mark.timeout(900)
def test_lowest_allowed_versions_pass_the_offline_and_emulator_tests(tmp_path):
    src = clone(tmp_path)
    venv = tmp_path / "venv"
    env = clean_env(tmp_path)
    env.pop("DTRAIN_HOME")
    env["DTRAIN_CONFORMANCE"] = str(Path(os.environ.get("DTRAIN_CONFORMANCE", ROOT.parent / "shared" / "conformance"))
                                    .resolve())
    python = venv / "bin" / "python"
    uv("venv", "-q", "--python", sys.executable, venv, env=env)
    # dtrain's own dependencies at the lowest versions its ranges allow; the test tools as usual
    uv("pip", "install", "-q", "--python", python, "--resolution", "lowest-direct", src, env=env)
    uv("pip", "install", "-q", "--python", python, "pytest", "pytest-timeout", "pytest-xdist", "hypothesis", env=env)
    listed = run([sys.executable, "-m", "uv", "pip", "list", "--python", str(python)], env=env, timeout=120).stdout
    installed = dict(line.split()[:2] for line in listed.splitlines()[2:])
    lowest = lower_bounds()
    assert {"typer", "azure-ai-ml", "click", "requests"} <= set(lowest)
    # azure-core is also required by the newest azure-storage-* that azure-ai-ml pulls in, which may ask
    # for more than dtrain's own floor (AccessTokenInfo, and as_attribute_dict for azure-ai-ml 1.35)
    pulled_higher = {"azure-core"}
    from packaging.version import Version                # a pytest dependency

    off = {n: (installed.get(n), v) for n, v in lowest.items()
           if n not in pulled_higher and (n not in installed or Version(installed[n]) != Version(v))}
    assert off == {}, "installed, lower bound"

    # What the lowest versions can break, not the whole suite again (the suite itself ran in this run on the
    # newest versions): the fast tests of the code that calls the dependencies directly
    # (LOWEST_VERSIONS_TESTS) and the azure-ai-ml tests of LOWEST_VERSIONS_SDK (the SDK's surface, the bodies
    # it builds, the emulator end to end). The other emulator suites (retries, grids, metrics, job metadata,
    # progress) go through the same SDK calls. The training scripts need torch and TensorFlow, not dtrain's
    # ranges. Its time is the suite's critical path: it runs beside the rest.
    r = run([str(python), "-m", "pytest", "-q", "-m", "not slow or sdk", "-p", "no:cacheprovider", "-n", "3",
             *LOWEST_VERSIONS_TESTS, *LOWEST_VERSIONS_SDK], cwd=src, env=env, timeout=780)
    assert r.returncode == 0, r.stdout[-6000:]
    assert re.search(r"\b\d+ passed\b", r.stdout), r.stdout[-2000:]


# The test files that exercise dtrain's dependencies other than through the emulator, for the
# lowest-versions run above (their fast tests; it adds every `sdk` test): typer, click and rich (the CLI,
# its errors, annotations, grid tables), pyyaml (the spec loader with locations, --set, the REST body
# and YAML render), azure-ai-ml and azure-core without the emulator (the SDK adapter, REST parity with
# the SDK's own body, endpoint URLs, the upload guard), azure-identity (CI and GitHub OIDC credentials,
# workspace discovery), requests (log streaming), pathspec (ignore files, the code folder).
LOWEST_VERSIONS_TESTS = [f"tests/{name}.py" for name in (
    "test_cli", "test_validate", "test_validate_cli_hardening", "test_validate_ci_annotations", "test_validate_fuzz",
    "test_grid", "test_platforms", "test_rest_parity", "test_azure_same_spec", "test_azure_job_shape",
    "test_azure_sdk_adapter", "test_azure_endpoint_url", "test_azure_upload_guard", "test_ci_credentials",
    "test_github_oidc", "test_workspace_discovery", "test_log_streaming", "test_ignorefile", "test_code_folder",
)]


# The SDK at its lowest: the bodies it builds (conformance), the emulator's answers to its own calls, and the
# end-to-end paths through it (submit and render, resubmits, --wait, status/list/logs/cancel/wait,
# throttling, uploads, token refresh, sign-in and configuration errors). The other emulator tests count
# requests or check dtrain's own text over those same calls.
LOWEST_VERSIONS_SDK = ["tests/test_conformance.py", "tests/test_azure_emulator.py"] + [
    f"tests/test_azure_backend.py::test_{name}" for name in (
        "submit_prints_name_and_sends_what_render_shows", "same_name_resubmit_against_the_real_service_shapes",
        "submit_wait_exit_codes_and_every_line_once", "status_list_logs_cancel_and_wait",
        "submit_survives_throttling_errors_resets_and_slow_answers", "code_upload_refused_by_storage_ends_with_what_to_check",
        "an_input_upload_to_a_storage_host_that_does_not_resolve_fails_at_once",
        "expired_token_is_refreshed_from_the_token_file", "authentication_failure_exits_6_with_a_hint",
        "configuration_errors_exit_6")] + [
    # the compute's REST read, the Usages and VM sizes lists (capacity.py), in process: a few seconds
    "tests/test_capacity_azure.py::test_quota_limit_refuses_and_quota_in_use_warns"]

