"""Local backend, no processes started: plans (the Azure ML environment of every process), inputs and
outputs, ignore files, names, state files, log tailing. Helpers here are shared by the other
test_local_*.py files."""
from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from dtrain.backends.base import SubmitOptions
from dtrain.backends.local import LocalBackend
from dtrain.backends.local import env as lenv
from dtrain.backends.local.plan import NAME_PLACEHOLDER, LocalPlan
from dtrain.backends.local.logs import FileTail
from dtrain.backends.names import generate_name
from dtrain.backends.local.store import atomic_write_json, read_json
from dtrain.codefiles import code_files, copy_files
from dtrain.errors import DtrainError, UsageError
from dtrain.exitcodes import ExitCode
from dtrain.spec.validate import load_spec


# --- helpers (imported by the other local test files) ---------------------------------------------------

def make_spec(tmp_path: Path, body: str, *, code: dict | None = None, name: str = "job.yml"):
    """Write a spec (and optional code files) under tmp_path and load it. Returns the JobSpec."""
    if code is not None:
        for rel, text in code.items():
            p = tmp_path / "src" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    head = "environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest\ncompute: local\n"
    if code is not None:
        head += "code: src\n"
    path = tmp_path / name
    path.write_text(head + body)
    spec, _ = load_spec(path)
    return spec


def dist_body(kind: str, nodes: int, ppn: int = 1, workers: int | None = None, ps: int = 0,
              command: str = "true") -> str:
    lines = [f"command: {json.dumps(command)}", f"resources: {{instance_count: {nodes}}}"]
    if kind == "pytorch" or kind == "mpi":
        lines.append(f"distribution: {{type: {kind}, process_count_per_instance: {ppn}}}")
    elif kind == "tensorflow":
        extra = f", worker_count: {workers}" if workers else ""
        lines.append(f"distribution: {{type: tensorflow, parameter_server_count: {ps}{extra}}}")
    return "\n".join(lines) + "\n"


def envs_of(plan) -> list[dict]:
    return [p["env"] for p in plan.to_dict()["processes"]]


# --- PyTorch ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("nodes,ppn", [(1, 1), (1, 2), (2, 2)])
def test_pytorch_env_per_process(tmp_path, dtrain_home, nodes, ppn):
    spec = make_spec(tmp_path, dist_body("pytorch", nodes, ppn))
    plan = LocalBackend().plan(spec, SubmitOptions(name="pt"))
    envs = envs_of(plan)
    assert len(envs) == nodes * ppn
    assert sorted(int(e["RANK"]) for e in envs) == list(range(nodes * ppn))
    assert {e["MASTER_ADDR"] for e in envs} == {"127.0.0.1"}
    assert {e["MASTER_PORT"] for e in envs} == {lenv.PORT_TEMPLATE.format(0)} == {"<port 0, chosen at submit>"}
    bound = envs_of(plan.bind([41234]))
    assert {e["MASTER_PORT"] for e in bound} == {"41234"} and plan.port_names() == ["MASTER_PORT"]
    for i, e in enumerate(envs):
        assert e["WORLD_SIZE"] == str(nodes * ppn)
        assert e["RANK"] == str(i)
        assert e["LOCAL_RANK"] == str(i % ppn)
        assert e["NODE_RANK"] == str(i // ppn)
        assert e["AZ_BATCHAI_TASK_INDEX"] == str(i // ppn)
        assert e["AZUREML_NODE_COUNT"] == str(nodes)
        assert e["AZUREML_RUN_ID"] == "pt"
        assert "TF_CONFIG" not in e and "OMPI_COMM_WORLD_RANK" not in e
    procs = plan.to_dict()["processes"]
    assert [p["log"] for p in procs] == [f"user_logs/std_log_process_{i:02d}.txt" for i in range(nodes * ppn)]
    assert all(p["argv"] == ["bash", "-c", "true"] for p in procs)
    assert plan.nodes == nodes and plan.processes_per_node == ppn


def test_plan_is_pure_and_stable(tmp_path, dtrain_home):
    spec = make_spec(tmp_path, dist_body("pytorch", 2, 2))
    b = LocalBackend()
    p1, p2 = b.plan(spec, SubmitOptions(name="same")), b.plan(spec, SubmitOptions(name="same"))
    assert not dtrain_home.exists()                        # nothing written
    assert p1.to_dict() == p2.to_dict() and p1.plan_hash() == p2.plan_hash()
    assert p1.ports == [] and not p1.bound
    assert json.loads(json.dumps(p1.to_dict())) == p1.to_dict()
    assert p1.to_dict()["backend"] == "local"
    # the ports a submit picks do not change the job's identity, and the plan round-trips through its type
    ran = p1.bind([5000])
    assert ran.bound and ran.ports == [5000] and ran.plan_hash() != p1.plan_hash()
    assert LocalPlan.from_dict(json.loads(json.dumps(ran.to_dict()))).to_dict() == ran.to_dict()
    assert LocalPlan.from_dict(p1.to_dict()).plan_hash() == p1.plan_hash()


class _Forbidden(Exception):
    pass


def _forbid(*a, **k):
    raise _Forbidden("building a plan must not open sockets or start processes")


@pytest.mark.parametrize("kind,nodes,ppn,ps", [("pytorch", 2, 2, 0), ("tensorflow", 2, 1, 1), ("mpi", 2, 2, 0),
                                               ("none", 2, 1, 0)])
def test_building_a_plan_opens_no_socket_and_starts_no_process(tmp_path, dtrain_home, monkeypatch,
                                                               kind, nodes, ppn, ps):
    import socket
    import subprocess

    spec = make_spec(tmp_path, dist_body(kind, nodes, ppn, ps=ps))
    for mod, attr in ((socket, "socket"), (socket, "create_connection"), (subprocess, "run"),
                      (subprocess, "Popen"), (subprocess, "check_output"), (os, "system"), (os, "fork")):
        monkeypatch.setattr(mod, attr, _forbid)
    p1 = LocalBackend().plan(spec, SubmitOptions())
    p2 = LocalBackend().plan(spec, SubmitOptions())
    assert json.dumps(p1.to_dict()) == json.dumps(p2.to_dict())     # generated name included: a placeholder
    assert p1.name == NAME_PLACEHOLDER and not dtrain_home.exists()
    assert p1.n_ports == (0 if kind == "none" else len(p1.port_names())) and p1.ports == []


def test_submit_names_the_plan_and_fills_its_ports(tmp_path, dtrain_home):
    spec = make_spec(tmp_path, dist_body("tensorflow", 2, workers=2, ps=1))
    plan = LocalBackend().plan(spec, SubmitOptions())
    assert plan.port_names() == ["worker 0", "worker 1", "ps 0"]
    named = plan.named("tf_job_1")
    text = json.dumps(named.to_dict())
    assert NAME_PLACEHOLDER not in text and "tf_job_1" in text
    assert named.job_dir == str(dtrain_home / "jobs" / "tf_job_1")
    assert all(p.env["AZUREML_RUN_ID"] == "tf_job_1" for p in named.processes)
    ran = named.bind([7001, 7002, 7003])
    configs = [json.loads(p.env["TF_CONFIG"]) for p in ran.processes]
    assert configs[0]["cluster"] == {"worker": ["127.0.0.1:7001", "127.0.0.1:7002"], "ps": ["127.0.0.1:7003"]}
    assert "chosen at submit" not in json.dumps(ran.to_dict())
    with pytest.raises(UsageError):
        plan.named("bad name")


# --- TensorFlow -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("nodes,workers,ps", [(2, None, 0), (1, 3, 0), (2, 2, 1), (3, 2, 2)])
def test_tensorflow_tf_config(tmp_path, dtrain_home, nodes, workers, ps):
    spec = make_spec(tmp_path, dist_body("tensorflow", nodes, workers=workers, ps=ps))
    plan = LocalBackend().plan(spec, SubmitOptions(name="tf"))
    envs = envs_of(plan)
    n_workers = workers or nodes
    assert len(envs) == n_workers + ps
    configs = [json.loads(e["TF_CONFIG"]) for e in envs]
    cluster = configs[0]["cluster"]
    assert all(c["cluster"] == cluster for c in configs)
    assert len(cluster["worker"]) == n_workers
    assert len(cluster.get("ps", [])) == ps
    addrs = cluster["worker"] + cluster.get("ps", [])
    assert len(set(addrs)) == len(addrs) and all(a.startswith("127.0.0.1:") for a in addrs)
    tasks = [(c["task"]["type"], c["task"]["index"]) for c in configs]
    assert tasks == [("worker", i) for i in range(n_workers)] + [("ps", i) for i in range(ps)]
    assert all(c["environment"] == "cloud" for c in configs)
    for e in envs:
        assert "RANK" not in e and "MASTER_ADDR" not in e


# --- MPI --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("nodes,ppn", [(1, 1), (1, 2), (2, 2)])
def test_mpi_plan_runs_mpirun(tmp_path, dtrain_home, nodes, ppn):
    spec = make_spec(tmp_path, dist_body("mpi", nodes, ppn, command="python train.py"))
    plan = LocalBackend().plan(spec, SubmitOptions(name="mp"))
    d = plan.to_dict()
    assert len(d["processes"]) == 1
    launcher = d["processes"][0]
    argv = launcher["argv"]
    assert argv[0] == "mpirun"                             # submit puts the path of the mpirun it checked
    assert "--oversubscribe" in argv and argv[argv.index("-np") + 1] == str(nodes * ppn)
    if os.geteuid() == 0:
        assert "--allow-run-as-root" in argv
    assert argv[-1] == "python train.py" and argv[-3] == str(ppn)
    assert launcher["env"]["AZ_BATCH_MASTER_NODE"].startswith("127.0.0.1:")
    assert [r["rank"] for r in d["ranks"]] == list(range(nodes * ppn))
    assert [r["node"] for r in d["ranks"]] == [i // ppn for i in range(nodes * ppn)]


def test_mpi_missing_mpirun_is_a_clear_error_at_submit(tmp_path, dtrain_home, monkeypatch):
    spec = make_spec(tmp_path, dist_body("mpi", 1, 2))
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    b = LocalBackend()
    plan = b.plan(spec, SubmitOptions(name="mp"))          # the plan does not look for mpirun
    with pytest.raises(DtrainError) as exc:
        b.submit(plan)
    assert exc.value.exit_code == ExitCode.INVALID
    assert "mpirun" in exc.value.message and "apt-get install -y openmpi-bin" in exc.value.hint
    assert not dtrain_home.exists()                        # nothing written, nothing started


def test_mpi_that_is_not_open_mpi_is_refused_at_submit(tmp_path, dtrain_home, monkeypatch):
    fake = tmp_path / "bin" / "mpirun"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'HYDRA build details: MPICH'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    b = LocalBackend()
    plan = b.plan(make_spec(tmp_path, dist_body("mpi", 1, 2)), SubmitOptions(name="mp"))
    with pytest.raises(DtrainError) as exc:
        b.submit(plan)
    assert exc.value.exit_code == ExitCode.INVALID and "Open MPI" in exc.value.message
    assert not dtrain_home.exists()


def test_ray_is_refused(tmp_path, dtrain_home):
    spec = make_spec(tmp_path, "command: 'true'\ndistribution: {type: ray}\n")
    with pytest.raises(UsageError):
        LocalBackend().plan(spec, SubmitOptions(name="r"))


def test_no_distribution_runs_once_per_node(tmp_path, dtrain_home):
    spec = make_spec(tmp_path, "command: 'true'\nresources: {instance_count: 2}\n")
    envs = envs_of(LocalBackend().plan(spec, SubmitOptions(name="plain")))
    assert [e["AZ_BATCHAI_TASK_INDEX"] for e in envs] == ["0", "1"]
    assert all("RANK" not in e for e in envs)


# --- inputs, outputs, environment --------------------------------------------------------------------

def test_inputs_outputs_substitution(tmp_path, dtrain_home):
    (tmp_path / "data").mkdir()
    (tmp_path / "one.csv").write_text("x\n")
    spec = make_spec(tmp_path, """command: >-
  echo ${{inputs.lr}} ${{inputs.data}} ${{inputs.file}} ${{inputs.flag}} ${{outputs.model}}
inputs:
  lr: 0.01
  flag: true
  data: {type: uri_folder, path: data}
  file: {type: uri_file, path: ./one.csv}
outputs:
  model: {type: uri_folder}
environment_variables:
  DATA_DIR: ${{inputs.data}}
  PLAIN: "x"
""")
    plan = LocalBackend().plan(spec, SubmitOptions(name="io"))
    job = dtrain_home.resolve() / "jobs" / "io"
    want = f"echo 0.01 {tmp_path / 'data'} {tmp_path / 'one.csv'} True {job / 'outputs' / 'model'}"
    assert plan.command.strip() == want
    e = envs_of(plan)[0]
    assert e["AZURE_ML_INPUT_data"] == str(tmp_path / "data")
    assert e["AZURE_ML_INPUT_lr"] == "0.01"
    assert e["AZURE_ML_OUTPUT_model"] == str(job / "outputs" / "model")
    assert e["DATA_DIR"] == str(tmp_path / "data") and e["PLAIN"] == "x"
    assert plan.to_dict()["processes"][0]["cwd"] == str(job / "snapshot")
    assert len(plan.notes) == 1 and "not used locally" in plan.notes[0] and "python" in plan.notes[0]


@pytest.mark.parametrize("path", ["azureml:mnist:1", "azureml://datastores/ws/paths/x/", "https://host/x.csv",
                                  "wasbs://c@acct.blob.core.windows.net/x"])
def test_remote_input_is_an_error_unless_mapped(tmp_path, dtrain_home, path):
    spec = make_spec(tmp_path, f"command: echo ${{{{inputs.d}}}}\ninputs:\n  d: {{type: uri_folder, path: '{path}'}}\n")
    b = LocalBackend()
    with pytest.raises(UsageError) as exc:
        b.plan(spec, SubmitOptions(name="r"))
    assert exc.value.exit_code == ExitCode.INVALID
    assert "--input d=" in exc.value.hint
    local = tmp_path / "local-copy"
    local.mkdir()
    plan = b.plan(spec, SubmitOptions(name="r", input_paths={"d": str(local)}))
    assert plan.command == f"echo {local}"
    with pytest.raises(UsageError):
        b.plan(spec, SubmitOptions(name="r", input_paths={"nope": str(local)}))
    with pytest.raises(UsageError):
        b.plan(spec, SubmitOptions(name="r", input_paths={"d": str(tmp_path / "does-not-exist")}))


def test_bad_name_is_refused(tmp_path, dtrain_home):
    spec = make_spec(tmp_path, "command: 'true'\n")
    with pytest.raises(UsageError):
        LocalBackend().plan(spec, SubmitOptions(name="../escape"))


def test_generated_names_look_like_azure():
    import re

    names = {generate_name() for _ in range(50)}
    assert len(names) == 50
    assert all(re.fullmatch(r"[a-z]+_[a-z]+_[a-z0-9]{10}", n) for n in names)


# --- ignore files -----------------------------------------------------------------------------------------

def snapshot(src: Path, dest: Path):
    """What the local backend copies into a job's snapshot/ (code_files, then copy_files): (count, ignore file)."""
    files = code_files(src)
    return copy_files(files, dest), files.ignore_file


def _tree(root: Path, files):
    for f in files:
        p = root / f
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f)


def _listing(root: Path):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_snapshot_honours_gitignore_and_amlignore_wins(tmp_path):
    src = tmp_path / "code"
    _tree(src, ["train.py", "run.log", "keep.log", "data/big.bin", "pkg/__init__.py", "pkg/cache/x.pyc",
                "build/out.o", "sub/build/kept.txt"])
    (src / ".gitignore").write_text("*.log\n!keep.log\ndata/\n**/cache\n/build\n")
    snapshot(src, tmp_path / "s1")
    assert _listing(tmp_path / "s1") == [".gitignore", "keep.log", "pkg/__init__.py", "sub/build/kept.txt",
                                         "train.py"]
    (src / ".amlignore").write_text("train.py\n")
    snapshot(src, tmp_path / "s2")
    got = _listing(tmp_path / "s2")
    assert "train.py" not in got and "run.log" in got and "data/big.bin" in got and "build/out.o" in got


# --- state files and logs ---------------------------------------------------------------------------------

def test_atomic_writes_never_show_a_partial_file(tmp_path):
    path = tmp_path / "state.json"
    atomic_write_json(path, {"n": 0, "pad": "x" * 100000})
    stop = threading.Event()
    errors, reads = [], [0]

    def reader():
        while not stop.is_set():
            try:
                d = read_json(path)
                assert len(d["pad"]) == 100000
                reads[0] += 1
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    for i in range(300):
        atomic_write_json(path, {"n": i, "pad": "x" * 100000})
    stop.set()
    t.join(10)
    assert not errors and reads[0] > 0
    assert not [p for p in tmp_path.iterdir() if p.name != "state.json"]   # no temp files left


def test_file_tail_holds_partial_lines(tmp_path):
    p = tmp_path / "log.txt"
    t = FileTail(p, 1, 0, "user_logs/std_log_process_01.txt")
    assert t.read() == []                                   # not there yet
    with open(p, "ab", buffering=0) as f:
        f.write(b"one\ntw")
        assert [x.text for x in t.read()] == ["one"]
        f.write(b"o\r\nthree")
        assert [x.text for x in t.read()] == ["two"]
        assert [x.text for x in t.read()] == []
        assert [x.text for x in t.read(final=True)] == ["three"]
    line = FileTail(p, 1, 0, "s").read()[0]
    assert (line.rank, line.node, line.source) == (1, 0, "s")


def test_port_templates_render():
    assert lenv.render_ports(f"a:{lenv.PORT_TEMPLATE.format(1)}", [5, 6]) == "a:6"
    ports = lenv.free_ports(3)
    assert len(set(ports)) == 3


def test_rendezvous_ports_are_picked_below_the_ephemeral_range(monkeypatch):
    """Outgoing connections take their ports from the ephemeral range: a rank's MASTER_PORT picked there
    could be taken before the rank binds it (EADDRINUSE, seen in CI); below it, only a listener can."""
    low = lenv._ephemeral_low()
    for _ in range(20):
        ports = lenv.free_ports(4)
        assert len(set(ports)) == 4 and all(lenv.PORTS_FROM <= p < low for p in ports), (ports, low)
    monkeypatch.setattr(lenv, "_ephemeral_low", lambda: lenv.PORTS_FROM)   # no room below: the kernel picks
    assert len(set(lenv.free_ports(2))) == 2


def test_unknown_job_is_not_found(dtrain_home):
    from dtrain.errors import JobNotFound

    b = LocalBackend()
    assert not b.knows("nope") and not b.knows("../x")
    for call in (lambda: b.status("nope"), lambda: list(b.logs("nope")), lambda: b.cancel("nope"),
                 lambda: b.status("../etc")):
        with pytest.raises(JobNotFound):
            call()
    assert b.list() == []


def test_datastore_output_and_input_share_a_local_folder(tmp_path):
    from dtrain.backends.base import SubmitOptions
    from dtrain.backends.local import LocalBackend
    from dtrain.errors import UsageError
    from dtrain.spec.validate import load_spec

    (tmp_path / "job.yml").write_text(
        "command: ls ${{inputs.prev}} > ${{outputs.ckpt}}/seen\nenvironment: azureml:x:1\n"
        "inputs:\n  prev: {type: uri_folder, path: 'azureml://datastores/blob/paths/runs/ckpt'}\n"
        "outputs:\n  ckpt: {type: uri_folder, path: 'azureml://datastores/blob/paths/runs/{name}'}\n")
    spec, _ = load_spec(tmp_path / "job.yml")
    home = tmp_path / "home"
    backend = LocalBackend(home)
    with pytest.raises(UsageError) as ei:
        backend.plan(spec, SubmitOptions(name="ckpt"))
    assert "let a local job write it first" in ei.value.hint
    (home / "datastores" / "blob" / "runs" / "ckpt").mkdir(parents=True)
    plan = backend.plan(spec, SubmitOptions(name="ckpt"))
    env = plan.processes[0].env
    assert env["AZURE_ML_INPUT_prev"] == str(home / "datastores" / "blob" / "runs" / "ckpt")
    assert env["AZURE_ML_OUTPUT_ckpt"] == str(home / "datastores" / "blob" / "runs" / "ckpt")
