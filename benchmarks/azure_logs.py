"""Following Azure ML job logs: dtrain's Azure backend next to azure-ai-ml's own ml_client.jobs.stream(),
both through the real SDK and HTTP pipeline against the emulator in tests/azure_emulator.

Measures, in one run:
  1. bytes fetched from log files per byte of log shown (one job, one log file);
  2. delay from a line being written (emu.append_log) to it being shown;
  3. requests per minute to follow 1, 10 and 50 running jobs: `dtrain watch` (one list call per poll,
     5 s interval) and `dtrain wait` (one list call per poll for several jobs, capped at 10 s) next to one
     jobs.stream() per job (the SDK has no multi-job follow).

    python benchmarks/azure_logs.py [--window 20] [--json]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from azure_emulator import AzureMLEmulator, fake_jwt, make_ml_client  # noqa: E402

JOB = """\
command: python train.py
code: src
environment: {image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04}
compute: azureml:cpu-cluster
experiment_name: bench
"""
RUNNING = ["Queued"] + ["Running"] * 10000


def _setup(emu, tmp: Path):
    (tmp / "src").mkdir(exist_ok=True)
    (tmp / "src" / "train.py").write_text("print('x')\n")
    (tmp / "job.yml").write_text(JOB)
    os.environ.update(DTRAIN_ARM_ENDPOINT=emu.url, DTRAIN_ARM_TOKEN=fake_jwt(audience=emu.url + "/"),
                      DTRAIN_SUBSCRIPTION_ID=emu.subscription_id, DTRAIN_RESOURCE_GROUP=emu.resource_group,
                      DTRAIN_WORKSPACE=emu.workspace)
    from dtrain.backends.azure import AzureBackend
    from dtrain.spec.validate import load_spec

    backend = AzureBackend()
    spec, _ = load_spec(tmp / "job.yml")
    return backend, spec


def _submit(backend, spec, name):
    from dtrain.backends.base import SubmitOptions

    return backend.submit(backend.plan(spec, SubmitOptions(name=name))).name


def _log_bytes(emu, job):
    return len(emu.log_content(job, emu.log_file_names(job)[0]).encode())


def _fetched(emu, job, since):
    return sum(r.response_bytes for r in emu.requests[since:] if f"dcid.{job}/" in r.path)


class _Lines(io.TextIOBase):
    """stdout stand-in for jobs.stream(): timestamps each MARK line."""

    def __init__(self, seen):
        self.seen, self.buf = seen, ""

    def write(self, s):
        self.buf += s
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            if "MARK " in line:
                self.seen[line.split("MARK ", 1)[1].split()[0]] = time.time()
        return len(s)


def follow_run(emu, backend, ml, spec, who: str, seconds: float):
    """One job followed for `seconds` while MARK lines are appended every 0.5 s."""
    name = f"{who}-logs"
    emu.script_job_statuses(RUNNING, 1.0, job=name)
    _submit(backend, spec, name)
    start = len(emu.requests)
    written, seen = {}, {}
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            written[str(i)] = time.time()
            emu.append_log(name, f"MARK {i} {'x' * 60}\n")
            i += 1
            time.sleep(0.5)

    def reader():
        if who == "dtrain":
            for line in backend.logs(name, follow=True):
                if "MARK " in line.text:
                    seen[line.text.split("MARK ", 1)[1].split()[0]] = time.time()
        else:
            with contextlib.redirect_stdout(_Lines(seen)):
                try:
                    ml.jobs.stream(name)
                except Exception:  # noqa: BLE001 - the stream ends when the job is cancelled
                    pass

    w = threading.Thread(target=writer, daemon=True)
    r = threading.Thread(target=reader, daemon=True)
    w.start()
    r.start()
    time.sleep(seconds)
    stop.set()
    w.join()
    time.sleep(4)                                  # let both catch up with the last lines
    size = _log_bytes(emu, name)
    fetched = _fetched(emu, name, start)
    reqs = len([q for q in emu.requests[start:] if name in q.path])
    emu.script_job_statuses(["Completed"], None, job=name)
    r.join(timeout=15)
    delays = [seen[k] - written[k] for k in written if k in seen]
    return {"log_bytes": size, "fetched_bytes": fetched, "bytes_per_log_byte": round(fetched / max(size, 1), 2),
            "lines_written": len(written), "lines_shown": len(delays),
            "delay_median_s": round(statistics.median(delays), 2) if delays else None,
            "delay_p90_s": round(sorted(delays)[int(0.9 * (len(delays) - 1))], 2) if delays else None,
            "requests": reqs}


def rate_run(emu, backend, ml, spec, who: str, n: int, window: float):
    """Requests per minute to follow n running jobs."""
    tag = f"{who}{n}"
    names = [f"{tag}-{i}" for i in range(n)]
    emu.script_job_statuses(RUNNING, 1.0)
    body = None
    for i, nm in enumerate(names):
        if body is None:
            _submit(backend, spec, nm)
            body = emu.jobs[nm]
            body["properties"]["tags"] = {"bench": tag}
            continue
        emu._put_job(nm, json.loads(json.dumps(body)))      # same resolved body, without the SDK round trips
    emu._jobs[names[0]].body["properties"]["tags"] = {"bench": tag}
    stop = threading.Event()
    start = len(emu.requests)
    t0 = time.time()
    threads = []
    if who == "dtrain-watch":
        from dtrain.watch import _poll

        def loop():
            while not stop.is_set():
                _poll(backend, None, None, {"bench": tag})
                stop.wait(5.0)
        threads.append(threading.Thread(target=loop, daemon=True))
    elif who == "dtrain-wait":
        from dtrain import follow

        def loop():
            try:
                follow.wait_all({nm: backend for nm in names}, timeout=window)
            except follow.WaitTimeout:
                pass
        threads.append(threading.Thread(target=loop, daemon=True))
    else:
        sink = io.StringIO()

        def one(nm):
            with contextlib.redirect_stdout(sink):
                try:
                    ml.jobs.stream(nm)
                except Exception:  # noqa: BLE001
                    pass
        threads += [threading.Thread(target=one, args=(nm,), daemon=True) for nm in names]
    for t in threads:
        t.start()
    time.sleep(window)
    stop.set()
    elapsed = time.time() - t0
    count = len(emu.requests) - start
    for nm in names:
        emu.script_job_statuses(["Completed"], None, job=nm)
    for t in threads:
        t.join(timeout=20)
    return round(count * 60 / elapsed)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=float, default=20.0, help="seconds measured per configuration")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import logging
    import tempfile
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("azure").setLevel(logging.CRITICAL)
    results = {}
    with tempfile.TemporaryDirectory() as tmp, AzureMLEmulator(page_size=20) as emu:
        backend, spec = _setup(emu, Path(tmp))
        ml = make_ml_client(emu)
        for who in ("dtrain", "sdk"):
            results[f"follow_{who}"] = follow_run(emu, backend, ml, spec, who, args.window)
        for who in ("dtrain-watch", "dtrain-wait", "sdk-stream"):
            results[f"rpm_{who}"] = {n: rate_run(emu, backend, ml, spec, who, n, args.window) for n in (1, 10, 50)}
    sys.stdout = sys.__stdout__        # the streams' redirect_stdout, from many threads, may not restore it
    if args.json:
        print(json.dumps(results, indent=2))
        return
    d, s = results["follow_dtrain"], results["follow_sdk"]
    print(f"one job followed for {args.window:g} s (a 64-byte line every 0.5 s, plus 3 lines/s):")
    print(f"  bytes fetched per byte of log: dtrain {d['bytes_per_log_byte']}, jobs.stream {s['bytes_per_log_byte']}")
    print(f"  write-to-shown delay median/p90: dtrain {d['delay_median_s']}/{d['delay_p90_s']} s, "
          f"jobs.stream {s['delay_median_s']}/{s['delay_p90_s']} s")
    print(f"  lines shown: dtrain {d['lines_shown']}/{d['lines_written']}, jobs.stream {s['lines_shown']}/{s['lines_written']}")
    print("requests per minute, following N running jobs:")
    for who in ("dtrain-watch", "dtrain-wait", "sdk-stream"):
        r = results[f"rpm_{who}"]
        print(f"  {who:<13} " + "  ".join(f"{n:>2} jobs: {r[n]:>5}" for n in (1, 10, 50)))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
