"""The job's environment and the workspace (issue 27), through the real azure-ai-ml SDK against the emulator
(in process): before an Azure submit, the inline environment's anonymous version (CliV2AnonymousEnvironment:
<the SDK's content hash>) is looked up and dtrain says whether Azure ML will build a new image; `validate
--env` reads a registered environment from the workspace and checks it as an inline one."""
from __future__ import annotations

import pytest
from fakes import run_main
from wheelhouse import make_wheel
from test_azure_backend import emu, emu_env, project  # noqa: F401  (fixtures)

from dtrain.backends.azure.image_build import anonymous_version

pytestmark = [pytest.mark.slow, pytest.mark.sdk]

NEW = "this submit will build a new image for the inline environment (CliV2AnonymousEnvironment:"
EXISTS = "the image exists: the inline environment (CliV2AnonymousEnvironment:"


def _env_gets(server):
    return server.requests_to(r"/environments/CliV2AnonymousEnvironment/versions/[0-9a-f]+$", "GET")


def test_submit_and_dry_run_say_whether_azure_builds_an_image(emu, project, capsys, monkeypatch):  # noqa: F811
    for k, v in emu_env(emu, project).items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(project)
    code, out, err = run_main(capsys, "submit", "job.yml", "--name", "dry", "--dry-run")
    assert code == 0 and NEW in err and "typically 5 to 15 minutes" in err and "command:" in out
    assert len(_env_gets(emu)) == 1 and not emu.requests_to(r"/jobs/[^/]+$", "PUT")

    code, out, err = run_main(capsys, "submit", "job.yml", "--name", "first")
    assert code == 0 and NEW in err, err
    registered = [v for (n, v) in emu.environments if n == "CliV2AnonymousEnvironment"]
    assert len(registered) == 1 and f"CliV2AnonymousEnvironment:{registered[0][:12]})" in err

    code, _, err = run_main(capsys, "submit", "job.yml", "--name", "second")
    assert code == 0 and EXISTS in err and NEW not in err
    code, _, err = run_main(capsys, "submit", "job.yml", "--name", "dry2", "--dry-run")
    assert code == 0 and EXISTS in err


def test_only_anonymous_environments_are_predicted():
    assert anonymous_version("azureml:CliV2AnonymousEnvironment:abc123") == "abc123"
    assert anonymous_version("azureml:my-env:3") is None and anonymous_version(None) is None


def test_validate_env_reads_a_registered_environment_from_the_workspace(emu, project, capsys,  # noqa: F811
                                                                         monkeypatch):
    for k, v in emu_env(emu, project).items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(project)
    wheels = project / "wheels"
    make_wheel(wheels, "torch", "2.0.0")
    emu.add_environment("train-env", "3", condaFile=f"dependencies:\n- python=3.11\n- pip\n- pip:\n  - --no-index\n"
                                                    f"  - --find-links {wheels}\n  - torch==2.0.0\n")
    (project / "src" / "train.py").write_text("import torch\nimport transformers\n")
    for ref, name in (("azureml:train-env:3", "a.yml"), ("azureml:train-env@latest", "b.yml"),
                      ("azureml:nope:1", "c.yml")):
        (project / name).write_text(f"command: python train.py\ncode: src\nenvironment: {ref}\ncompute: azureml:gpu\n")
    code, _, err = run_main(capsys, "validate", "--env", "a.yml", "b.yml", "c.yml")
    assert code == 2
    assert "a.yml:3:1: note: environment azureml:train-env:3 read from the workspace (version 3)" in err
    assert err.count("src/train.py:2: error: 'transformers' is imported") == 2 and "'torch'" not in err
    assert "c.yml:3:1: error: environment azureml:nope:1 does not exist in workspace" in err
