"""Real distributed runs through the local backend: the environment every process sees for several
layouts of each framework, a PyTorch DDP job over gloo, a TensorFlow multi-worker job and MPI ranks
started by a real mpirun."""
from __future__ import annotations

import json

import pytest

from dtrain.backends.base import SubmitOptions
from dtrain.backends.local import LocalBackend
from test_local_plan import dist_body, make_spec
from test_local_run import _stop_leftover_jobs, no_job_processes, wait_for  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.slow

DUMP = "import json, os\nprint('ENV ' + json.dumps(dict(os.environ)), flush=True)\n"


def run_job(tmp_path, body, code, name, timeout=120):
    spec = make_spec(tmp_path, f"limits: {{timeout: {timeout}}}\n" + body, code=code)
    b = LocalBackend()
    plan = b.plan(spec, SubmitOptions(name=name))
    b.submit(plan)
    info = wait_for(b, name, timeout)
    return b, info


def dumped_envs(b, name):
    """{rank: (node, env)} from the 'ENV {...}' line of each rank's log."""
    out = {}
    for line in b.logs(name):
        if line.text.startswith("ENV "):
            assert line.rank not in out
            out[line.rank] = (line.node, json.loads(line.text[4:]))
    return out


def _common(env, name, node, nodes):
    assert env["AZUREML_RUN_ID"] == name
    assert env["AZUREML_NODE_COUNT"] == str(nodes)
    assert env["AZ_BATCHAI_TASK_INDEX"] == str(node)
    assert env["PYTHONUNBUFFERED"] == "1"


@pytest.mark.parametrize("nodes,ppn", [(1, 1), (1, 2), (2, 2)])
def test_pytorch_env_in_real_processes(tmp_path, dtrain_home, nodes, ppn):
    name = f"pt{nodes}x{ppn}"
    b, info = run_job(tmp_path, dist_body("pytorch", nodes, ppn, command="python dump.py"), {"dump.py": DUMP}, name)
    assert info.status == "Completed"
    envs = dumped_envs(b, name)
    world = nodes * ppn
    assert sorted(envs) == list(range(world))
    ports = {e["MASTER_PORT"] for _, e in envs.values()}
    assert ports == {str(info.ports["MASTER_PORT"])}          # what status shows is what every rank got
    for rank, (node, e) in envs.items():
        assert (e["RANK"], e["LOCAL_RANK"], e["NODE_RANK"], e["WORLD_SIZE"], e["MASTER_ADDR"]) == \
               (str(rank), str(rank % ppn), str(rank // ppn), str(world), "127.0.0.1")
        assert node == rank // ppn
        _common(e, name, node, nodes)
        assert e["PWD"].endswith(f"/jobs/{name}/snapshot")


@pytest.mark.parametrize("nodes,ppn", [(1, 1), (1, 2), (2, 2)])
def test_mpi_env_in_real_ranks(tmp_path, dtrain_home, nodes, ppn):
    name = f"mpi{nodes}x{ppn}"
    b, info = run_job(tmp_path, dist_body("mpi", nodes, ppn, command="python dump.py"), {"dump.py": DUMP}, name)
    assert info.status == "Completed", info.failure
    envs = dumped_envs(b, name)
    world = nodes * ppn
    assert sorted(envs) == list(range(world))
    masters = {e["AZ_BATCH_MASTER_NODE"] for _, e in envs.values()}
    assert masters == {f"127.0.0.1:{info.ports['AZ_BATCH_MASTER_NODE']}"}
    # submit checked mpirun and ran that one: its path is recorded, and it is in the plan.json that ran
    from dtrain.backends.local.store import read_json, read_state

    job = dtrain_home / "jobs" / name
    mpirun = read_state(job).mpirun
    assert mpirun.startswith("/") and read_json(job / "plan.json")["processes"][0]["argv"][0] == mpirun
    for rank, (node, e) in envs.items():
        assert e["OMPI_COMM_WORLD_RANK"] == str(rank)
        assert e["OMPI_COMM_WORLD_SIZE"] == str(world)
        assert e["OMPI_COMM_WORLD_LOCAL_RANK"] == str(rank % ppn)
        assert e["OMPI_COMM_WORLD_LOCAL_SIZE"] == str(ppn)
        assert e["OMPI_COMM_WORLD_NODE_RANK"] == str(rank // ppn)
        assert e["AZ_BATCHAI_MPI_MASTER_NODE"] == "127.0.0.1"
        assert node == rank // ppn
        _common(e, name, node, nodes)
        assert "RANK" not in e and "MASTER_ADDR" not in e


@pytest.mark.parametrize("nodes,workers,ps", [(2, None, 0), (2, 2, 1)])
def test_tensorflow_env_in_real_processes(tmp_path, dtrain_home, nodes, workers, ps):
    name = f"tf{nodes}w{workers}ps{ps}"
    b, info = run_job(tmp_path, dist_body("tensorflow", nodes, workers=workers, ps=ps, command="python dump.py"),
                      {"dump.py": DUMP}, name)
    assert info.status == "Completed"
    envs = dumped_envs(b, name)
    n_workers = workers or nodes
    assert sorted(envs) == list(range(n_workers + ps))
    configs = {r: json.loads(e["TF_CONFIG"]) for r, (_, e) in envs.items()}
    cluster = configs[0]["cluster"]
    assert all(c["cluster"] == cluster for c in configs.values())
    assert len(cluster["worker"]) == n_workers and len(cluster.get("ps", [])) == ps
    tasks = [(configs[r]["task"]["type"], configs[r]["task"]["index"]) for r in sorted(configs)]
    assert tasks == [("worker", i) for i in range(n_workers)] + [("ps", i) for i in range(ps)]
    # status names each task's port, in task order
    assert [(k, f"127.0.0.1:{p}") for k, p in info.ports.items()] == [(f"{t} {i}", cluster[t][i]) for t, i in tasks]
    for rank, (node, e) in envs.items():
        _common(e, name, node, nodes)


DDP = """import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert world == int(os.environ["WORLD_SIZE"]) and rank == int(os.environ["RANK"])
torch.manual_seed(0)
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(rank)
for step in range(3):
    x = torch.randn(8, 4, generator=g)
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
w = model.module.weight.detach().clone()
gathered = [torch.zeros_like(w) for _ in range(world)]
dist.all_gather(gathered, w)
assert all(torch.equal(w, o) for o in gathered), "replicas diverged"
t = torch.tensor([float(rank)]); dist.all_reduce(t)
print(f"rank={rank} node={os.environ['NODE_RANK']} local={os.environ['LOCAL_RANK']} sum={t.item():g}", flush=True)
dist.barrier()
dist.destroy_process_group()
# gloo's threads can abort the process in C++ static teardown when a peer has already left
# ("terminate called without an active exception"); what the test checks is done, so leave at once.
os._exit(0)
"""


def test_pytorch_ddp_gloo_2x2(tmp_path, dtrain_home):
    b, info = run_job(tmp_path, dist_body("pytorch", 2, 2, command="python ddp.py"), {"ddp.py": DDP}, "ddp")
    assert info.status == "Completed", info.failure
    lines = sorted(l.text for l in b.logs("ddp") if l.text.startswith("rank="))
    assert lines == [f"rank={r} node={r // 2} local={r % 2} sum=6" for r in range(4)]
    assert no_job_processes(b, "ddp")


TF = """import json, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
task = json.loads(os.environ["TF_CONFIG"])["task"]
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    w = tf.Variable(tf.zeros((4, 1)), aggregation=tf.VariableAggregation.MEAN)
x = tf.random.stateless_uniform((16, 4), seed=(task["index"], 1))
y = tf.reduce_sum(x, axis=1, keepdims=True)

@tf.function
def train_step():
    def replica_fn():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.matmul(x, w) - y) ** 2)
        w.assign_sub(0.1 * tape.gradient(loss, w))     # MEAN aggregation: an all-reduce across workers
        return loss
    return strategy.reduce("MEAN", strategy.run(replica_fn), axis=None)

for _ in range(5):
    loss = train_step()
total = strategy.reduce("SUM", strategy.run(lambda: tf.constant(task["index"] + 1.0)), axis=None)
print(f"task={task['type']}:{task['index']} replicas={strategy.num_replicas_in_sync} sum={float(total):g} "
      f"w={float(tf.reduce_sum(w)):.6f}", flush=True)
"""


@pytest.mark.timeout(240)  # a TensorFlow job, allowed 180 s
def test_tensorflow_multi_worker_mirrored(tmp_path, dtrain_home):
    b, info = run_job(tmp_path, dist_body("tensorflow", 2, command="python tfjob.py"), {"tfjob.py": TF}, "tfmw",
                      timeout=180)
    assert info.status == "Completed", info.failure
    lines = [l.text for l in b.logs("tfmw") if l.text.startswith("task=")]
    assert sorted(x.split()[0] for x in lines) == ["task=worker:0", "task=worker:1"]
    assert all("replicas=2" in x for x in lines)
    assert all("sum=3" in x for x in lines)
    weights = {x.split("w=")[1] for x in lines}
    assert len(weights) == 1                     # synchronous training: the same weights on every worker


MPI_ALLREDUCE = """import os, datetime, torch, torch.distributed as dist
rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
host, port = os.environ["AZ_BATCH_MASTER_NODE"].split(":")
dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60))
t = torch.tensor([rank + 1.0]); dist.all_reduce(t)
print(f"rank={rank} local={os.environ['OMPI_COMM_WORLD_LOCAL_RANK']} sum={t.item():g}", flush=True)
dist.destroy_process_group()
"""


def test_mpirun_ranks_run_a_collective(tmp_path, dtrain_home):
    b, info = run_job(tmp_path, dist_body("mpi", 2, 2, command="python allreduce.py"),
                      {"allreduce.py": MPI_ALLREDUCE}, "mpiar")
    assert info.status == "Completed", info.failure
    lines = sorted(l.text for l in b.logs("mpiar") if l.text.startswith("rank="))
    assert lines == [f"rank={r} local={r % 2} sum=10" for r in range(4)]
    assert no_job_processes(b, "mpiar")


def test_mpi_fail_fast_names_the_rank(tmp_path, dtrain_home):
    cmd = 'if [ "$OMPI_COMM_WORLD_RANK" = 2 ]; then sleep 0.3; echo bad rank; exit 3; fi; sleep 97.3'
    b, info = run_job(tmp_path, dist_body("mpi", 2, 2, command=cmd), {"x": ""}, "mpiff", timeout=30)
    assert info.status == "Failed"
    assert (info.failure.rank, info.failure.node, info.failure.exit_code) == (2, 1, 3)
    assert info.failure.last_lines[-1] == "bad rank"
    assert no_job_processes(b, "mpiff", marker="sleep 97.3")


def test_mpi_killed_supervisor_leaves_no_rank(tmp_path, dtrain_home):
    import os
    import signal

    from dtrain.backends.local.store import read_state

    spec = make_spec(tmp_path, dist_body("mpi", 2, 2, command="sleep 101.7"))
    b = LocalBackend()
    b.submit(b.plan(spec, SubmitOptions(name="mpisk")))
    wait_for(b, "mpisk", 30, lambda i: i.status == "Running")
    from test_local_run import cmdline_pids
    import time

    deadline = time.monotonic() + 10
    while len(cmdline_pids("sleep 101.7")) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(read_state(dtrain_home / "jobs" / "mpisk").supervisor["pid"], signal.SIGKILL)
    info = wait_for(b, "mpisk", 10)
    assert info.status == "NotResponding" and "gone" in info.failure.message   # lost = infrastructure
    assert no_job_processes(b, "mpisk", marker="sleep 101.7")
