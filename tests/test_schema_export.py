"""`dtrain schema`: JSON Schema draft-07 under dtrain's own $id, agreeing with `dtrain validate` on every
real Azure ML YAML of ../shared/conformance and on the shapes azure-ai-ml accepts."""
import json

import jsonschema
import pytest
import yaml

from conftest import CONFORMANCE
from dtrain.errors import SpecError
from dtrain.spec.schema import json_schema
from dtrain.spec.validate import load_spec

BASE = {"command": "python a.py", "environment": "azureml:env:1"}


@pytest.fixture(scope="module")
def validator():
    schema = json_schema()
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _schema_ok(validator, data) -> bool:
    return not list(validator.iter_errors(data))


def _validate_ok(path) -> bool:
    try:
        load_spec(path)
    except SpecError:
        return False
    return True


def test_cli_prints_draft_07_under_dtrains_own_id(cli):
    s = json.loads(cli("schema").stdout)
    assert s["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert s["$id"].startswith("urn:dtrain:") and "azureml" not in s["$id"]
    jsonschema.Draft7Validator.check_schema(s)


def _is_job_spec(data) -> bool:
    return isinstance(data, dict) and ("command" in data or "jobs" in data or "$schema" in data)


def _yamls():
    """Every job YAML of the conformance material (its conda files and data files are neither
    validate's nor the schema's business)."""
    root = CONFORMANCE / "azureml-examples"
    files = sorted(root.rglob("*.yml")) + sorted(root.rglob("*.yaml")) if root.is_dir() else []
    files = [p for p in files if _is_job_spec(yaml.safe_load(p.read_text()))]
    return [pytest.param(p, id=str(p.relative_to(root))) for p in files] or [
        pytest.param(None, id="conformance-material-missing")]


@pytest.mark.parametrize("path", _yamls())
def test_schema_agrees_with_validate_on_real_yamls(validator, path, conformance_dir):
    data = yaml.safe_load(path.read_text())
    ok = _validate_ok(path)
    if ok:  # everything validate accepts, the editor must not underline
        assert _schema_ok(validator, data), [e.message for e in validator.iter_errors(data)][:3]
    elif not _schema_ok(validator, data):
        return
    else:
        # validate refuses what no schema can see: files that do not exist, undefined ${{inputs.x}}
        with pytest.raises(SpecError) as ei:
            load_spec(path)
        codes = {d.code for d in ei.value.diagnostics if d.severity == "error"}
        assert codes <= {"missing-path", "undefined-ref"}, codes


@pytest.mark.parametrize("extra,ok", [
    ({"inputs": {"d": {"path": "azureml:data:1"}}}, True),                       # input without type
    ({"inputs": {"d": {"type": "uri_folder", "path": "azureml:d:1", "mode": "RO_MOUNT"}}}, True),
    ({"distribution": {"type": "PyTorch", "process_count_per_instance": 2}}, True),
    ({"identity": {"type": "AMLToken"}}, True),
    ({"identity": {"type": "UserIdentity"}}, True),
    ({"queue_settings": {"job_tier": "Spot", "priority": "High"}}, True),
    ({"services": {"s": {"type": "SSH", "nodes": "all"}, "c": {"type": "custom", "port": 1}}}, True),
    ({"outputs": {"o": None, "p": {"mode": "Upload"}}}, True),
    ({"limits": {"timeout": "3600"}}, True),
    ({"resources": {"instance_count": 2, "shm_size": "16g"}}, True),
    ({"tags": {"a": None}}, True),
    ({"distribution": {"type": "pytorchh"}}, False),
    ({"inputs": {"d": {"type": "uri_folder", "mode": "upload"}}}, False),
    ({"resources": {"shm_size": "16"}}, False),
    ({"resources": {"instance_count": 0}}, False),
    ({"name": "-bad name"}, False),
    ({"proces_count": 2}, False),
    ({"identity": {}}, False),
])
def test_schema_agrees_with_validate_on_shapes(validator, write, extra, ok):
    data = {**BASE, **extra}
    assert _validate_ok(write("job.yml", yaml.safe_dump(data))) is ok
    assert _schema_ok(validator, data) is ok
