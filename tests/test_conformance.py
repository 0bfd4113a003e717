"""dtrain against real Azure ML YAMLs (../shared/conformance) and what azure-ai-ml 1.35.2 says of them.

For every command job the SDK accepts, `dtrain render --format rest` must print the job body the SDK
builds; every spec it rejects dtrain rejects with a clear message (exit 2); pipelines and components
are named for what they are."""
import json

import pytest

from conftest import CONFORMANCE, cli_in_process as run_cli  # main() in process: 100 commands
from sdk_reference import sdk_job_document


def _cases():
    manifest = CONFORMANCE / "manifest.json"
    if not manifest.is_file():
        return [pytest.param(None, id="conformance-material-missing")]
    return [pytest.param(c, id=c["file"].split("cli/jobs/")[-1]) for c in json.loads(manifest.read_text())["cases"]]


@pytest.mark.sdk
@pytest.mark.slow   # each case loads the YAML through azure-ai-ml: about 10 s for all
@pytest.mark.parametrize("case", _cases())
def test_conformance_case(case, conformance_dir):
    path = conformance_dir / case["file"]
    if case["kind"] == "command-job" and case["sdk_loads"]:
        r = run_cli("render", path, "--format", "rest")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == sdk_job_document(path)  # the whole PUT body
        v = run_cli("validate", path)
        assert v.returncode == 0, v.stderr
    elif case["kind"] == "command-job":
        r = run_cli("validate", path)
        assert r.returncode == 2, r.stderr
        assert "error:" in r.stderr and "Traceback" not in r.stderr
        assert r.stderr.count("\n") < 30  # a clear message, not a dump
    else:
        r = run_cli("validate", path)
        assert r.returncode == 2
        kind = "pipeline job" if case["kind"] == "pipeline-job" else "command component"
        assert f"this is a {kind}, not a command job" in r.stderr


def test_manifest_counts(conformance_dir):
    cases = json.loads((conformance_dir / "manifest.json").read_text())["cases"]
    assert len(cases) == 50
    assert sum(c["sdk_loads"] for c in cases) == 47
