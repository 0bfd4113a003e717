"""A local job's system metrics: the supervisor samples its own processes into the job folder.

Every DTRAIN_LOCAL_SAMPLE_S seconds (default 5) a thread of the supervisor reads, for each rank, the
rank's process and its descendants (a data loader's workers count for their rank) from /proc: CPU time
(utime + stime, as a share of one core over the interval: ps's %CPU scale) and resident memory; and,
where the machine has NVIDIA GPUs, each GPU's utilization and memory (NVML through pynvml when it is
installed, else one `nvidia-smi --query-gpu` per sample). One JSON line per sample is appended to
`sysmetrics.jsonl`; the first line says the interval and the machine's limits. A rank costs two small
/proc reads per sample: docs/benchmarks.md measures the sampler at well under 1% of one core.

read() turns the file into the schema every backend shares (dtrain.sysmetrics): node = the rank's
node, device = `rankN` (GPUs: node "host", device = the GPU's index, as the machine's local nodes share
its GPUs).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from ...sysmetrics import Series, SysMetrics
from ...settings import current as settings
from .procs import stat_fields

FILE = "sysmetrics.jsonl"
ENV_INTERVAL = "DTRAIN_LOCAL_SAMPLE_S"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MB = 1024 * 1024


def _children(pid: int) -> list:
    out = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    return out


def tree(pid: int, limit: int = 256) -> list:
    """The process and its descendants (at most `limit`: a fork bomb is not worth following)."""
    seen: list = []
    todo = [pid]
    while todo and len(seen) < limit:
        p = todo.pop()
        if p not in seen:
            seen.append(p)
            todo += _children(p)
    return seen


def _stat(pid: int) -> tuple | None:
    """(CPU ticks used, resident bytes) of one process, None when it is gone."""
    rest = stat_fields(pid)
    if rest is None or len(rest) < 22 or rest[0] in ("Z", "X"):
        return None
    return int(rest[11]) + int(rest[12]), int(rest[21]) * _PAGE


def mem_total_mb() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024
    return None


class Gpus:
    """Each GPU's (index, utilization %, memory used MB, memory total MB); [] on a machine without one."""

    def __init__(self):
        self.nvml = None
        self.smi = None
        with contextlib.suppress(Exception):          # pynvml absent, or no driver: try nvidia-smi
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
        if self.nvml is None:
            self.smi = shutil.which("nvidia-smi")

    def read(self) -> list:
        if self.nvml is not None:
            out = []
            with contextlib.suppress(Exception):
                n = self.nvml
                for i in range(n.nvmlDeviceGetCount()):
                    h = n.nvmlDeviceGetHandleByIndex(i)
                    mem = n.nvmlDeviceGetMemoryInfo(h)
                    out.append([i, float(n.nvmlDeviceGetUtilizationRates(h).gpu), mem.used / _MB, mem.total / _MB])
            return out
        if not self.smi:
            return []
        try:
            text = subprocess.run([self.smi, "--query-gpu=index,utilization.gpu,memory.used,memory.total",
                                   "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10).stdout
            return [[int(a), float(b), float(c), float(d)] for a, b, c, d in
                    (line.split(",") for line in text.splitlines() if line.count(",") == 3)]
        except (OSError, ValueError, subprocess.SubprocessError):
            return []


class Sampler:
    """Samples the plan's processes (the supervisor's records: rank, node, pid) into job_dir/FILE."""

    def __init__(self, job_dir: Path, records: list, interval: float, gpus: Gpus | None = None):
        self.path = Path(job_dir) / FILE
        self.records, self.interval = records, interval
        self.gpus = gpus if gpus is not None else Gpus()
        self._last: dict = {}         # record index -> (monotonic time, CPU ticks of its tree)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def header(self) -> dict:
        return {"v": 1, "interval_s": self.interval, "mem_total_mb": mem_total_mb(), "cpus": os.cpu_count()}

    def sample(self) -> dict:
        now = time.monotonic()
        ranks = []
        for i, rec in enumerate(self.records):
            if rec.get("exit_code") is not None:
                continue
            ticks, rss = 0, 0
            for pid in tree(rec["pid"]):
                st = _stat(pid)
                if st:
                    ticks, rss = ticks + st[0], rss + st[1]
            prev = self._last.get(i)
            self._last[i] = (now, ticks)
            if prev is None or now <= prev[0]:
                continue             # the first reading is the baseline of the CPU share
            cpu = 100.0 * (ticks - prev[1]) / _TICKS / (now - prev[0])
            ranks.append([rec.get("node") or 0, rec.get("rank"), round(max(cpu, 0.0), 2), round(rss / _MB, 2)])
        return {"t": int(time.time() * 1000), "ranks": ranks, "gpus": self.gpus.read()}

    def _write(self, doc: dict) -> None:
        with contextlib.suppress(OSError), open(self.path, "a") as f:
            f.write(json.dumps(doc, separators=(",", ":")) + "\n")

    def run(self) -> None:
        self._write(self.header())
        self.sample()                 # the baseline
        while not self._stop.wait(self.interval):
            doc = self.sample()
            if doc["ranks"] or doc["gpus"]:
                self._write(doc)

    def start(self) -> "Sampler":
        self._thread = threading.Thread(target=self.run, name="dtrain-sysmetrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def start(job_dir: Path, records: list) -> Sampler | None:
    """The supervisor's hook: a sampler thread for the plan's processes (None when turned off with 0)."""
    interval = settings().number(ENV_INTERVAL)
    if interval <= 0:
        return None
    return Sampler(job_dir, records, interval).start()


def read(job_dir: Path, name: str, nodes: int = 1) -> SysMetrics:
    """The job's samples in the shared schema (an empty SysMetrics before the first)."""
    sm = SysMetrics(name, "local", [], nodes=nodes)
    series: dict = {}

    def add(node, device, metric, unit, t, v):
        key = (str(node), device, metric)
        if key not in series:
            series[key] = Series(str(node), device, metric, unit, [])
        series[key].points.append((t, v))

    with contextlib.suppress(OSError), open(Path(job_dir) / FILE, errors="replace") as f:
        for line in f:
            try:
                doc = json.loads(line)
            except ValueError:
                continue                  # a line cut by a crash
            if not isinstance(doc, dict):
                continue
            if "v" in doc:
                if doc.get("mem_total_mb"):
                    sm.limits["mem_rss"] = float(doc["mem_total_mb"])
                continue
            _add_sample(doc, add, sm.limits)
    sm.series = list(series.values())
    return sm


def latest_gpus(job_dir: Path, tail: int = 16384) -> tuple | None:
    """(timestamp ms, mean GPU utilization %) of the newest sample with GPUs, from the file's last
    `tail` bytes: watch reads this each poll, whatever the length of the job."""
    try:
        with open(Path(job_dir) / FILE, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        with contextlib.suppress(ValueError, TypeError, IndexError, AttributeError):
            doc = json.loads(line)
            gpus = doc.get("gpus")
            if gpus:
                return int(doc["t"]), sum(float(g[1]) for g in gpus) / len(gpus)
    return None


def _add_sample(doc: dict, add, limits: dict) -> None:
    t = doc.get("t") or 0
    with contextlib.suppress(TypeError, ValueError, IndexError):
        for node, rank, cpu, rss in doc.get("ranks") or []:
            device = f"rank{rank}" if rank is not None else "launcher"
            add(node, device, "cpu_util", "%", t, float(cpu))
            add(node, device, "mem_rss", "MB", t, float(rss))
        for idx, util, used, total in doc.get("gpus") or []:
            add("host", str(idx), "gpu_util", "%", t, float(util))
            add("host", str(idx), "gpu_mem", "MB", t, float(used))
            limits["gpu_mem"] = float(total)
