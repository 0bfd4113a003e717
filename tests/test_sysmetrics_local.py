"""System metrics of local jobs: the supervisor's sampler (backends/local/sysmetrics.py) reads each rank's
processes from /proc into the job folder, and `dtrain top` reads them back in the schema Azure's share."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from dtrain.backends.local import sysmetrics as local_sm

STUBS = Path(__file__).parent / "stubs"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_sampler_reads_a_process_tree_and_read_gives_the_schema(tmp_path):
    child = subprocess.Popen(["sleep", "5"])
    try:
        s = local_sm.Sampler(tmp_path, [{"rank": 0, "node": 0, "pid": os.getpid(), "exit_code": None},
                                        {"rank": 1, "node": 1, "pid": child.pid, "exit_code": None}],
                             interval=1.0, gpus=local_sm.Gpus.__new__(local_sm.Gpus))
        s.gpus.nvml, s.gpus.smi = None, None
        assert child.pid in local_sm.tree(os.getpid())          # a rank's children count for it
        s._write(s.header())
        s.sample()
        t = time.process_time()
        while time.process_time() - t < 0.15:                    # burn some CPU between the samples
            pass
        doc = s.sample()
        s._write(doc)
        with open(tmp_path / local_sm.FILE, "a") as f:
            f.write('{"t": 1, "ranks": [[0, 0, 5')                # a line cut by a crash is skipped
    finally:
        child.kill()
        child.wait()
    sm = local_sm.read(tmp_path, "j", nodes=2)
    cpu = {(x.node, x.device): x for x in sm.of("cpu_util")}
    mem = {(x.node, x.device): x for x in sm.of("mem_rss")}
    assert set(cpu) == set(mem) == {("0", "rank0"), ("1", "rank1")}
    assert cpu[("0", "rank0")].last() > 5 and cpu[("1", "rank1")].last() < 5
    assert abs(mem[("0", "rank0")].last() - _rss_mb(os.getpid())) < 0.2 * _rss_mb(os.getpid())
    assert sm.limits["mem_rss"] > 100 and sm.source == "local" and not sm.of("gpu_util")


def test_sampler_off_with_zero(tmp_path, monkeypatch):
    monkeypatch.setenv(local_sm.ENV_INTERVAL, "0")
    assert local_sm.start(tmp_path, []) is None
    assert local_sm.read(tmp_path, "j").series == []


JOB = """\
command: python hw_stub.py
code: src
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
compute: local
distribution:
  type: pytorch
  process_count_per_instance: 2
resources:
  instance_count: 2
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_local_2x2_top_json_matches_ps(cli, write):
    """4 ranks on 2 nodes: top -o json has CPU and memory series per rank that match what ps saw (20%)."""
    write("src/hw_stub.py", (STUBS / "hw_stub.py").read_text())
    spec = write("job.yml", JOB)
    env = {"DTRAIN_LOCAL_SAMPLE_S": "0.5", "HW_STUB_S": "5"}
    r = cli("submit", str(spec), "--name", "hwjob", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    state = Path(os.environ["DTRAIN_HOME"]) / "jobs" / "hwjob" / "state.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not json.loads(state.read_text()).get("processes"):
        time.sleep(0.2)
    procs = {p["pid"]: p for p in json.loads(state.read_text())["processes"]}
    time.sleep(3.0)
    ps = subprocess.run(["ps", "-o", "pid=,rss=,%cpu=", "-p", ",".join(map(str, procs))], capture_output=True, text=True)
    t_ps = time.time() * 1000
    seen = {int(a): (int(b) / 1024, float(c)) for a, b, c in (line.split() for line in ps.stdout.splitlines())}
    assert len(seen) == 4, ps.stdout
    assert cli("wait", "hwjob", timeout=120).returncode == 0
    t = cli("top", "hwjob", "-o", "json")
    assert t.returncode == 0, t.stderr
    doc = json.loads(t.stdout)
    series = {(s["node"], s["device"], s["metric"]): s["points"] for s in doc["series"]}
    ranks = {(str(p["node"]), f"rank{p['rank']}") for p in procs.values()}
    assert ranks == {("0", "rank0"), ("0", "rank1"), ("1", "rank2"), ("1", "rank3")}
    for pid, (rss, cpu) in seen.items():
        node, dev = str(procs[pid]["node"]), f"rank{procs[pid]['rank']}"
        mem = series[(node, dev, "mem_rss")]
        near = min(mem, key=lambda p: abs(p["timestamp"] - t_ps))["value"]
        assert abs(near - rss) <= 0.2 * rss, (dev, near, rss)
        ours = [p["value"] for p in series[(node, dev, "cpu_util")] if p["timestamp"] <= t_ps + 500]
        mean = sum(ours) / len(ours)
        assert abs(mean - cpu) <= 0.2 * cpu + 2.0, (dev, mean, cpu, ours)   # ps: the share over its life
    text = cli("top", "hwjob")
    assert text.returncode == 0 and "rank3" in text.stdout and "CPU%" in text.stdout


def test_gpus_from_nvidia_smi_become_gpu_series(tmp_path):
    """No GPU here: a stand-in nvidia-smi answers the query in its csv,noheader,nounits format."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, 97, 71234, 81559'\necho '1, 3, 512, 81559'\n")
    smi.chmod(0o755)
    g = local_sm.Gpus.__new__(local_sm.Gpus)
    g.nvml, g.smi = None, str(smi)
    assert g.read() == [[0, 97.0, 71234.0, 81559.0], [1, 3.0, 512.0, 81559.0]]
    s = local_sm.Sampler(tmp_path, [], interval=1.0, gpus=g)
    for _ in range(3):
        s._write(s.sample())
    sm = local_sm.read(tmp_path, "j")
    util = {x.device: x for x in sm.of("gpu_util")}
    assert set(util) == {"0", "1"} and util["1"].mean() == 3.0 and util["0"].node == "host"
    assert sm.limits["gpu_mem"] == 81559.0 and [x.mean() for x in sm.of("gpu_mem")] == [71234.0, 512.0]


def test_watch_reads_the_latest_gpu_sample_from_the_tail(tmp_path):
    lines = [json.dumps({"v": 1})] + [json.dumps({"t": i, "ranks": [], "gpus": [[0, 10.0 * i, 1, 2], [1, 0.0, 1, 2]]})
                                      for i in range(2000)]
    (tmp_path / local_sm.FILE).write_text("\n".join(lines) + '\n{"t": 5, "gpus": [[0, 9')
    assert local_sm.latest_gpus(tmp_path) == (1999, 9995.0)
    assert local_sm.latest_gpus(tmp_path / "none") is None
