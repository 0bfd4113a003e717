"""Following the metrics of 1, 10 and 50 Azure ML jobs: requests and bytes per poll, dtrain next to what a
user would do instead (mlflow's MlflowClient.get_metric_history per job and key), both against the
emulator's MLflow tracking API (tests/azure_emulator), measured in one run.

Each job has KEYS metrics with HISTORY points already logged; between two polls every job logs NEW
more points per key. Per poll:
  * dtrain `metrics --follow` (one incremental reader per job): runs/get, then get-history of the keys
    that moved, from the page where the last read ended;
  * dtrain `watch` (the metric column): one runs/search for all jobs;
  * MlflowClient: get_metric_history(job, key) for every job and key (the whole history every time).
Bytes are response bodies as the emulator sent them.

    python benchmarks/metrics_polling.py [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from azure_emulator import AzureMLEmulator, fake_jwt  # noqa: E402

KEYS = ("loss", "learning_rate", "samples_per_s", "samples_per_s_rank0", "samples_per_s_rank1")
HISTORY = 200     # points per key already logged when following starts
NEW = 5           # points per key logged between two polls
POLLS = 3


def _cost(emu, since: int) -> tuple[int, int]:
    reqs = [q for q in emu.requests[since:] if "/mlflow/" in q.path]
    return len(reqs), sum(q.response_bytes for q in reqs)


def _log(emu, names, start: int, n: int) -> None:
    for name in names:
        for s in range(start, start + n):
            for i, k in enumerate(KEYS):
                emu.log_metric(name, k, 1.0 / (s + 1) + i, step=s, timestamp=1763856000000 + s)


def run(n_jobs: int) -> dict:
    os.environ.pop("AZUREML_CURRENT_CLOUD", None)
    with AzureMLEmulator(validate_jobs=False, check_references=False) as emu:
        os.environ.update(DTRAIN_ARM_ENDPOINT=emu.url, DTRAIN_ARM_TOKEN=fake_jwt(audience=emu.url + "/"),
                          DTRAIN_SUBSCRIPTION_ID=emu.subscription_id, DTRAIN_RESOURCE_GROUP=emu.resource_group,
                          DTRAIN_WORKSPACE=emu.workspace)
        names = [f"bench-{i}" for i in range(n_jobs)]
        for name in names:
            emu.mlflow.create_run(name, "bench")
        _log(emu, names, 0, HISTORY)
        from dtrain.backends.azure import AzureBackend
        from dtrain.backends.azure.mlflow_rest import RunMetrics, latest_by_run
        from dtrain.backends.base import JobInfo

        backend = AzureBackend()
        rest = backend._mlflow()
        readers = [RunMetrics(rest, n) for n in names]
        infos = [JobInfo(name=n, backend="azureml", status="Running", experiment_name="bench") for n in names]
        exp_ids = [rest.experiment_id("bench")]
        state: dict = {}

        # MlflowClient on the same emulator: the tracking URI as http, the token as MLFLOW_TRACKING_TOKEN
        from mlflow.tracking import MlflowClient

        os.environ["MLFLOW_TRACKING_TOKEN"] = os.environ["DTRAIN_ARM_TOKEN"]
        client = MlflowClient(tracking_uri=rest.base)

        first = emu.requests.__len__()
        for r in readers:
            r.poll()
        d_first = _cost(emu, first)
        step = HISTORY
        dtrain_follow, dtrain_watch, mlflow_client = [], [], []
        for _ in range(POLLS):
            _log(emu, names, step, NEW)
            step += NEW
            a = len(emu.requests)
            got = sum(len(v) for r in readers for v in r.poll().values())
            assert got == n_jobs * len(KEYS) * NEW, got
            dtrain_follow.append(_cost(emu, a))
            a = len(emu.requests)
            latest = latest_by_run(rest, [i.name for i in infos], exp_ids, state)
            assert len(latest) == n_jobs
            dtrain_watch.append(_cost(emu, a))
            a = len(emu.requests)
            total = sum(len(client.get_metric_history(n, k)) for n in names for k in KEYS)
            assert total == n_jobs * len(KEYS) * step
            mlflow_client.append(_cost(emu, a))

    def avg(xs):
        return {"requests": sum(x[0] for x in xs) / len(xs), "bytes": round(sum(x[1] for x in xs) / len(xs))}

    return {"jobs": n_jobs, "first_read": {"requests": d_first[0], "bytes": d_first[1]},
            "dtrain_follow": avg(dtrain_follow), "dtrain_watch": avg(dtrain_watch),
            "mlflow_client_history": avg(mlflow_client)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [run(n) for n in (1, 10, 50)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{len(KEYS)} metrics per job, {HISTORY} points each before following, {NEW} new points per key per poll")
    print("| jobs | dtrain metrics -f: requests / bytes per poll | dtrain watch: requests / bytes | "
          "MlflowClient.get_metric_history: requests / bytes |")
    print("|---|---|---|---|")
    for r in rows:
        f, w, m = r["dtrain_follow"], r["dtrain_watch"], r["mlflow_client_history"]
        print(f"| {r['jobs']} | {f['requests']:g} / {f['bytes']:,} | {w['requests']:g} / {w['bytes']:,} | "
              f"{m['requests']:g} / {m['bytes']:,} |")


if __name__ == "__main__":
    main()
