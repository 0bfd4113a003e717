"""Peak memory (RSS) of whole dtrain processes reading logs, against the log's size.

For each size, one local job writes a log of that size (one rank, 100-byte lines); then, each in its
own process with stdout to /dev/null, the peak RSS (the child's VmHWM, read until it exits) of:
  - `dtrain submit SPEC --local --wait`  (follows the log while the job writes it)
  - `dtrain logs NAME`                   (reads the finished log)
  - `dtrain logs NAME --follow`          (follows a finished job: drains and exits)
  - `dtrain logs NAME --follow` on a second job, started while that job writes its log
With --azure, also `dtrain logs NAME` for an Azure ML job served by tests/azure_emulator (the
emulator runs in this process; only the dtrain child is measured).
With --src PATH, the dtrain under PATH/src is measured instead (e.g. an older checkout).

    python benchmarks/log_memory.py [--sizes 10,100,300] [--azure 10,100] [--src PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = b"x" * 99 + b"\n"
WRITER = ("import sys; w = sys.stdout.buffer; block = b'x' * 99 + b'\\n'; "
          "[w.write(block * 10000) for _ in range({blocks})]")


def _hwm_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def peak_rss_mb(cmd, env) -> tuple[float, int, float]:
    """(peak RSS in MiB, exit code, seconds) of one child process, measured alone.

    The peak is the child's own VmHWM (its high-water mark since exec), read until it exits. Not
    ru_maxrss: Linux carries the pre-exec image into it, so a child of a big parent (the emulator
    runs in this process) would report the parent's size."""
    t = time.perf_counter()
    peak = 0.0
    with open(os.devnull, "wb") as devnull:
        p = subprocess.Popen(cmd, env=env, stdout=devnull, stderr=subprocess.DEVNULL)
        while True:
            hwm = _hwm_mb(p.pid)
            if hwm is not None:
                peak = max(peak, hwm)
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.02)
    return peak or usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), time.perf_counter() - t
def local_rows(sizes, env, tmp: Path):
    rows = []
    dtrain = [sys.executable, "-m", "dtrain"]
    for mb in sizes:
        spec = tmp / f"job{mb}.yml"
        blocks = mb * 1024 * 1024 // (len(LINE) * 10000)
        spec.write_text(f'command: python -c "{WRITER.format(blocks=blocks)}"\n'
                        "environment: azureml:env@latest\ncompute: local\n")
        name = f"mem{mb}"
        sub = peak_rss_mb(dtrain + ["submit", str(spec), "--wait", "--name", name], env)
        log = next((Path(env["DTRAIN_HOME"]) / "jobs" / name / "user_logs").glob("std_log*.txt"))
        size = log.stat().st_size / 2**20
        rows.append((f"local, {size:.0f} MB", "submit --local --wait", *sub))
        rows.append((f"local, {size:.0f} MB", "logs NAME", *peak_rss_mb(dtrain + ["logs", name], env)))
        rows.append((f"local, {size:.0f} MB", "logs NAME --follow",
                     *peak_rss_mb(dtrain + ["logs", name, "--follow"], env)))
        shutil.rmtree(Path(env["DTRAIN_HOME"]) / "jobs" / name, ignore_errors=True)
        # following a log while the job still writes it (every status check then races the writer)
        name = f"memf{mb}"
        subprocess.run(dtrain + ["submit", str(spec), "--name", name], env=env, capture_output=True, check=True)
        rows.append((f"local, {size:.0f} MB", "logs NAME --follow, while written",
                     *peak_rss_mb(dtrain + ["logs", name, "--follow"], env)))
        shutil.rmtree(Path(env["DTRAIN_HOME"]) / "jobs" / name, ignore_errors=True)
    return rows


def azure_rows(sizes, env, tmp: Path):
    sys.path.insert(0, str(ROOT / "tests"))
    from azure_emulator import AzureMLEmulator, fake_jwt

    rows = []
    (tmp / "src").mkdir(exist_ok=True)
    (tmp / "src" / "train.py").write_text("print('x')\n")
    (tmp / "azjob.yml").write_text("command: python train.py\ncode: src\nenvironment: {image: "
                                   "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04}\ncompute: azureml:cpu-cluster\n")
    with AzureMLEmulator() as emu:
        aenv = dict(env, DTRAIN_ARM_ENDPOINT=emu.url, DTRAIN_ARM_TOKEN=fake_jwt(audience=emu.url + "/"),
                    DTRAIN_SUBSCRIPTION_ID=emu.subscription_id, DTRAIN_RESOURCE_GROUP=emu.resource_group,
                    DTRAIN_WORKSPACE=emu.workspace)
        for mb in sizes:
            name = f"azmem{mb}"
            emu.script_job_statuses(["Running", "Completed"], None, job=name)
            r = subprocess.run([sys.executable, "-m", "dtrain", "submit", str(tmp / "azjob.yml"), "--name", name],
                           env=aenv, cwd=tmp, capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(f"submit to the emulator failed: {r.stderr}")
            emu.append_log(name, (LINE * (mb * 1024 * 1024 // len(LINE))).decode())
            rows.append((f"Azure (emulator), {mb} MB", "logs NAME",
                         *peak_rss_mb([sys.executable, "-m", "dtrain", "logs", name], aenv)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,100,300", help="local log sizes in MB")
    ap.add_argument("--azure", default="", help="Azure (emulator) log sizes in MB, e.g. 10,100")
    ap.add_argument("--src", default=str(ROOT), help="checkout whose src/ is measured")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="dtrain-logmem-"))
    env = dict(os.environ, DTRAIN_HOME=str(tmp / "home"), NO_COLOR="1", GITHUB_ACTIONS="", TF_BUILD="",
               PYTHONPATH=str(Path(args.src) / "src"))
    try:
        rows = local_rows([int(x) for x in args.sizes.split(",") if x], env, tmp)
        if args.azure:
            rows += azure_rows([int(x) for x in args.azure.split(",") if x], env, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("| log | command | peak RSS (MiB) | exit | wall (s) |")
    print("|---|---|---:|---:|---:|")
    for log, cmd, rss, rc, secs in rows:
        print(f"| {log} | `{cmd}` | {rss:.0f} | {rc} | {secs:.1f} |")
    print(json.dumps([dict(zip(("log", "command", "peak_rss_mib", "exit", "wall_s"), r)) for r in rows]),
          file=sys.stderr)


if __name__ == "__main__":
    main()
