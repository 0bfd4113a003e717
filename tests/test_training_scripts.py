"""Tests for training_scripts/: launched as real processes with the environment
Azure ML would give them, built by hand here (no dependency on dtrain itself).

Fast tests: argument-free failure modes, env parsing helpers, atomic writes.
Slow tests (@pytest.mark.slow): real 2-4 process jobs over gloo / MPI / gRPC.
Every subprocess runs in its own session with a timeout; on timeout or failure
the whole process group is killed so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "training_scripts"
PY = sys.executable
TIMEOUT_S = 120
# A test that trains: up to three jobs of TIMEOUT_S each, and a minute to spare.
TRAINS = pytest.mark.timeout(3 * TIMEOUT_S + 60)

# Variables a launcher sets; scrubbed so the tests control them exactly.
LAUNCH_VARS = re.compile(
    r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|NODE_RANK|GROUP_RANK|MASTER_ADDR|MASTER_PORT|TF_CONFIG|"
    r"OMPI_.*|PMI_.*|PMIX_.*|HOROVOD_.*|AZ_BATCH.*|MLFLOW_.*|TORCHELASTIC_.*)$")

FINAL = re.compile(r"^final_loss=(\S+) step=(\d+)$", re.M)
FIRST = re.compile(r"^first_loss=(\S+) step=(\d+)$", re.M)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def clean_env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not LAUNCH_VARS.match(k)}
    env["PYTHONUNBUFFERED"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def free_ports(n: int) -> List[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=10)


def run_job(procs: Sequence[Tuple[List[str], Dict[str, str]]], cwd: Path,
            timeout: float = TIMEOUT_S) -> List[Tuple[int, str]]:
    """Start all processes (each in its own session), wait for all of them.

    Returns [(returncode, stdout+stderr)].  On timeout every process group is
    killed and the test fails with the captured output.
    """
    started = []
    try:
        for i, (cmd, env) in enumerate(procs):
            log = open(cwd / f"proc{i}-{time.monotonic_ns()}.log", "w+")
            p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            started.append((p, log))
        deadline = time.monotonic() + timeout
        for p, _ in started:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                outputs = []
                for q, log in started:
                    _kill_group(q)
                    log.seek(0)
                    outputs.append(log.read()[-3000:])
                pytest.fail(f"job timed out after {timeout}s; output:\n" + "\n-----\n".join(outputs))
        results = []
        for (p, log), (_, env) in zip(started, procs):
            log.seek(0)
            text = log.read()
            prefix = env.get("RANK_LOG_PREFIX")
            if prefix:  # per-rank logs of an mpirun job (see mpi_job)
                for f in sorted(Path(prefix).parent.glob(Path(prefix).name + ".*")):
                    text += f.read_text()
            results.append((p.returncode, text))
        return results
    finally:
        for p, log in started:
            if p.poll() is None:
                _kill_group(p)
            log.close()


def ok(results: List[Tuple[int, str]]) -> str:
    """Assert every process exited 0; return all output joined."""
    joined = "\n".join(out for _, out in results)
    for i, (rc, out) in enumerate(results):
        assert rc == 0, f"process {i} exited {rc}:\n{out[-8000:]}"
    return joined


def losses(output: str) -> Tuple[float, float, int]:
    first, final = FIRST.findall(output), FINAL.findall(output)
    assert first, f"no first_loss line in:\n{output[-3000:]}"
    assert len(final) == 1, f"expected one final_loss line:\n{output[-3000:]}"
    return float(first[0][0]), float(final[0][0]), int(final[0][1])


def assert_learns(output: str, factor: float = 0.5) -> Tuple[float, float, int]:
    first, final, step = losses(output)
    assert final < factor * first, f"loss did not go down enough: first={first} final={final}"
    return first, final, step


def torch_env_job(script: str, args: List[str], world: int, **extra: str):
    port = free_ports(1)[0]
    return [([PY, str(SCRIPTS / script), *args],
             clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(r),
                       LOCAL_RANK=str(r), NODE_RANK="0", LOCAL_WORLD_SIZE=str(world), **extra))
            for r in range(world)]


def mpi_job(args: List[str], np_: int = 2, **extra: str):
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun (Open MPI) must be installed for these tests"
    # Each rank writes its own log, as dtrain's local backend and Azure ML do: mpirun's output
    # forwarding can drop the last lines of a non-MPI program that exits under load.
    prefix = tempfile.mkdtemp(prefix="mpi-ranks-") + "/rank"
    wrap = ["sh", "-c", 'exec "$@" >>"$RANK_LOG_PREFIX.$OMPI_COMM_WORLD_RANK" 2>&1', "sh"]
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(np_),
           "-x", "RANK_LOG_PREFIX", *wrap, PY, str(SCRIPTS / "mpi_allreduce.py"), *args]
    return [(cmd, clean_env(RANK_LOG_PREFIX=prefix, **extra))]


def tf_job(script: str, args: List[str], cluster: Dict[str, List[str]]):
    procs = []
    for kind, hosts in cluster.items():
        for i in range(len(hosts)):
            cfg = {"cluster": cluster, "task": {"type": kind, "index": i}}
            procs.append(([PY, str(SCRIPTS / script), *args], clean_env(TF_CONFIG=json.dumps(cfg))))
    return procs


def check_torch_checkpoints(directory: Path, expect_step: int, prefix: str = "ckpt_step") -> None:
    import torch

    files = sorted(directory.glob(f"{prefix}*.pt"))
    assert files, f"no {prefix}*.pt in {directory}: {os.listdir(directory)}"
    leftovers = [p.name for p in directory.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp")]
    assert not leftovers, f"temporary files left behind: {leftovers}"
    for path in files:
        state = torch.load(path, map_location="cpu", weights_only=False)
        assert state["step"] == int(re.search(r"(\d+)\.pt$", path.name).group(1))
        assert {"model", "optimizer", "scheduler", "rng"} <= set(state)
    assert int(re.search(r"(\d+)\.pt$", files[-1].name).group(1)) == expect_step


def check_tf_checkpoints(directory: Path, expect_step: int) -> None:
    index = (directory / "checkpoint").read_text()
    assert f'model_checkpoint_path: "ckpt-{expect_step}"' in index, index
    assert (directory / f"ckpt-{expect_step}.index").stat().st_size > 0
    data = list(directory.glob(f"ckpt-{expect_step}.data-*"))
    assert data and all(p.stat().st_size > 0 for p in data)


@contextlib.contextmanager
def scripts_on_path(monkeypatch):
    """Import training_scripts modules without leaking them into sys.modules."""
    names = ("common", "torch_common", "tf_common", "mpi_allreduce", "tf_parameter_server")
    saved = {n: sys.modules.pop(n) for n in names if n in sys.modules}
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        yield importlib.import_module
    finally:
        for n in names:
            sys.modules.pop(n, None)
        sys.modules.update(saved)


# --------------------------------------------------------------------------
# fast: clear failures without the launch environment
# --------------------------------------------------------------------------

@pytest.mark.parametrize("script, env, message", [
    ("pytorch_ddp.py", {}, "pytorch_ddp.py: RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT not set; "
                           "launch it with dtrain (distribution: pytorch) or torchrun"),
    ("pytorch_ddp.py", {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "MASTER_ADDR/MASTER_PORT not set"),
    ("model_parallel.py", {}, "model_parallel.py: RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT not set"),
    ("mpi_allreduce.py", {}, "mpi_allreduce.py: OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE not set; "
                             "launch it with dtrain (distribution: mpi) or mpirun"),
    ("tf_multiworker.py", {}, "tf_multiworker.py: TF_CONFIG not set; launch it with dtrain "
                              "(distribution: tensorflow)"),
    ("tf_multiworker.py", {"TF_CONFIG": "{not json"}, "tf_multiworker.py: TF_CONFIG is malformed"),
    ("tf_parameter_server.py", {}, "tf_parameter_server.py: TF_CONFIG not set"),
    ("tf_parameter_server.py",
     {"TF_CONFIG": json.dumps({"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 0}})},
     "TF_CONFIG has no ps tasks"),
    ("tf_parameter_server.py",
     {"TF_CONFIG": json.dumps({"cluster": {"worker": ["localhost:1"], "ps": ["localhost:2"]},
                               "task": {"type": "worker", "index": 0}})},
     "needs at least 2 workers"),
    ("single_node.py", {"WORLD_SIZE": "2"}, "single_node.py: WORLD_SIZE=2 but this script trains in one process"),
])
def test_exits_2_with_one_line_message_without_launch_env(tmp_path, script, env, message):
    proc = subprocess.run([PY, str(SCRIPTS / script)], env=clean_env(**env), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not list(tmp_path.iterdir()), "nothing may be written before the environment check"


@pytest.mark.parametrize("script", ["single_node.py", "pytorch_ddp.py", "mpi_allreduce.py", "model_parallel.py",
                                    "tf_multiworker.py", "tf_parameter_server.py"])
def test_help_and_docstring(tmp_path, script):
    text = (SCRIPTS / script).read_text()
    assert text.startswith('"""'), "each script starts with a docstring"
    for section in ("What it shows", "How to run", "Environment"):
        assert section in text, f"{script} docstring lacks {section!r}"
    proc = subprocess.run([PY, str(SCRIPTS / script), "--help"], env=clean_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for flag in ("--steps", "--batch-size", "--lr", "--output-dir", "--checkpoint-every", "--data-dir", "--seed"):
        assert flag in proc.stdout


# --------------------------------------------------------------------------
# fast: helpers
# --------------------------------------------------------------------------

def test_mpi_master_address_parsing(monkeypatch):
    with scripts_on_path(monkeypatch) as imp:
        m = imp("mpi_allreduce")
        f = m.master_address
        assert f({"AZ_BATCH_MASTER_NODE": "10.0.0.4:6105"}, False) == ("10.0.0.4", 6105, "AZ_BATCH_MASTER_NODE")
        assert f({"AZ_BATCH_MASTER_NODE": "10.0.0.4", "MASTER_PORT": "7000"}, False)[:2] == ("10.0.0.4", 7000)
        assert f({"AZ_BATCH_MASTER_NODE": "node-0"}, False)[:2] == ("node-0", m.DEFAULT_PORT)
        assert f({"AZ_BATCHAI_MPI_MASTER_NODE": "node-1"}, True)[:2] == ("node-1", m.DEFAULT_PORT)
        assert f({"MASTER_ADDR": "h", "MASTER_PORT": "1234"}, False)[:2] == ("h", 1234)
        assert f({}, True)[:2] == ("127.0.0.1", m.DEFAULT_PORT)
        with pytest.raises(ValueError):
            f({}, False)  # multi-node and no address anywhere


def test_tf_parameter_server_cluster_mapping(monkeypatch):
    with scripts_on_path(monkeypatch) as imp:
        m = imp("tf_parameter_server")
        cluster = {"worker": ["w0:1", "w1:2", "w2:3"], "ps": ["p0:4"]}

        def mapped(kind, index):
            return m.map_azure_cluster({"cluster": cluster, "task": {"type": kind, "index": index}})[0]

        c0 = mapped("worker", 0)
        assert c0["cluster"] == {"chief": ["w0:1"], "worker": ["w1:2", "w2:3"], "ps": ["p0:4"]}
        assert c0["task"] == {"type": "chief", "index": 0}
        assert mapped("worker", 2)["task"] == {"type": "worker", "index": 1}
        assert mapped("ps", 0)["task"] == {"type": "ps", "index": 0}
        with_chief = {"cluster": {"chief": ["c:1"], "worker": ["w:2"], "ps": ["p:3"]},
                      "task": {"type": "worker", "index": 0}}
        assert m.map_azure_cluster(with_chief)[0] == with_chief
        with pytest.raises(ValueError):
            m.map_azure_cluster({"cluster": {"worker": ["w0:1"], "ps": ["p:2"]}, "task": {"type": "ps", "index": 0}})


def test_atomic_write_never_leaves_partial_files(tmp_path, monkeypatch):
    with scripts_on_path(monkeypatch) as imp:
        common = imp("common")
        target = tmp_path / "ckpt.bin"
        common.atomic_write(str(target), lambda f: f.write(b"old"))

        def broken(f):
            f.write(b"half-")
            raise RuntimeError("disk full")

        with pytest.raises(RuntimeError):
            common.atomic_write(str(target), broken)
        assert target.read_bytes() == b"old"
        assert [p.name for p in tmp_path.iterdir()] == ["ckpt.bin"]


def test_step_line_stays_short_and_per_rank_throughput_goes_to_mlflow_only(monkeypatch, capsys):
    """16 ranks (2 x 8) once printed ~490-character step lines; the per-rank rates are MLflow metrics."""
    with scripts_on_path(monkeypatch) as imp:
        common = imp("common")
        logger = common.MetricLogger(enabled=True)
        sent = []
        logger._mlflow = type("FakeMlflow", (), {"log_metrics": staticmethod(lambda m, step: sent.append(m))})
        ranks = {f"samples_per_s_rank{r}": 1234.5 for r in range(16)}
        logger.log({"loss": 0.5, "lr": 0.2, "samples_per_s": 19752.0, "epoch": 0}, 10, unprinted=ranks)
    line = capsys.readouterr().out.strip()
    assert line == "step=10 loss=0.5000 lr=0.2000 samples_per_s=19752.0 epoch=0" and len(line) <= 120
    assert sent == [{"loss": 0.5, "learning_rate": 0.2, "samples_per_s": 19752.0, "epoch": 0.0, **ranks}]


@pytest.mark.slow  # imports torch
def test_resumable_sampler_skips_consumed_samples(monkeypatch):
    with scripts_on_path(monkeypatch) as imp:
        tc = imp("torch_common")
        data = list(range(40))
        full = tc.ResumableSampler(data, num_replicas=2, rank=1, shuffle=True, seed=3, drop_last=True)
        full.set_epoch(5)
        order = list(full)
        part = tc.ResumableSampler(data, num_replicas=2, rank=1, shuffle=True, seed=3, drop_last=True)
        part.set_epoch(5, skip=8)
        assert list(part) == order[8:] and len(part) == len(order) - 8


def test_data_dir_round_trip(tmp_path, monkeypatch):
    np = pytest.importorskip("numpy")
    with scripts_on_path(monkeypatch) as imp:
        common = imp("common")
        x, y = common.make_dataset(64, 5, 1, seed=1)
        x2, _ = common.make_dataset(64, 5, 1, seed=1)
        assert np.array_equal(x, x2), "synthetic data must be a function of the seed"
        np.save(tmp_path / "x.npy", x)
        np.save(tmp_path / "y.npy", y[:, 0])
        lx, ly = common.load_data_dir(str(tmp_path))
        assert lx.shape == (64, 5) and ly.shape == (64, 1)


# --------------------------------------------------------------------------
# single process
# --------------------------------------------------------------------------

@pytest.mark.slow  # trains three times
@TRAINS
def test_single_node_learns_checkpoints_and_resumes_exactly(tmp_path):
    env = clean_env(MLFLOW_TRACKING_URI=f"file://{tmp_path}/mlruns")  # mlflow may be absent: must not fail
    script = str(SCRIPTS / "single_node.py")
    a, b = tmp_path / "a", tmp_path / "b"
    out = ok(run_job([([PY, script, "--output-dir", str(a), "--steps", "40", "--checkpoint-every", "10"], env)],
                     tmp_path))
    assert_learns(out)
    check_torch_checkpoints(a, 40)
    uninterrupted = losses(out)[1]

    ok(run_job([([PY, script, "--output-dir", str(b), "--steps", "20", "--checkpoint-every", "10"], env)], tmp_path))
    check_torch_checkpoints(b, 20)
    out = ok(run_job([([PY, script, "--output-dir", str(b), "--steps", "40", "--checkpoint-every", "10"], env)],
                     tmp_path))
    assert "resumed from step 20" in out
    _, final, step = losses(out)
    assert step == 40 and FIRST.search(out).group(2) == "21"
    assert final == pytest.approx(uninterrupted, rel=1e-4), "resume must continue exactly where it stopped"


@pytest.mark.slow  # trains
@TRAINS
def test_single_node_data_dir(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 6)).astype(np.float32)
    y = (x @ rng.standard_normal((6, 2))).astype(np.float32)
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "X.npy", x)
    np.save(data / "y.npy", y)
    out = ok(run_job([([PY, str(SCRIPTS / "single_node.py"), "--data-dir", str(data), "--epochs", "4",
                        "--output-dir", str(tmp_path / "ck")], clean_env())], tmp_path))
    assert "samples=512" in out
    assert_learns(out, factor=0.2)


# --------------------------------------------------------------------------
# multi-process jobs
# --------------------------------------------------------------------------

def _learn_and_resume(tmp_path, make_job, check, expect_rank_lines: Optional[int] = None):
    """Fresh 40-step run in a/, then 20 + (resume) 40 steps in b/; both must agree."""
    a, b = tmp_path / "a", tmp_path / "b"
    out = ok(run_job(make_job(["--output-dir", str(a), "--steps", "40", "--checkpoint-every", "10"]), tmp_path))
    assert_learns(out)
    assert losses(out)[2] == 40
    check(a, 40)
    if expect_rank_lines:
        assert len(re.findall(r"^rank=\d+ samples_per_s=", out, re.M)) == expect_rank_lines
    uninterrupted = losses(out)[1]

    out = ok(run_job(make_job(["--output-dir", str(b), "--steps", "20", "--checkpoint-every", "10"]), tmp_path))
    assert losses(out)[2] == 20
    check(b, 20)
    out = ok(run_job(make_job(["--output-dir", str(b), "--steps", "40", "--checkpoint-every", "10"]), tmp_path))
    assert "resumed from step 20" in out
    assert FIRST.search(out).group(2) == "21"
    assert losses(out)[2] == 40
    check(b, 40)
    return uninterrupted, losses(out)[1]


@pytest.mark.slow
@TRAINS
def test_pytorch_ddp_two_ranks_learns_and_resumes(tmp_path):
    uninterrupted, resumed = _learn_and_resume(
        tmp_path, lambda args: torch_env_job("pytorch_ddp.py", args, world=2), check_torch_checkpoints,
        expect_rank_lines=2)
    assert resumed == pytest.approx(uninterrupted, rel=1e-4)


@pytest.mark.slow
@TRAINS
def test_pytorch_ddp_metrics_lines(tmp_path):
    pytest.importorskip("mlflow")
    store = tmp_path / "mlruns"
    out = ok(run_job(torch_env_job("pytorch_ddp.py", ["--steps", "10", "--output-dir", str(tmp_path / "c")],
                                   world=2, MLFLOW_TRACKING_URI=f"file://{store}", MLFLOW_ALLOW_FILE_STORE="true"),
                     tmp_path))
    assert "backend=gloo" in out and "lr=0.2 (base 0.1 x 64/32)" in out  # linear scaling rule
    # the step line carries the job's totals only; each rank prints its own throughput once, at the end
    assert re.search(r"^step=10 loss=\S+ lr=\S+ samples_per_s=\S+ epoch=0$", out, re.M), out
    assert len(re.findall(r"^rank=\d+ samples_per_s=", out, re.M)) == 2
    assert "samples_per_s_rank" not in out
    # ... and every rank's throughput is still an MLflow metric (rank 0 logs the gathered rates)
    metrics = {p.name for p in store.glob("*/*/metrics/*")}
    assert {"loss", "learning_rate", "samples_per_s", "samples_per_s_rank0", "samples_per_s_rank1"} <= metrics, metrics


@pytest.mark.slow
@TRAINS
def test_mpi_allreduce_under_mpirun_learns_and_resumes(tmp_path):
    port = free_ports(1)[0]

    def job(args):
        # First form: "host:port"; the resumed run also uses it.
        return mpi_job(args, AZ_BATCH_MASTER_NODE=f"127.0.0.1:{port}")

    uninterrupted, resumed = _learn_and_resume(tmp_path, job, check_torch_checkpoints, expect_rank_lines=2)
    assert resumed == pytest.approx(uninterrupted, rel=1e-4)

    # Second form: host only, port from MASTER_PORT.
    port2 = free_ports(1)[0]
    out = ok(run_job(mpi_job(["--steps", "5", "--output-dir", str(tmp_path / "c")],
                             AZ_BATCH_MASTER_NODE="127.0.0.1", MASTER_PORT=str(port2)), tmp_path))
    assert f"tcp://127.0.0.1:{port2} (from AZ_BATCH_MASTER_NODE)" in out
    assert losses(out)[2] == 5


@pytest.mark.slow
@TRAINS
def test_model_parallel_pipeline_learns_resumes_and_matches_unsplit_model(tmp_path):
    def check(directory, step):
        for stage in (0, 1):
            check_torch_checkpoints(directory, step, prefix=f"stage{stage:02d}_step")

    uninterrupted, resumed = _learn_and_resume(
        tmp_path, lambda args: torch_env_job("model_parallel.py", args, world=2), check)
    assert resumed == pytest.approx(uninterrupted, rel=1e-4)

    # The same model in one stage (no split) must train identically: the
    # pipeline changes where layers run, not the math.
    out = ok(run_job(torch_env_job("model_parallel.py", ["--output-dir", str(tmp_path / "one"), "--steps", "40"],
                                   world=1), tmp_path))
    assert losses(out)[1] == pytest.approx(uninterrupted, rel=1e-3)


@pytest.mark.slow
@TRAINS
def test_tf_multiworker_mirrored_learns_and_resumes(tmp_path):
    def job(args):
        ports = free_ports(2)
        return tf_job("tf_multiworker.py", args, {"worker": [f"localhost:{p}" for p in ports]})

    uninterrupted, resumed = _learn_and_resume(tmp_path, job, check_tf_checkpoints)
    assert resumed == pytest.approx(uninterrupted, rel=1e-4)


@pytest.mark.slow
@TRAINS
def test_tf_parameter_server_azure_style_cluster(tmp_path):
    """Azure ML's worker x2 + ps x1 TF_CONFIG: worker 0 coordinates, all tasks exit 0."""
    out_dir = tmp_path / "ps"

    def job(script, args):
        w0, w1, p0 = free_ports(3)
        return tf_job(script, args, {"worker": [f"localhost:{w0}", f"localhost:{w1}"], "ps": [f"localhost:{p0}"]})

    # Through the tf_multiworker.py entry point: it hands over when TF_CONFIG has ps.
    results = run_job(job("tf_multiworker.py", ["--output-dir", str(out_dir), "--steps", "60",
                                                "--checkpoint-every", "30"]), tmp_path)
    out = ok(results)
    assert "Azure ML worker 0 -> TF chief 0" in out and "Azure ML worker 1 -> TF worker 0" in out
    assert out.count("coordinator finished, shutting down") == 2  # the worker and the ps task
    assert_learns(out)
    check_tf_checkpoints(out_dir, 60)

    out = ok(run_job(job("tf_parameter_server.py", ["--output-dir", str(out_dir), "--steps", "80",
                                                    "--checkpoint-every", "30"]), tmp_path))
    assert "resumed from step 60" in out
    assert FIRST.search(out).group(2) == "61" and losses(out)[2] == 80
    check_tf_checkpoints(out_dir, 80)
