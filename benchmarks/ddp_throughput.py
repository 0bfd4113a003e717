"""Throughput and model FLOPs utilisation (MFU) of training_scripts/pytorch_ddp.py: the shipped loop
(bf16 autocast + TF32 on GPU) against the same loop in plain fp32 (--fp32), in one run.

Launches N processes with the environment Azure ML / dtrain give them (one GPU per LOCAL_RANK),
parses each run's samples/s, and computes MFU = samples/s x FLOPs per sample / (peak x GPUs), with
FLOPs per sample = 6 x weights of the MLP (forward 2, backward 4). Standalone: needs only torch.

    python benchmarks/ddp_throughput.py --procs 1 --hidden 8192 --layers 8 --batch-size 4096 \
        --steps 200 --peak-tflops 989      # H100/H200 dense bf16 peak per GPU
On CPU (no --peak-tflops) it prints samples/s only.
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "training_scripts" / "pytorch_ddp.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(procs: int, extra: list[str], timeout: float) -> float:
    port = free_port()
    # A fresh checkpoint folder per run: a run must not resume from the previous one.
    extra = [*extra, "--output-dir", tempfile.mkdtemp(prefix="ddp-bench-")]
    children = []
    for r in range(procs):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(procs),
                   RANK=str(r), LOCAL_RANK=str(r), NODE_RANK="0", LOCAL_WORLD_SIZE=str(procs),
                   PYTHONUNBUFFERED="1")
        children.append(subprocess.Popen([sys.executable, str(SCRIPT), *extra], env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [c.communicate(timeout=timeout)[0] for c in children]
    if any(c.returncode for c in children):
        raise SystemExit("run failed:\n" + "\n".join(o[-2000:] for o in outs))
    # Sum of per-rank steady rates: each rank prints `rank=R samples_per_s=X` at the end.
    rates = [float(m) for o in outs for m in re.findall(r"^rank=\d+ samples_per_s=([\d.]+)", o, re.M)]
    return sum(rates)


def flops_per_sample(in_dim: int, hidden: int, layers: int, out_dim: int) -> float:
    weights = in_dim * hidden + (layers - 1) * hidden * hidden + hidden * out_dim
    return 6.0 * weights


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--in-dim", type=int, default=16)
    ap.add_argument("--out-dim", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--peak-tflops", type=float, default=None, help="peak dense TFLOP/s per GPU for MFU")
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()
    common = ["--hidden", str(a.hidden), "--layers", str(a.layers), "--in-dim", str(a.in_dim),
              "--out-dim", str(a.out_dim), "--batch-size", str(a.batch_size), "--samples", str(a.samples),
              "--steps", str(a.steps), "--epochs", "1000", "--log-every", "1000000", "--checkpoint-every", "0"]
    fps = flops_per_sample(a.in_dim, a.hidden, a.layers, a.out_dim)
    results = {"fp32 (--fp32)": run(a.procs, common + ["--fp32"], a.timeout),
               "shipped (bf16 + TF32 on GPU)": run(a.procs, common, a.timeout)}
    base = results["fp32 (--fp32)"]
    print(f"| loop | samples/s ({a.procs} proc) | TFLOP/s | MFU | vs fp32 |")
    print("|---|---|---|---|---|")
    for k, v in results.items():
        tf = v * fps / 1e12
        mfu = f"{tf / (a.peak_tflops * a.procs):.1%}" if a.peak_tflops else "n/a"
        print(f"| {k} | {v:,.0f} | {tf:.2f} | {mfu} | {v / base:.2f}x |")


if __name__ == "__main__":
    main()
