"""Peak memory (RSS) and wall time of whole `dtrain metrics` processes against the number of points a local
job logged, for each output (text, json, csv), and the same for a checkout given with --src (the baseline,
e.g. the commit before streaming), in the same run.

One local job (`echo`) is submitted, then its MLflow store gets one metric of N points written straight
into it (the file store's format: `timestamp value step` lines), so the measured work is dtrain reading
and printing them. stdout goes to /dev/null; the peak RSS is the child's ru_maxrss.

    python benchmarks/metrics_memory.py [--points 100000,1000000] [--src PATH]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = "command: echo hi\nenvironment: azureml:env@latest\ncompute: local\n"


def measure(src: Path, env: dict, args: list) -> tuple[float, float]:
    """(seconds, peak MB) of `dtrain ARGS` run from checkout `src`, in a child of its own."""
    code = ("import resource, subprocess, sys, time; t = time.monotonic(); "
            "subprocess.run([sys.executable, '-m', 'dtrain', *sys.argv[1:]], stdout=subprocess.DEVNULL, check=True); "
            "print(time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)")
    out = subprocess.run([sys.executable, "-c", code, *args], env={**env, "PYTHONPATH": str(src / "src")},
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def job_with_points(home: Path, n: int) -> str:
    spec = home.parent / "job.yml"
    spec.write_text(SPEC)
    env = {**os.environ, "DTRAIN_HOME": str(home), "PYTHONPATH": str(ROOT / "src")}
    subprocess.run([sys.executable, "-m", "dtrain", "submit", str(spec), "--local", "--wait", "--name", "big", "-q"],
                   env=env, check=True, capture_output=True)
    metrics = next((home / "jobs" / "big" / "mlruns").glob("*/big/metrics"))
    with open(metrics / "loss", "w") as f:
        for i in range(n):
            f.write(f"{1_700_000_000_000 + i} {1.0 / (i + 1)} {i}\n")
    return "big"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", default="100000,1000000")
    ap.add_argument("--src", type=Path, help="a baseline checkout to measure beside this one")
    a = ap.parse_args()
    checkouts = [("this", ROOT)] + ([("baseline", a.src)] if a.src else [])
    print("| points | output | " + " | ".join(f"{n}: s / peak MB" for n, _ in checkouts) + " |")
    print("|---|---|" + "---|" * len(checkouts))
    for n in (int(x) for x in a.points.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            env = {**os.environ, "DTRAIN_HOME": str(home), "NO_COLOR": "1"}
            name = job_with_points(home, n)
            for output in ("text", "json", "csv"):
                cells = []
                for _, src in checkouts:
                    secs, mb = measure(src, env, ["metrics", name, "-o", output])
                    cells.append(f"{secs:.1f} / {mb:.0f}")
                print(f"| {n:,} | {output} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
