"""The spec commands on hostile or careless input, as real processes: exit codes, and what reaches the terminal."""
import pytest

BASE = "command: python train.py\nenvironment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest\n"
# Real-looking: the shape of a Hugging Face token and an Azure storage key.
HF_TOKEN = "hf_kTqXzVbNwPmLrYsJdCfHgAeUiOo1234567"
STORAGE_KEY = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6MDEyMw=="


@pytest.mark.parametrize("command", [["validate"], ["render"], ["render", "--format", "rest"]])
def test_secret_warning_names_the_key_never_the_value(cli, write, command):
    p = write("job.yml", BASE + f"environment_variables:\n  HF_TOKEN: {HF_TOKEN}\n")
    r = cli(*command, p, "--set", f"environment_variables.AZURE_STORAGE_ACCESS_KEY={STORAGE_KEY}")
    assert r.returncode == 0, r.stderr
    assert "HF_TOKEN" in r.stderr and "AZURE_STORAGE_ACCESS_KEY" in r.stderr
    assert HF_TOKEN not in r.stderr and STORAGE_KEY not in r.stderr


def test_a_secret_set_with_a_wrong_type_is_not_echoed(cli, write):
    r = cli("validate", write("job.yml", BASE), "--set", f"environment_variables.API_KEY=[{HF_TOKEN}]")
    assert r.returncode == 2 and "--set environment_variables.API_KEY=***" in r.stderr
    assert HF_TOKEN not in r.stderr


@pytest.mark.parametrize("command", ["validate", "render", "submit"])
def test_30000_nested_brackets_exit_2_with_a_message(cli, write, command, tmp_path):
    p = write("job.yml", BASE + "tags: " + "[" * 30000 + "]" * 30000 + "\n")
    r = cli(command, p, env={"DTRAIN_HOME": str(tmp_path / "home")})
    assert r.returncode == 2, r.stderr[-2000:]
    assert "nests deeper than 40 levels" in r.stderr


def test_deep_nesting_through_set_exits_2(cli, write):
    p = write("job.yml", BASE)
    r = cli("validate", p, "--set", "tags.a=" + "[" * 30000)
    assert r.returncode == 2 and "nests deeper" in r.stderr
    r = cli("render", p, "--set", "tags" + ".a" * 3000 + "=1")
    assert r.returncode == 2 and "levels deep" in r.stderr


def test_equal_duplicate_keys_warn_and_strict_refuses(cli, write):
    p = write("job.yml", BASE + "resources:\n  instance_count: 4\nresources:\n  instance_count: 4\n")
    assert cli("render", p).returncode == 0
    r = cli("validate", p)
    assert r.returncode == 0 and "duplicate key 'resources'" in r.stderr
    assert cli("validate", "--strict", p).returncode == 2
