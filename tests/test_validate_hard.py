"""Validation hardening: what azure-ai-ml sends and the service refuses, overrides that are not YAML,
typed inputs, waived rules."""
import textwrap

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
