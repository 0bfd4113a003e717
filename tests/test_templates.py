"""Templates and `dtrain init`: every template validates, scaffolds, and runs to completion locally."""
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from dtrain import templates as T

STUB = Path(__file__).resolve().parent / "stubs" / "train_stub.py"
NAMES = ["model-parallel", "mpi", "pytorch-ddp", "single-node", "tensorflow-multiworker",
         "tensorflow-parameter-server"]


def test_templates_lists_every_template(cli):
    r = cli("templates")
    assert r.returncode == 0
    assert [line.split()[0] for line in r.stdout.splitlines() if not line.startswith(" ")] == NAMES
    data = json.loads(cli("templates", "--output", "json").stdout)
    assert {d["name"] for d in data} == set(NAMES)
    assert all(d["summary"] and d["script"] for d in data)


def test_templates_say_what_each_needs_here_beyond_dtrain(cli):
    """The mpi template needs Open MPI's mpirun, the TensorFlow ones the tensorflow extra: said where they
    are listed, under each template's line, and in JSON."""
    lines = cli("templates").stdout.splitlines()
    needs = {lines[i].split()[0]: lines[i + 1].strip() for i in range(len(lines) - 1) if lines[i + 1].startswith(" ")}
    assert needs["mpi"] == ("needs here: the torch extra (pip install 'dtrain[torch]'); "
                            "Open MPI's mpirun (apt-get install openmpi-bin)")
    assert needs["tensorflow-multiworker"] == needs["tensorflow-parameter-server"] == \
        "needs here: the tensorflow extra (pip install 'dtrain[tensorflow]')"
    assert needs["pytorch-ddp"] == "needs here: the torch extra (pip install 'dtrain[torch]')"
    data = {d["name"]: d["needs"] for d in json.loads(cli("templates", "--output", "json").stdout)}
    assert data["mpi"][-1] == "Open MPI's mpirun (apt-get install openmpi-bin)"
    assert not any("mpirun" in n for name, ns in data.items() if name != "mpi" for n in ns)


@pytest.mark.parametrize("name", NAMES)
def test_template_validates_without_warnings(cli, name):
    r = cli("validate", T.TEMPLATES_DIR / f"{name}.yml", "--strict")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", NAMES)
def test_processes_match_gpus_of_the_size(name):
    from dtrain.spec import vmsizes
    from dtrain.spec.validate import load_spec

    spec, _ = load_spec(T.TEMPLATES_DIR / f"{name}.yml")
    size = vmsizes.lookup(spec.instance_type)
    assert size is not None
    if spec.distribution and spec.distribution.type in ("pytorch", "mpi"):
        assert spec.processes_per_node == size.gpus
    if spec.instance_count > 1:
        assert size.infiniband


def test_init_writes_a_spec_that_validates(cli, tmp_path):
    d = tmp_path / "proj"
    r = cli("init", d, "--template", "pytorch-ddp", "--instance-type", "Standard_NC48ads_A100_v4", "--nodes", "1")
    assert r.returncode == 0, r.stderr
    assert (d / "src" / "pytorch_ddp.py").is_file() and (d / "src" / "common.py").is_file()
    text = (d / "job.yml").read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    assert "# one per GPU" in text  # comments survive
    spec = yaml.safe_load(text)
    assert spec["code"] == "src"
    assert spec["distribution"]["process_count_per_instance"] == 2   # NC48ads_A100_v4 has 2 GPUs
    assert spec["resources"] == {"instance_count": 1, "instance_type": "Standard_NC48ads_A100_v4",
                                 "shm_size": "16g"}
    assert cli("validate", d / "job.yml", "--strict").returncode == 0


def test_init_refuses_to_overwrite_and_unknown_names(cli, tmp_path):
    assert cli("init", tmp_path, "-t", "single-node").returncode == 0
    r = cli("init", tmp_path, "-t", "single-node")
    assert r.returncode == 2 and "already exists" in r.stderr
    r = cli("init", tmp_path / "x", "-t", "pytorch-dpp")
    assert r.returncode == 2 and "did you mean 'pytorch-ddp'" in r.stderr


def test_init_comment_describes_the_chosen_size(cli, tmp_path):
    from dtrain.spec import vmsizes

    d = tmp_path / "p"
    r = cli("init", d, "-t", "pytorch-ddp", "--instance-type", "Standard_NC96ads_A100_v4", "--nodes", "4")
    assert r.returncode == 0, r.stderr
    (line,) = [l for l in (d / "job.yml").read_text().splitlines() if l.strip().startswith("instance_type:")]
    size = vmsizes.lookup("Standard_NC96ads_A100_v4")
    assert line.split("#", 1)[1].strip() == f"{size.gpus} x {size.gpu_model}, no InfiniBand"
    assert "H100" not in line and "InfiniBand NDR" not in line
    assert yaml.safe_load((d / "job.yml").read_text())["distribution"]["process_count_per_instance"] == size.gpus


def test_init_without_a_size_describes_the_templates_size_from_the_catalog(tmp_path):
    from dtrain import templates as t
    from dtrain.spec import vmsizes

    for tpl in t.all_templates():
        if not tpl.instance_type:
            continue
        text = t.render_init(tpl, None, None)
        (line,) = [l for l in text.splitlines() if l.strip().startswith("instance_type:")]
        assert line.split("#", 1)[1].strip() == t.size_comment(vmsizes.lookup(tpl.instance_type)), tpl.name


@pytest.mark.parametrize("size", ["Standard_ND96amsr_A100_v4", "Standard_NV6ads_A10_v5", "Standard_NC24rs_v3"])
def test_init_comment_comes_from_the_validators_catalog(tmp_path, size):
    from dtrain import templates as t
    from dtrain.spec import vmsizes

    s = vmsizes.lookup(size)
    text = t.render_init(t.get("mpi"), size, None)
    (line,) = [l for l in text.splitlines() if l.strip().startswith("instance_type:")]
    comment = line.split("#", 1)[1]
    assert s.gpu_model in comment and (("InfiniBand" in comment) == s.infiniband or "no InfiniBand" in comment)
    assert ("no InfiniBand" in comment) == (not s.infiniband)


@pytest.mark.parametrize("size", ["Standard_D4s_v3", "Standard_ND96isr_H100_v4"])
def test_init_accepts_what_validate_accepts(cli, tmp_path, size):
    # validate takes sizes outside the GPU catalog (CPU sizes, newer sizes) with a note; init agrees
    d = tmp_path / "p"
    r = cli("init", d, "-t", "mpi", "--instance-type", size)
    assert r.returncode == 0, r.stderr
    assert f"'{size}' is not a GPU size dtrain knows" in r.stderr
    if size.endswith("_v4"):
        assert "did you mean 'Standard_ND96isr_H100_v5'" in r.stderr
    spec = yaml.safe_load((d / "job.yml").read_text())
    assert spec["resources"]["instance_type"] == size
    assert spec["distribution"]["process_count_per_instance"] == 1
    assert cli("validate", d / "job.yml").returncode == 0


def _losses(text):
    first = re.search(r"first_loss=([\d.eE+-]+)", text)
    final = re.findall(r"final_loss=([\d.eE+-]+)", text)
    return (float(first.group(1)) if first else None), (float(final[-1]) if final else None)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.timeout(300)  # a full training run, allowed 240 s
def test_template_runs_locally_and_learns(cli, tmp_path, name):
    env = {"DTRAIN_HOME": str(tmp_path / "home")}
    r = cli("submit", T.TEMPLATES_DIR / f"{name}.yml", "--local", "--wait", env=env, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    first, final = _losses(r.stdout)
    assert first is not None and final is not None, r.stdout[-2000:]
    assert final < first * 0.8, (first, final)


@pytest.mark.slow
def test_scaffold_runs_locally_unchanged(cli, tmp_path):
    """The scaffold's own copy of the scripts runs (5 steps: that the template learns is
    test_template_runs_locally_and_learns[model-parallel])."""
    d = tmp_path / "proj"
    assert cli("init", d, "-t", "model-parallel").returncode == 0
    r = cli("submit", d / "job.yml", "--local", "--wait", "--set", "inputs.steps=5",
            env={"DTRAIN_HOME": str(tmp_path / "h")}, timeout=100)
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"final_loss=\S+ step=5\b", r.stdout), r.stdout[-2000:]


def stub_code(tmp_path, script: str):
    """A code folder whose `script` is tests/stubs/train_stub.py: the template's command line, outputs and
    distribution as shipped, without training (that is tests/test_training_scripts.py's)."""
    code = tmp_path / "stub-code"
    code.mkdir(exist_ok=True)
    shutil.copy(STUB, code / script)
    return code


@pytest.mark.slow
def test_a_new_job_resumes_from_the_last_checkpoint(cli, tmp_path):
    """Stop after a checkpoint, submit again with the same checkpoint output: training continues from
    that step. The output is a fixed datastore path, which local jobs share as Azure jobs do. The
    template's script is the stub (its own resumption: test_training_scripts.py)."""
    env = {"DTRAIN_HOME": str(tmp_path / "home")}
    template = T.TEMPLATES_DIR / "model-parallel.yml"
    ckpt = "outputs.checkpoints.path=azureml://datastores/workspaceblobstore/paths/ckpt/run1"
    code = f"code={stub_code(tmp_path, 'model_parallel.py')}"
    first = cli("submit", template, "--local", "--wait", "--set", code, "--set", ckpt, "--set", "inputs.epochs=1",
                env=env, timeout=120)
    assert first.returncode == 0, first.stderr[-2000:]
    steps_1 = int(re.findall(r"final_loss=\S+ step=(\d+)", first.stdout)[-1])
    assert steps_1 == 32                                  # 2048 samples / 64 a batch
    saved = tmp_path / "home" / "datastores" / "workspaceblobstore" / "ckpt" / "run1"
    assert (saved / f"ckpt_step{steps_1}").is_file()
    second = cli("submit", template, "--local", "--wait", "--set", code, "--set", ckpt, "--set", "inputs.epochs=2",
                 env=env, timeout=120)
    assert second.returncode == 0, second.stderr[-2000:]
    assert re.search(rf"resumed from step {steps_1}\b", second.stdout), second.stdout[-2000:]
    steps_2 = int(re.findall(r"final_loss=\S+ step=(\d+)", second.stdout)[-1])
    assert steps_2 == 2 * steps_1


def test_init_refuses_over_existing_scripts_and_writes_nothing(cli, tmp_path):
    from dtrain.errors import UsageError
    from dtrain.templates import init

    d = tmp_path / "proj"
    (d / "src").mkdir(parents=True)
    (d / "src" / "common.py").write_text("mine\n")
    r = cli("init", d, "-t", "single-node")
    assert r.returncode == 2 and str(d / "src" / "common.py") in r.stderr
    assert (d / "src" / "common.py").read_text() == "mine\n"
    assert sorted(p.name for p in d.rglob("*")) == ["common.py", "src"]    # no half template
    with pytest.raises(UsageError):
        init(d, "single-node")
    written = init(d, "single-node", force=True)
    assert (d / "src" / "common.py").read_text() != "mine\n" and d / "job.yml" in written


def test_init_with_a_folder_name_too_long_is_a_usage_error(cli, tmp_path):
    r = cli("init", tmp_path / ("x" * 300), "-t", "single-node")
    assert r.returncode == 2 and "too long" in r.stderr and "Traceback" not in r.stderr
