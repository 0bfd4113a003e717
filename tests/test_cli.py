"""The command line as a user meets it: exit codes, stdout vs stderr, no tracebacks, fast start."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[1] / "job_templates"

BASE = ("command: python train.py\nenvironment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest\n"
        "distribution:\n  type: pytorch\n  process_count_per_instance: 2\n")


def test_version_and_module_entry(cli):
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("dtrain ")


def test_help_documents_exit_codes(cli):
    r = cli("--help")
    assert r.returncode == 0
    for code in ("0 success", "1 job Failed", "2 invalid", "3 Canceled", "4 timed out", "5 infrastructure",
                 "6 authentication", "7 lost track", "70 internal error", "130 interrupted"):
        assert code in " ".join(r.stdout.split()), code


def test_startup_does_not_import_azure_sdk(write):
    p = write("job.yml", BASE)
    probe = ("import sys, runpy\n"
             "sys.argv = ['dtrain'] + sys.argv[1:]\n"
             "from dtrain.cli import main\n"
             "rc = main()\n"
             "loaded = sorted(m for m in sys.modules if m == 'azure' or m.startswith('azure.'))\n"
             "print('AZURE_MODULES=' + ','.join(loaded), file=sys.stderr)\n")
    for args in (["--help"], ["validate", str(p)], ["render", str(p)], ["schema"], ["templates"],
                 ["init", str(p.parent / "scaffold"), "--template", "pytorch-ddp"], ["submit", str(p), "--dry-run"]):
        r = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60)
        assert "AZURE_MODULES=\n" in r.stderr or r.stderr.rstrip().endswith("AZURE_MODULES="), (args, r.stderr)


def test_validate_ok_prints_on_stderr_only(cli, write):
    r = cli("validate", write("job.yml", BASE))
    assert r.returncode == 0 and r.stdout == "" and "ok" in r.stderr


def test_validate_errors_exit_2_with_location_and_source(cli, write):
    p = write("job.yml", BASE + "resources:\n  instance_cont: 2\n")
    r = cli("validate", p)
    assert r.returncode == 2
    assert f"{p}:7:3: error: unknown key 'instance_cont'" in r.stderr
    assert "instance_cont: 2" in r.stderr and "did you mean 'instance_count'" in r.stderr
    assert "Traceback" not in r.stderr


def test_validate_many_files_json(cli, write):
    good, bad = write("a.yml", BASE), write("b.yml", BASE + "limits: {timeout: x}\n")
    r = cli("validate", good, bad, "--output", "json")
    assert r.returncode == 2
    res = json.loads(r.stdout)
    assert [x["valid"] for x in res] == [True, False]
    assert res[1]["diagnostics"][0]["line"] == 6


def test_warnings_exit_0_and_strict_exits_2(cli, write):
    p = write("job.yml", BASE + "resources:\n  instance_type: Standard_ND96isr_H100_v5\n")
    r = cli("validate", p)
    assert r.returncode == 0 and "warning:" in r.stderr and "idle" in r.stderr
    assert cli("validate", p, "--strict").returncode == 2


def test_missing_file_is_a_usage_error(cli, tmp_path):
    r = cli("validate", tmp_path / "nope.yml")
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_bad_option_exit_2(cli, write):
    r = cli("render", write("job.yml", BASE), "--format", "xml")
    assert r.returncode == 2 and "--format must be yaml or rest" in r.stderr
    r = cli("validate", "--no-such-flag")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_render_yaml_round_trips_and_applies_set(cli, write, tmp_path):
    p = write("job.yml", BASE)
    r = cli("render", p, "--set", "resources.instance_count=3", "--name", "run_1")
    assert r.returncode == 0
    out = tmp_path / "rendered.yml"
    out.write_text(r.stdout)
    import yaml
    data = yaml.safe_load(r.stdout)
    assert data["resources"]["instance_count"] == 3 and data["name"] == "run_1"
    assert cli("validate", out).returncode == 0


def test_render_rest_is_json_on_stdout(cli, write):
    r = cli("render", write("job.yml", BASE), "--format", "rest")
    (body,) = json.loads(r.stdout).values()  # {"properties": {...}}: the whole PUT body
    assert list(json.loads(r.stdout)) == ["properties"]
    assert body["jobType"] == "Command"
    assert body["distribution"] == {"distributionType": "PyTorch", "processCountPerInstance": 2}


def test_schema_is_json_schema(cli):
    s = json.loads(cli("schema").stdout)
    assert s["type"] == "object" and "distribution" in s["properties"]
    tier = s["properties"]["queue_settings"]["properties"]["job_tier"]
    assert tier["anyOf"][0]["enum"][1] == "spot"  # completion offers the names; patterns admit Spot, SPOT


def test_set_without_equals_is_usage_error(cli, write):
    r = cli("render", write("job.yml", BASE), "--set", "resources.instance_count")
    assert r.returncode == 2 and "has no '='" in r.stderr


def test_unknown_job_without_workspace_exit_2(cli, tmp_path):
    r = cli("status", "no_such_job", env={"DTRAIN_HOME": str(tmp_path / "h")}, cwd=tmp_path)
    assert r.returncode == 2 and "no local job named" in r.stderr


def test_flags_that_would_do_nothing_are_usage_errors(cli, write, tmp_path):
    p = write("job.yml", BASE)
    env = {"DTRAIN_HOME": str(tmp_path / "h")}
    cases = [
        (["submit", p, "--timeout", "5"], "--timeout only applies with --wait"),
        (["submit", p, "-q"], "--quiet only applies with --wait"),
        (["submit", p, "--wait", "-q", "-o", "json"], "--quiet does nothing with --output json"),
        (["submit", p, "--input", "data=."], "--input only applies to local runs"),
        (["submit", p, "--local", "-w", "ws"], "--workspace name an Azure ML workspace"),
        (["render", p, "--input", "data=."], "--input only applies with --local"),
        (["render", p, "--local", "--format", "rest"], "--format does not apply with --local"),
        (["status", "x", "--local", "-g", "rg"], "--resource-group name an Azure ML workspace"),
        (["watch", "--local", "--once", "--interval", "1"], "--interval does nothing with --once"),
        (["watch", "--local", "--interval", "0"], "--interval must be a positive"),
        (["list", "--local", "--limit", "-3"], "--limit must be a positive number"),
        (["list", "--local", "--limit", "0"], "--limit must be a positive number"),
    ]
    for args, message in cases:
        r = cli(*args, env=env, cwd=tmp_path)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert r.stdout == "", args
    assert not (tmp_path / "h" / "jobs").exists()      # nothing was submitted


def test_f_means_follow_only(cli, write):
    r = cli("render", write("job.yml", BASE), "-f", "rest")
    assert r.returncode == 2 and "No such option: -f" in r.stderr


def test_every_command_takes_json_and_jsonl(cli, write, tmp_path):
    good = write("a.yml", BASE)
    env = {"DTRAIN_HOME": str(tmp_path / "h")}
    one = json.loads(cli("validate", good, "-o", "json").stdout)
    assert one["valid"] is True
    lines = cli("validate", good, good, "-o", "jsonl").stdout.splitlines()
    assert [json.loads(x)["valid"] for x in lines] == [True, True]
    assert len(json.loads(cli("templates", "-o", "json").stdout)) == len(cli("templates", "-o", "jsonl").stdout.splitlines())
    assert json.loads(cli("list", "--local", "-o", "json", env=env).stdout) == []
    r = cli("list", "--local", "-o", "jsonl", env=env)
    assert r.returncode == 0 and r.stdout == ""
    r = cli("logs", "x", "-o", "json", env=env)
    assert r.returncode == 2 and "jsonl" in r.stderr


def test_validate_json_reports_a_missing_file_as_invalid(cli, write, tmp_path):
    good = write("a.yml", BASE)
    r = cli("validate", good, tmp_path / "missing.yml", "-o", "json")
    assert r.returncode == 2
    res = json.loads(r.stdout)
    assert [x["valid"] for x in res] == [True, False]
    assert "no such file" in res[1]["diagnostics"][0]["message"]
    r = cli("validate", tmp_path / "missing.yml", "-o", "json")
    assert r.returncode == 2 and json.loads(r.stdout)["valid"] is False


def _complete(cli, tmp_path, shell, words, home):
    """Ask dtrain for candidates as the shell's completion script does (typer's _DTRAIN_COMPLETE)."""
    env = {"_DTRAIN_COMPLETE": f"complete_{shell}", "DTRAIN_HOME": str(home)}
    if shell == "bash":
        env.update(COMP_WORDS=words, COMP_CWORD=str(len(words.split()) - (0 if words.endswith(" ") else 1)))
    else:
        env.update(_TYPER_COMPLETE_ARGS=words, _TYPER_COMPLETE_FISH_ACTION="get-args")
    r = cli(env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_shell_completion_of_commands_flags_templates_and_local_jobs(cli, tmp_path):
    home = tmp_path / "home"
    for name in ("train_a1", "train_a2", "eval_b"):
        (home / "jobs" / name).mkdir(parents=True)
    assert _complete(cli, tmp_path, "bash", "dtrain st", home).split() == ["status"]
    assert sorted(_complete(cli, tmp_path, "bash", "dtrain logs train_", home).split()) == ["train_a1", "train_a2"]
    assert sorted(_complete(cli, tmp_path, "bash", "dtrain wait eval_b train_a", home).split()) == ["train_a1", "train_a2"]
    assert _complete(cli, tmp_path, "bash", "dtrain cancel e", home).split() == ["eval_b"]
    assert "--follow" in _complete(cli, tmp_path, "bash", "dtrain logs --f", home).split()
    assert _complete(cli, tmp_path, "bash", "dtrain init d -t pytorch", home).split() == ["pytorch-ddp"]
    zsh = _complete(cli, tmp_path, "zsh", "dtrain status train_a", home)
    assert "train_a1" in zsh and "train_a2" in zsh and "eval_b" not in zsh
    fish = _complete(cli, tmp_path, "fish", "dtrain init d -t mp", home)
    assert fish.split()[0] == "mpi"
    assert _complete(cli, tmp_path, "bash", "dtrain status x", tmp_path / "nowhere").split() == []


def test_show_completion_prints_each_shells_script(cli):
    for shell, marker in (("bash", "complete -o default -F"), ("zsh", "compdef"), ("fish", "complete --command dtrain")):
        # typer picks the shell from the process tree; its test switch takes it as a value instead
        r = cli("--show-completion", shell, env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
        assert r.returncode == 0 and "_DTRAIN_COMPLETE" in r.stdout and marker in r.stdout, (shell, r.stdout)


@pytest.mark.parametrize("template", ["pytorch-ddp", "tensorflow-parameter-server", "mpi"])
def test_render_local_twice_prints_the_same_plan(cli, tmp_path, template):
    env = {"DTRAIN_HOME": str(tmp_path / "home")}
    spec = TEMPLATES / f"{template}.yml"
    first, second = (cli("render", spec, "--local", env=env) for _ in range(2))
    assert first.returncode == second.returncode == 0, first.stderr
    assert first.stdout == second.stdout                    # ports and the generated name are placeholders
    plan = json.loads(first.stdout)
    assert plan["name"] == "<name, generated at submit>" and plan["ports"] == [] and plan["n_ports"] >= 1
    assert "<port 0, chosen at submit>" in first.stdout
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("local", [True, False])
def test_submit_dry_run_prints_what_render_prints_and_submits_nothing(cli, tmp_path, local):
    env = {"DTRAIN_HOME": str(tmp_path / "home")}
    spec = TEMPLATES / "pytorch-ddp.yml"
    flags = ["--name", "dry_1", "--set", "inputs.epochs=3"] + (["--local"] if local else [])
    rendered = cli("render", spec, *flags, env=env)
    dry = cli("submit", spec, *flags, "--dry-run", env=env)
    assert rendered.returncode == dry.returncode == 0, dry.stderr
    assert dry.stdout == rendered.stdout and dry.stdout.strip()
    assert not (tmp_path / "home").exists()                 # no job folder, nothing started
    if local:
        assert json.loads(dry.stdout)["name"] == "dry_1"


def test_submit_dry_run_of_a_local_compute_spec_is_render_local(cli, write, tmp_path):
    env = {"DTRAIN_HOME": str(tmp_path / "home")}
    p = write("job.yml", BASE + "compute: local\n")
    dry = cli("submit", p, "--dry-run", env=env)
    assert dry.returncode == 0 and dry.stdout == cli("render", p, "--local", env=env).stdout
    assert json.loads(dry.stdout)["backend"] == "local" and not (tmp_path / "home").exists()


@pytest.mark.parametrize("environment, named", [
    ("{image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04}",
     "the inline environment (image mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04)"),
    ("azureml:env@latest", "environment azureml:env@latest"),
    ("azureml://registries/azureml/environments/acpt-pytorch-2.2-cuda12.1/versions/1",
     "registry environment azureml://registries/azureml/environments/acpt-pytorch-2.2-cuda12.1/versions/1"),
])
def test_the_local_plan_names_the_environment_it_does_not_use(write, capsys, environment, named):
    from dtrain.cli import main

    p = write("job.yml", f"command: echo hi\nenvironment: {environment}\ncompute: local\n")
    assert main(["render", str(p), "--local"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert notes[0].startswith(f"{named} is not used locally (no Docker): the command runs here; python is ")
    assert "environment the" not in notes[0]


def test_submit_dry_run_refuses_flags_it_would_ignore(cli, write):
    r = cli("submit", write("job.yml", BASE), "--dry-run", "--wait")
    assert r.returncode == 2 and "--wait does nothing with --dry-run" in r.stderr and r.stdout == ""


def test_a_dtrain_bug_exits_70_with_one_line_and_debug_shows_the_traceback(write, monkeypatch, capsys):
    from dtrain.cli import main
    from dtrain.exitcodes import ExitCode
    from dtrain.spec import validate as validate_mod

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(validate_mod, "load_spec", boom)
    p = write("job.yml", BASE)
    assert main(["validate", str(p)]) == ExitCode.INTERNAL == 70
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: kaboom" in err and "dtrain bug" in err and "Traceback" not in err
    try:
        main(["--debug", "validate", str(p)])
    except RuntimeError as exc:  # --debug lets the bug through, with its traceback
        assert str(exc) == "kaboom"
    else:
        raise AssertionError("--debug swallowed the bug")
