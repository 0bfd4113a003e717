"""What system metrics cost, in one run:

1. The local sampler (backends/local/sysmetrics.py): CPU time of one sample of a job's ranks, each rank a
   process with CHILDREN children of its own (a data loader's workers), read from /proc as the
   supervisor's thread does; the share of one core it costs at the default interval (5 s), next to
   `ps -o pid,rss,%cpu` over the same processes (what a user would run instead), timed the same way.
2. Azure Monitor (backends/azure/monitor.py) against the emulator: requests and response bytes of
   `top` for a 2-node x 8-GPU job that ran an hour (one Metrics_List for every metric, both namings),
   and of watch's GPU column for 1, 10 and 50 jobs (one Metrics_List per poll for all of them).

    python benchmarks/sysmetrics_cost.py [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

RANKS, CHILDREN, SAMPLES, INTERVAL_S = 8, 2, 400, 5.0


def _spawn_ranks() -> list:
    code = f"import subprocess,time; ps=[subprocess.Popen(['sleep','120']) for _ in range({CHILDREN})]; time.sleep(120)"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(RANKS)]


def sampler_cost() -> dict:
    import tempfile

    from dtrain.backends.local.sysmetrics import Gpus, Sampler, tree

    procs = _spawn_ranks()
    try:
        time.sleep(1.0)                                      # their children started
        records = [{"rank": r, "node": r // 4, "pid": p.pid, "exit_code": None} for r, p in enumerate(procs)]
        with tempfile.TemporaryDirectory() as d:
            s = Sampler(Path(d), records, INTERVAL_S, gpus=Gpus())
            s.sample()
            t0 = time.process_time()
            for _ in range(SAMPLES):
                s._write(s.sample())
            per = (time.process_time() - t0) / SAMPLES
            size = (Path(d) / "sysmetrics.jsonl").stat().st_size / SAMPLES
        pids = ",".join(str(p) for r in records for p in tree(r["pid"]))
        t0 = time.perf_counter()
        for _ in range(20):
            subprocess.run(["ps", "-o", "pid=,rss=,%cpu=", "-p", pids], capture_output=True, check=True)
        ps = (time.perf_counter() - t0) / 20
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return {"ranks": RANKS, "processes": RANKS * (1 + CHILDREN), "sample_ms": per * 1000,
            "share_of_one_core_pct": 100 * per / INTERVAL_S, "bytes_per_sample": size, "ps_wall_ms": ps * 1000}


def monitor_cost() -> dict:
    from azure_emulator import AzureMLEmulator, fake_jwt

    os.environ.pop("AZUREML_CURRENT_CLOUD", None)
    out: dict = {}
    with AzureMLEmulator(validate_jobs=False, check_references=False) as emu:
        env = {"DTRAIN_ARM_ENDPOINT": emu.url, "DTRAIN_ARM_TOKEN": fake_jwt(audience=emu.url + "/"),
               "DTRAIN_SUBSCRIPTION_ID": emu.subscription_id, "DTRAIN_RESOURCE_GROUP": emu.resource_group,
               "DTRAIN_WORKSPACE": emu.workspace}
        os.environ.update(env)
        from dtrain.backends.azure import AzureBackend
        from dtrain.backends.azure.monitor import latest_gpu_util, job_series

        now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
        vals = {m: (lambda k, d, i: 50.0 + d) for m in ("gpu_util", "gpu_mem", "gpu_energy", "cpu_util", "ib_tx",
                                                        "ib_rx", "disk_used")}
        emu.monitor.record_job("big", nodes=2, gpus=8, start=now - timedelta(hours=1), minutes=60, values=vals)
        for i in range(50):
            emu.monitor.record_job(f"w{i}", nodes=1, gpus=8, start=now - timedelta(minutes=5), minutes=5,
                                   values={"gpu_util": lambda k, d, m: 70.0})
        b = AzureBackend()
        b.ml
        rest = b._monitor()

        def measure(fn) -> tuple:
            before = len(emu.requests)
            fn()
            reqs = emu.requests[before:]
            return len(reqs), sum(q.response_bytes or 0 for q in reqs)

        n, size = measure(lambda: job_series(rest, "big", now - timedelta(hours=1, minutes=1), now))
        out["top_2x8_1h"] = {"requests": n, "bytes": size}
        for jobs in (1, 10, 50):
            n, size = measure(lambda: latest_gpu_util(rest, [f"w{i}" for i in range(jobs)]))
            out[f"watch_{jobs}_jobs"] = {"requests": n, "bytes": size}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = {"sampler": sampler_cost(), "monitor": monitor_cost()}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    s = result["sampler"]
    print(f"sampler: {s['ranks']} ranks ({s['processes']} processes): {s['sample_ms']:.2f} ms CPU a sample, "
          f"{s['share_of_one_core_pct']:.3f}% of one core at {INTERVAL_S:.0f} s, {s['bytes_per_sample']:.0f} bytes a sample; "
          f"`ps` over the same processes: {s['ps_wall_ms']:.1f} ms wall")
    for k, v in result["monitor"].items():
        print(f"{k}: {v['requests']} request(s), {v['bytes']:,} bytes")


if __name__ == "__main__":
    main()
