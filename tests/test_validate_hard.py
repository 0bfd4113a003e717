"""Validation hardening: what azure-ai-ml sends and the service refuses, overrides that are not YAML,
typed inputs, waived rules."""
import textwrap

import pytest

from dtrain.errors import SpecError
from dtrain.spec.validate import load_spec

BASE = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python train.py
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
"""


def test_input_paths_stay_relative_to_the_spec_with_an_environment_file(write):
    # The environment file's folder is where its own conda file lives, not where the job's inputs do.
    write("envs/env.yml", "image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04\n")
    write("data/train.csv", "x\n")
    p = write("job.yml", BASE.replace("azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest", "file:envs/env.yml")
              + textwrap.dedent("""\
                  inputs:
                    data: {type: uri_file, path: data/train.csv}
                  """))
    _, diags = load_spec(p)
    assert [d.code for d in diags] == []


def _errors(path, sets=None):
    with pytest.raises(SpecError) as ei:
        load_spec(path, sets)
    return [d for d in ei.value.diagnostics if d.severity == "error"]


def test_environment_variables_must_be_strings_with_line_and_hint(write):
    p = write("job.yml", BASE + "environment_variables:\n  A: 1\n  B: true\n  C: '1'\n  D: null\n")
    errs = _errors(p)
    assert [(d.code, d.line) for d in errs] == [("type", 5), ("type", 6)]
    assert errs[0].hint.startswith('quote it: A: "1"') and errs[1].hint.startswith('quote it: B: "true"')


def test_environment_variable_set_to_a_number_names_the_flag(write):
    (err,) = _errors(write("job.yml", BASE), ["environment_variables.X=1"])
    assert err.code == "type" and err.file == "--set environment_variables.X=1"


def test_a_secret_environment_variable_of_the_wrong_type_is_not_echoed(write):
    (err,) = _errors(write("job.yml", BASE + "environment_variables:\n  API_KEY: 123456789\n"))
    assert err.redact and "123456789" not in err.message + err.hint


@pytest.mark.parametrize("where,text", [
    ("resources.instance_count", "resources: {instance_count: 2147483648}\n"),
    ("distribution.process_count_per_instance",
     "distribution: {type: pytorch, process_count_per_instance: 2147483648}\n"),
])
def test_counts_beyond_int32_are_refused(write, where, text):
    (err,) = _errors(write("job.yml", BASE + text))
    assert err.code == "range" and err.dotted_path() == where and "32-bit" in err.hint
    assert load_spec(write("ok.yml", BASE + text), [f"{where}=2147483647"])  # the largest int32 passes


def test_instance_count_beyond_int32_through_set(write):
    (err,) = _errors(write("job.yml", BASE), ["resources.instance_count=2147483648"])
    assert err.file == "--set resources.instance_count=2147483648"


# --set values that are not YAML, and overrides that change a literal input's type

EPOCHS = BASE.replace("python train.py", "python train.py --epochs ${{inputs.epochs}}") + "inputs:\n  epochs: 2\n"


@pytest.mark.parametrize("value", ["[1", "{a: 1", "'x", '"x', "[1, {a: 2]"])
def test_set_value_that_is_not_yaml_is_an_error_naming_the_flag(write, value):
    (err,) = _errors(write("job.yml", EPOCHS), [f"inputs.epochs={value}"])
    assert err.code == "bad-override" and err.file == f"--set inputs.epochs={value}"
    assert "not valid YAML" in err.message


def test_parse_value_names_the_flag_it_is_given():
    from dtrain.errors import UsageError
    from dtrain.spec.overrides import parse_override, parse_value

    with pytest.raises(UsageError) as ei:
        parse_override("inputs.lr=[0.1", flag="--matrix")
    assert ei.value.message.startswith("--matrix 'inputs.lr=[0.1'") and ei.value.exit_code == 2
    assert parse_value("[1, 2]") == [1, 2] and parse_value("a [b") == "a [b"  # a plain string stays one
    assert parse_value("'[1'") == "[1"


def test_a_secret_set_value_that_is_not_yaml_is_not_echoed(write):
    (err,) = _errors(write("job.yml", BASE), ["environment_variables.API_KEY=[hf_secret"])
    assert "hf_secret" not in err.message + (err.file or "")


def test_override_changing_a_literal_inputs_type_warns(write):
    p = write("job.yml", EPOCHS)
    _, diags = load_spec(p, ["inputs.epochs=ten"])
    (w,) = diags
    assert w.code == "override-type" and w.file == "--set inputs.epochs=ten" and "an integer" in w.message
    assert load_spec(p, ["inputs.epochs=3"])[1] == []          # same type: quiet
    assert load_spec(p, ["inputs.epochs=2.5"])[1] == []        # a number still


def test_override_of_a_value_wrapped_literal_warns(write):
    p = write("job.yml", EPOCHS.replace("epochs: 2", "epochs: {value: true}"))
    (w,) = load_spec(p, ["inputs.epochs.value=yes please"])[1]
    assert w.code == "override-type" and "a boolean" in w.message


@pytest.mark.parametrize("t,default,hint", [
    ("integer", "2", "write `epochs: 2`"),
    ("integer", "x", "write `epochs: x` (the default is not an integer)"),
    ("boolean", "true", "write `epochs: true`"),
    ("number", "'0.1'", "write `epochs: 0.1` (the default is not a number)"),
])
def test_typed_inputs_are_a_components_and_refused_with_the_literal_to_write(write, t, default, hint):
    # azure-ai-ml's load_job refuses `type: integer` in a command job (test_rest_parity's typed_input)
    p = write("job.yml", EPOCHS.replace("epochs: 2", f"epochs: {{type: {t}, default: {default}}}"))
    (err,) = _errors(p)
    assert (err.code, err.line, err.hint) == ("enum", 5, hint)


def test_cli_validate_refuses_an_unclosed_set_value_and_warns_on_a_type_change(cli, write):
    p = write("job.yml", EPOCHS)
    r = cli("validate", p, "--set", "inputs.epochs=[1")
    assert r.returncode == 2 and "--set inputs.epochs=[1" in r.stderr and "bad-override" in r.stderr
    assert "Traceback" not in r.stderr
    r = cli("validate", p, "--set", "inputs.epochs=many")
    assert r.returncode == 0 and "override-type" in r.stderr
    assert cli("validate", p, "--strict", "--set", "inputs.epochs=many").returncode == 2


# Waiving a rule for one job: load_spec(..., allow={CODE})

OVERSUBSCRIBED = BASE + ("distribution: {type: pytorch, process_count_per_instance: 9}\n"
                         "resources: {instance_type: Standard_ND96isr_H100_v5}\n")


def test_a_waived_rule_is_a_warning_that_says_so(write):
    p = write("job.yml", OVERSUBSCRIBED)
    assert [d.code for d in _errors(p)] == ["gpu-oversubscribed"]
    spec, diags = load_spec(p, allow={"gpu-oversubscribed"})
    (w,) = diags
    assert (w.severity, w.code, w.line) == ("warning", "gpu-oversubscribed", 4)
    assert "waived by --allow gpu-oversubscribed" in w.message and spec.processes_per_node == 9


def test_waiving_one_rule_leaves_the_others_errors(write):
    p = write("job.yml", OVERSUBSCRIBED + "limits: {timeout: 0}\n")
    assert [d.code for d in _errors(p, None)] == ["gpu-oversubscribed", "range"]
    with pytest.raises(SpecError) as ei:
        load_spec(p, allow=["gpu-oversubscribed"])
    assert [d.code for d in ei.value.diagnostics if d.severity == "error"] == ["range"]


@pytest.mark.parametrize("code", ["type", "unknown-key", "undefined-ref", "no-such-rule"])
def test_rules_that_protect_the_body_cannot_be_waived(write, code):
    from dtrain.errors import UsageError

    with pytest.raises(UsageError) as ei:
        load_spec(write("job.yml", BASE), allow={code})
    assert code in ei.value.message and ei.value.exit_code == 2
    assert "gpu-oversubscribed" in ei.value.hint and "double-launch" in ei.value.hint
