"""Wall time of a trivial 2 nodes x 2 processes PyTorch DDP job: dtrain's local backend vs torchrun.

The job: init_process_group("gloo") from the env:// variables, one all_reduce, destroy, exit.

  dtrain     `dtrain submit SPEC --local --wait` (the CLI, a fresh process each run): 2 emulated nodes x 2
             processes (distribution: pytorch, process_count_per_instance: 2, instance_count: 2)
  torchrun1  `torchrun --standalone --nnodes 1 --nproc_per_node 4 ddp.py`: the same 4 ranks on 1 node
  torchrun2  two `torchrun --nnodes 2 --nproc_per_node 2 --node_rank {0,1}` processes with a static
             rendezvous (MASTER_ADDR/PORT on localhost): 2 emulated nodes x 2, like dtrain

Each is timed end to end (process start to exit, median of --runs runs, after one warm-up run each).
Usage: python benchmarks/local_vs_torchrun.py [--runs 5] [--markdown docs/benchmarks.md]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * dist.get_rank()
dist.all_reduce(t)
assert t.item() == sum(range(dist.get_world_size()))
dist.destroy_process_group()
"""

SPEC = """$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python ddp.py
code: src
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
compute: local
resources: {instance_count: 2}
distribution: {type: pytorch, process_count_per_instance: 2}
"""

HEADING = "## Local backend vs torchrun"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def check(p: subprocess.CompletedProcess, what: str):
    if p.returncode != 0:
        raise SystemExit(f"{what} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--markdown", help="append/replace the results section in this Markdown file")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="dtrain-bench-"))
    (work / "src").mkdir()
    (work / "src" / "ddp.py").write_text(SCRIPT)
    (work / "job.yml").write_text(SPEC)
    env = dict(os.environ, DTRAIN_HOME=str(work / "home"), NO_COLOR="1", OMP_NUM_THREADS="1")
    dtrain = [sys.executable, "-m", "dtrain"]
    torchrun = shutil.which("torchrun") or None
    tr = [torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"]
    n = [0]

    def run_dtrain():
        n[0] += 1
        p = subprocess.run(dtrain + ["submit", str(work / "job.yml"), "--local", "--wait",
                                     "--name", f"bench{n[0]}"], env=env, capture_output=True, text=True, timeout=300)
        check(p, "dtrain submit --local --wait")

    def run_torchrun1():
        p = subprocess.run(tr + ["--standalone", "--nnodes", "1", "--nproc_per_node", "4", str(work / "src" / "ddp.py")],
                           env=env, capture_output=True, text=True, timeout=300, cwd=work / "src")
        check(p, "torchrun --standalone")

    def run_torchrun2():
        port = free_port()
        procs = [subprocess.Popen(tr + ["--nnodes", "2", "--nproc_per_node", "2", "--node_rank", str(i),
                                        "--master_addr", "127.0.0.1", "--master_port", str(port),
                                        str(work / "src" / "ddp.py")],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  cwd=work / "src") for i in range(2)]
        for i, p in enumerate(procs):
            out, _ = p.communicate(timeout=300)
            if p.returncode != 0:
                raise SystemExit(f"torchrun node {i} failed ({p.returncode}):\n{out}")

    cases = [("dtrain submit --local --wait (2 nodes x 2)", run_dtrain),
             ("torchrun --standalone --nproc_per_node 4 (1 node x 4)", run_torchrun1),
             ("2 x torchrun --nnodes 2 --nproc_per_node 2, static rendezvous on localhost", run_torchrun2)]
    results = {}
    for label, fn in cases:
        fn()                                     # warm-up (page cache, .pyc)
    for i in range(args.runs):                   # interleaved, so drift hits every case alike
        for label, fn in cases:
            results.setdefault(label, []).append(timed(fn))
    med = {k: statistics.median(v) for k, v in results.items()}
    base = med[cases[0][0]]
    lines = [HEADING, "",
             f"{datetime.date.today().isoformat()}, {platform.node() or 'this machine'}: {os.cpu_count()} cores, "
             f"Python {platform.python_version()}, torch {torch_version()}, {platform.system()} {platform.release()}.",
             "A trivial 2x2 PyTorch DDP job (init_process_group gloo, one all_reduce, exit), timed from process "
             f"start to exit; median of {args.runs} runs after a warm-up (`python benchmarks/local_vs_torchrun.py`).",
             "",
             "| launcher | median (s) | runs (s) | vs dtrain |",
             "|---|---:|---|---:|"]
    for label, _ in cases:
        runs = ", ".join(f"{x:.2f}" for x in results[label])
        lines.append(f"| {label} | {med[label]:.2f} | {runs} | {med[label] / base:.2f}x |")
    lines += ["", f"dtrain / torchrun (1 node x 4): {base / med[cases[1][0]]:.2f}; "
                  f"dtrain / torchrun (2 x 2): {base / med[cases[2][0]]:.2f} (below 1 = dtrain faster).", ""]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        write_section(Path(args.markdown), text)
    shutil.rmtree(work, ignore_errors=True)
    return 0


def torch_version() -> str:
    try:
        import importlib.metadata as md

        return md.version("torch")
    except Exception:  # noqa: BLE001
        return "?"


def write_section(path: Path, text: str) -> None:
    """Replace the section under HEADING (up to the next '## ') or append it."""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    if HEADING in old:
        start = old.index(HEADING)
        nxt = old.find("\n## ", start + len(HEADING))
        new = old[:start] + text.rstrip() + "\n" + (old[nxt:] if nxt != -1 else "")
    else:
        new = old.rstrip() + "\n\n" + text.rstrip() + "\n"
    path.write_text(new)


if __name__ == "__main__":
    sys.exit(main())
