"""Validation: every problem at once, with file:line, did-you-mean and a hint."""
import textwrap

import pytest

from dtrain.errors import SpecError
from dtrain.spec.validate import load_spec

BASE = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python train.py
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
"""


def errors_of(path, sets=None):
    with pytest.raises(SpecError) as ei:
        load_spec(path, sets)
    return [d for d in ei.value.diagnostics if d.severity == "error"]


def warnings_of(path, sets=None):
    _, diags = load_spec(path, sets)
    return [d for d in diags if d.severity == "warning"], [d for d in diags if d.severity == "note"]


def test_valid_minimal_spec(write):
    spec, diags = load_spec(write("job.yml", BASE))
    assert diags == []
    assert spec.command == "python train.py"
    assert spec.instance_count == 1 and spec.processes_per_node == 1


def test_all_problems_reported_at_once_with_lines(write):
    p = write("job.yml", BASE + textwrap.dedent("""\
        distribution:
          type: pytorch
          proces_count_per_instance: 2
        resources:
          instance_count: true
          shm_size: 16
        queue_settings:
          job_tier: spott
        limits:
          timeout: -5
        """))
    errs = errors_of(p)
    by_code = {(d.code, d.line) for d in errs}
    assert ("unknown-key", 6) in by_code
    assert ("type", 8) in by_code      # bool is not an integer
    assert ("type", 9) in by_code      # shm_size must be a string like 16g
    assert ("enum", 11) in by_code
    assert ("range", 13) in by_code
    unknown = next(d for d in errs if d.code == "unknown-key")
    assert "process_count_per_instance" in unknown.hint
    assert unknown.file == str(p)
    spot = next(d for d in errs if d.code == "enum")
    assert "spot" in spot.hint


def test_preview_keys_name_todays_key(write):
    p = write("job.yml", BASE + textwrap.dedent("""\
        compute:
          target: azureml:gpu-cluster
          instance_count: 2
        distribution:
          type: pytorch
          process_count: 4
        """))
    errs = errors_of(p)
    msgs = " ".join(d.message + " " + (d.hint or "") for d in errs)
    assert "process_count_per_instance" in msgs
    assert "resources" in msgs and "instance_count" in msgs
    assert {d.line for d in errs} == {4, 9}


def test_undefined_input_and_output_refs(write):
    p = write("job.yml", BASE.replace("python train.py",
              "python train.py --lr ${{inputs.learning_rate}} --out ${{outputs.model}}") +
              "inputs:\n  learning_rat: 0.1\noutputs:\n  models:\n    type: uri_folder\n")
    errs = errors_of(p)
    assert len(errs) == 2
    assert all(d.code == "undefined-ref" and d.line == 2 for d in errs)
    assert "learning_rat" in errs[0].hint
    assert "models" in errs[1].hint


def test_missing_code_folder(write):
    p = write("job.yml", BASE + "code: ./src\n")
    (err,) = errors_of(p)
    assert err.code == "missing-path" and err.line == 4


def test_job_name_rules(write):
    (err,) = errors_of(write("job.yml", BASE + "name: -my job\n"))
    assert err.code == "format" and "job name" in err.message.replace("name '", "job name '")


@pytest.mark.parametrize("text,code", [
    ("", "empty"),
    ("# only a comment\n", "empty"),
    ("- a\n- b\n", "not-mapping"),
    ("just a string\n", "not-mapping"),
    ("a: [1, 2\n", "yaml-syntax"),
])
def test_unusable_files(write, text, code):
    (err,) = errors_of(write("job.yml", text))
    assert err.code == code
    assert err.hint or code == "yaml-syntax"


def test_binary_file(tmp_path):
    p = tmp_path / "job.yml"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (err,) = errors_of(p)
    assert err.code == "binary"


def test_duplicate_keys_with_different_values_are_an_error_naming_both_lines(write):
    errs = errors_of(write("job.yml", BASE + "command: python other.py\n"))
    (dup,) = [d for d in errs if d.code == "duplicate-key"]
    assert dup.line == 4 and "line 2" in dup.message
    assert "'python train.py'" in dup.message and "'python other.py'" in dup.message


def test_duplicate_keys_with_equal_values_are_a_warning(write):
    # azureml-examples' dask/nyctaxi job.yml repeated this block; azure-ai-ml accepts it
    text = BASE + "resources:\n  instance_count: 4\nresources:\n  instance_count: 4\n"
    spec, diags = load_spec(write("job.yml", text))
    assert spec.instance_count == 4
    (dup,) = diags
    assert (dup.severity, dup.code, dup.line) == ("warning", "duplicate-key", 6)


def test_duplicate_secret_keys_do_not_show_their_values(write):
    text = BASE + "environment_variables:\n  DB_PASSWORD: s3cr3t-one\n  DB_PASSWORD: s3cr3t-two\n"
    (dup,) = [d for d in errors_of(write("job.yml", text)) if d.code == "duplicate-key"]
    assert "s3cr3t" not in dup.message


def test_deep_nesting_refused(write):
    text = BASE + "tags:\n  a: " + "[" * 200 + "]" * 200 + "\n"
    (err,) = errors_of(write("job.yml", text))
    assert err.code == "too-complex"


@pytest.mark.parametrize("opening", ["[", "{a: ", "- "])
def test_nesting_deep_enough_to_overflow_the_parser_is_refused(write, opening):
    # 30,000 levels overflowed libyaml's recursive composer (a segfault) before any check could run
    closing = {"[": "]", "{a: ": "}", "- ": ""}[opening]
    body = opening * 30000 + "x" + closing * 30000
    text = BASE + ("tags:\n  " + body if opening == "- " else "tags: " + body) + "\n"
    (err,) = errors_of(write("job.yml", text))
    assert err.code == "too-complex" and err.line == (5 if opening == "- " else 4)


def test_deep_set_values_and_paths_are_usage_errors(write):
    from dtrain.errors import UsageError

    p = write("job.yml", BASE)
    for bad in ["tags.a=" + "[" * 30000, "tags" + ".a" * 3000 + "=1"]:
        with pytest.raises(UsageError) as ei:
            load_spec(p, [bad])
        assert ei.value.exit_code == 2 and "levels" in ei.value.message


def test_alias_bomb_is_fast_and_refused(write):
    import time
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i-1}"] * 10) + "]")
    p = write("bomb.yml", BASE + "\n".join(lines) + "\n")
    t = time.perf_counter()
    (err,) = errors_of(p)
    assert err.code == "too-complex"
    assert time.perf_counter() - t < 5  # a guard against a hang, not a benchmark


def test_torchrun_with_multiple_processes_is_an_error(write):
    p = write("job.yml", BASE.replace("python train.py", "torchrun --nproc_per_node 4 train.py") +
              "distribution:\n  type: pytorch\n  process_count_per_instance: 4\n")
    (err,) = errors_of(p)
    assert err.code == "double-launch" and err.line == 2


def test_torchrun_with_one_process_is_fine(write):
    p = write("job.yml", BASE.replace("python train.py", "torchrun --nproc_per_node 4 train.py") +
              "distribution:\n  type: pytorch\n  process_count_per_instance: 1\n")
    spec, diags = load_spec(p)   # torchrun starts the 4 processes itself: Azure ML starts one per node
    assert diags == [] and spec.processes_per_node == 1
    assert spec.command == "torchrun --nproc_per_node 4 train.py"


def test_more_processes_than_gpus_is_an_error(write):
    p = write("job.yml", BASE + "distribution:\n  type: pytorch\n  process_count_per_instance: 8\n"
              "resources:\n  instance_type: Standard_NC24ads_A100_v4\n")
    (err,) = errors_of(p)
    assert err.code == "gpu-oversubscribed" and "process_count_per_instance: 1" in err.hint
    assert err.line == 6


def test_fewer_processes_than_gpus_warns(write):
    p = write("job.yml", BASE + "distribution:\n  type: pytorch\n  process_count_per_instance: 2\n"
              "resources:\n  instance_type: Standard_ND96isr_H100_v5\n  instance_count: 2\n")
    warns, _ = warnings_of(p)
    assert [w.code for w in warns] == ["idle-gpus"]
    assert "8" in warns[0].hint


def test_multinode_without_infiniband_warns(write):
    p = write("job.yml", BASE + "distribution:\n  type: pytorch\n  process_count_per_instance: 4\n"
              "resources:\n  instance_type: Standard_NC64as_T4_v3\n  instance_count: 4\n")
    warns, _ = warnings_of(p)
    assert [w.code for w in warns] == ["no-infiniband"]


def test_unknown_size_is_a_note_with_suggestion(write):
    p = write("job.yml", BASE + "resources:\n  instance_type: Standard_ND96isr_H100_v4\n")
    warns, notes = warnings_of(p)
    assert warns == [] and notes[0].code == "unknown-size"
    assert "Standard_ND96isr_H100_v5" in notes[0].hint


def test_modes_per_type(write):
    p = write("job.yml", BASE + "inputs:\n  d:\n    type: uri_file\n    path: azureml:x:1\n    mode: eval_mount\n"
              "outputs:\n  o:\n    type: uri_folder\n    mode: download\n")
    errs = errors_of(p)
    assert {d.code for d in errs} == {"enum"} and {d.line for d in errs} == {8, 12}


def test_service_and_identity_enums(write):
    p = write("job.yml", BASE + "identity:\n  type: user_identiy\nservices:\n  s:\n    type: ssh\n    nodes: some\n")
    errs = errors_of(p)
    assert any("user_identity" in (d.hint or "") for d in errs)
    assert any(d.path == ("services", "s", "nodes") for d in errs)


def test_set_overrides_apply_and_are_validated(write):
    p = write("job.yml", BASE + "resources:\n  instance_count: 1\n")
    spec, _ = load_spec(p, ["resources.instance_count=4", "distribution={type: pytorch}"])
    assert spec.instance_count == 4 and spec.distribution.type == "pytorch"
    errs = errors_of(p, ["resources.instance_count=zero"])
    assert errs[0].file.startswith("--set resources.instance_count")


def test_not_a_command_job(conformance_dir):
    pipeline = next(conformance_dir.glob("azureml-examples/cli/jobs/pipelines/*/pipeline.yml"))
    (err,) = errors_of(pipeline)
    assert err.code == "not-command-job" and "pipeline job" in err.message


def test_integer_as_string_is_accepted_like_the_sdk(write):
    spec, diags = load_spec(write("job.yml", BASE + "limits:\n  timeout: '3600'\n"))
    assert spec.timeout == 3600
    assert [d.code for d in diags] == ["coerced"]


def test_secret_like_env_var_warns(write):
    warns, _ = warnings_of(write("job.yml", BASE + "environment_variables:\n  HF_TOKEN: hf_abc\n"))
    assert [w.code for w in warns] == ["secret"]


def test_shm_size_without_unit_gets_a_hint_that_validates(write):
    (err,) = errors_of(write("job.yml", BASE + "resources:\n  shm_size: 16\n"))
    assert "16g" in err.hint and "quote" not in err.hint
    (err,) = errors_of(write("quoted.yml", BASE + "resources:\n  shm_size: '16'\n"))
    assert "write 16g" in err.hint
    spec, diags = load_spec(write("fixed.yml", BASE + "resources:\n  shm_size: 16g\n"))
    assert diags == [] and spec.resources["shm_size"] == "16g"


def test_long_shallow_spec_loads_through_the_depth_guarded_composer(write):
    # 2,500 lines lift the cheap depth bound over the C composer's safe limit: the Python composer
    # (with its depth guard) must build exactly what the fast path builds
    from dtrain.spec import yamlload

    lines = "".join(f"  V{i}: '{i}'\n" for i in range(2500))
    text = BASE + "environment_variables:\n" + lines
    assert yamlload._depth_bound(text) >= yamlload._C_COMPOSER_SAFE_DEPTH
    spec, diags = load_spec(write("job.yml", text))
    assert diags == [] and spec.environment_variables["V2499"] == "2499"
    assert spec.locations[("environment_variables", "V2499")] == (2504, 3)
