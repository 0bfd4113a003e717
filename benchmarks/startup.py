"""Whole-process start-up of dtrain commands against `python -c "import azure.ai.ml"`, in one run.

Goal (issue: foundation): `dtrain --help` and `dtrain validate` take at most 0.15 of the SDK import.
Usage: python benchmarks/startup.py [--runs 15]   (prints a markdown table for docs/benchmarks.md)
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """\
command: python train.py --epochs ${{inputs.epochs}}
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
inputs: {epochs: 3}
distribution: {type: pytorch, process_count_per_instance: 8}
resources: {instance_count: 2, instance_type: Standard_ND96isr_H100_v5}
"""


def timed(cmd, runs):
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    spec = Path(tempfile.mkdtemp()) / "job.yml"
    spec.write_text(SPEC)
    py = sys.executable
    cases = {
        "python -c pass (interpreter floor)": [py, "-c", "pass"],
        'python -c "import azure.ai.ml" (baseline)': [py, "-c", "import azure.ai.ml"],
        "dtrain --help": [py, "-m", "dtrain", "--help"],
        "dtrain validate job.yml": [py, "-m", "dtrain", "validate", str(spec)],
        "dtrain render job.yml --format rest": [py, "-m", "dtrain", "render", str(spec), "--format", "rest"],
    }
    for cmd in cases.values():  # warm the page cache and .pyc files
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    res = {k: timed(v, args.runs) for k, v in cases.items()}
    base = res['python -c "import azure.ai.ml" (baseline)']
    print(f"| command | median wall time (s), {args.runs} runs | ratio to SDK import |")
    print("|---|---|---|")
    for k, v in res.items():
        print(f"| `{k}` | {v:.3f} | {v / base:.3f} |")


if __name__ == "__main__":
    main()
