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
