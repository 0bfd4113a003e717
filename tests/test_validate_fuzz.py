"""Whatever the YAML holds, validation ends in a result or a SpecError: never a crash (a traceback is
exit 70, a dtrain bug). Values of every shape are thrown at every key the schema knows."""
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtrain.errors import SpecError
from dtrain.spec.schema import field_rows
from dtrain.spec.validate import load_spec

KEYS = sorted({p.split(".")[0] for p, *_ in field_rows()} | {"process_count", "jobs", "dependencies"})
SUBKEYS = sorted({p.rsplit(".", 1)[-1] for p, *_ in field_rows()} | {"type", "path", "mode", "value"})

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=False),
                    st.sampled_from(["pytorch", "tensorflow", "mpi", "uri_folder", "local", "azureml:e:1",
                                     "${{inputs.x}}", "python t.py ${{inputs.a}} ${{outputs.b}}", "16g", "",
                                     "Standard_ND96isr_H100_v5", "file:env.yml", "torchrun --nproc 2 t.py"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(SUBKEYS), inner, max_size=4)), max_leaves=12)
random_specs = st.dictionaries(st.sampled_from(KEYS), values, max_size=8)
# Half of them start from a valid job, so the render path is exercised too.
valid_base = st.just({"command": "python t.py", "environment": "azureml:e:1"})
specs = st.one_of(random_specs, st.builds(lambda b, extra: {**b, **extra}, valid_base,
                                          st.dictionaries(st.sampled_from(KEYS), values, max_size=4)))


@pytest.mark.slow  # 400 generated specs
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs)
def test_validation_never_crashes(tmp_path, data):
    p = tmp_path / "job.yml"
    p.write_text(yaml.safe_dump(data))
    try:
        spec, _ = load_spec(p)
    except SpecError as exc:
        assert exc.diagnostics and all(d.message for d in exc.diagnostics)
        return
    # A spec that validates always renders.
    from dtrain.backends.azure.render import rest_document, to_yaml

    rest_document(spec)
    assert yaml.safe_load(to_yaml(spec)) is not None


def test_schema_and_semantic_errors_are_reported_together(tmp_path):
    p = tmp_path / "job.yml"
    p.write_text("command: python t.py ${{inputs.lr}}\nenvironment: azureml:e:1\ncomputee: x\n")
    try:
        load_spec(p)
    except SpecError as exc:
        codes = sorted(d.code for d in exc.diagnostics)
    assert codes == ["undefined-ref", "unknown-key"]
