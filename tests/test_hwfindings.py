"""The findings over a job's system metrics (dtrain.hwfindings): pure functions, each with its numbers."""
from __future__ import annotations

from dtrain.hwfindings import findings, idle_gpus, memory_near_limit, nccl_on_sockets, stragglers
from dtrain.sysmetrics import Series, SysMetrics, csv_text, with_gpu_util
from dtrain.sysmetrics_view import render_text


def gpus(util, nodes=2, per_node=8, n=6, vm="Standard_ND96isr_H100_v5", ib=None, **kw) -> SysMetrics:
    series = [Series(str(k), str(d), "gpu_util", "%", [(60000 * m, util(k, d, m)) for m in range(n)])
              for k in range(nodes) for d in range(per_node)]
    if ib is not None:
        series += [Series(str(k), "", m, "MB", [(60000 * i, ib) for i in range(n)]) for k in range(nodes)
                   for m in ("ib_tx", "ib_rx")]
    return SysMetrics("j", "azure-monitor", series, nodes=nodes, vm_size=vm, **kw)


def test_ib_zero_on_an_infiniband_size_with_two_nodes_is_nccl_on_sockets():
    sm = gpus(lambda k, d, m: 90.0, ib=0.0)
    (f,) = nccl_on_sockets(sm)
    assert f.kind == "nccl-sockets" and f.numbers == {"nodes": 2, "ib_tx_mb": 0.0, "ib_rx_mb": 0.0,
                                                      "vm_size": "Standard_ND96isr_H100_v5"}
    assert "NCCL_DEBUG=INFO" in f.hint
    assert nccl_on_sockets(gpus(lambda k, d, m: 90.0, ib=800.0)) == []                 # IB in use
    assert nccl_on_sockets(gpus(lambda k, d, m: 90.0, ib=0.0, nodes=1)) == []          # one node needs none
    assert nccl_on_sockets(gpus(lambda k, d, m: 90.0, ib=0.0, vm="Standard_NC24ads_A100_v4")) == []   # no IB
    assert nccl_on_sockets(gpus(lambda k, d, m: 90.0)) == []                           # IB not reported: unknown


def test_one_gpu_at_5_among_95_is_a_straggler_with_its_node_and_device():
    sm = gpus(lambda k, d, m: 5.0 if (k, d) == (1, 3) else 95.0)
    (f,) = stragglers(sm)
    assert (f.node, f.device) == ("1", "3") and f.numbers["mean_pct"] == 5.0 and f.numbers["median_pct"] == 95.0
    assert "node 1 GPU 3" in f.message and idle_gpus(sm) == []


def test_a_whole_slow_node_is_one_finding_and_all_idle_is_idle():
    (f,) = stragglers(gpus(lambda k, d, m: 20.0 if k == 1 else 90.0))
    assert (f.node, f.device) == ("1", None) and "node 1:" in f.message
    idle = gpus(lambda k, d, m: 2.0 if m else 60.0)                 # busy for a moment, idle after
    assert [x.kind for x in findings(idle)] == ["idle-gpus"]
    assert findings(gpus(lambda k, d, m: 90.0, n=2)) == []          # too few samples say nothing


def test_memory_near_the_limit():
    sm = gpus(lambda k, d, m: 90.0, limits={"gpu_mem": 81920.0})
    sm.series.append(Series("0", "4", "gpu_mem", "MB", [(0, 60000.0), (1, 80000.0), (2, 70000.0)]))
    sm.series.append(Series("1", "4", "gpu_mem", "MB", [(0, 60000.0), (1, 61000.0), (2, 62000.0)]))
    (f,) = memory_near_limit(sm)
    assert (f.node, f.device, f.numbers["peak"]) == ("0", "4", 80000.0) and "98%" in f.message
    local = SysMetrics("j", "local", [Series("0", f"rank{r}", "mem_rss", "MB", [(t, 480.0) for t in range(3)])
                                      for r in range(2)], limits={"mem_rss": 1000.0})
    (m,) = memory_near_limit(local)
    assert m.node == "0" and m.device is None and m.numbers["peak"] == 960.0


def test_text_csv_and_the_watch_cell():
    sm = gpus(lambda k, d, m: 5.0 if (k, d) == (1, 3) else 95.0, ib=0.0)
    text = render_text(sm, findings(sm), width=80)
    assert "nccl-sockets:" in text and "straggler: node 1 GPU 3" in text and "5.0 (5.0)" in text
    assert csv_text(sm).splitlines()[1] == "j,0,,ib_rx,MB,0,0.0"
    got = with_gpu_util({"a": {}}, {"a": {"gpu_util": (1000, 42.0)}, "b": {}})
    assert got["a"]["dtrain.sys/gpu_util"].value == 42.0 and "b" not in got


def test_submit_wait_and_why_show_the_findings(fake_backend, fake_spec, capsys, monkeypatch):
    import dataclasses
    import json

    from fakes import run_main

    sm = gpus(lambda k, d, m: 5.0 if (k, d) == (1, 3) else 95.0, ib=0.0)
    monkeypatch.setattr(fake_backend, "sysmetrics", lambda name: sm, raising=False)
    real = fake_backend.status
    monkeypatch.setattr(fake_backend, "status",
                        lambda name: dataclasses.replace(real(name), started="2025-12-31T23:00:00+00:00"))
    code, out, err = run_main(capsys, "submit", fake_spec, "--local", "--wait", "--name", "hw1")
    assert code == 0, err
    assert "hw1: hardware: nccl-sockets: 2 nodes of Standard_ND96isr_H100_v5" in err
    assert "hw1: hardware: straggler: node 1 GPU 3: GPU utilization 5.0%" in err
    code, out, err = run_main(capsys, "why", "hw1", "--local")
    assert code == 0 and "hardware: straggler: node 1 GPU 3" in out and "  hint: " in out
    code, out, err = run_main(capsys, "why", "hw1", "--local", "-o", "json")
    assert [f["kind"] for f in json.loads(out)["hardware"]] == ["nccl-sockets", "straggler"]
    code, out, err = run_main(capsys, "top", "hw1", "--local", "-o", "json")
    assert code == 0 and json.loads(out)["findings"][1]["device"] == "3"


def test_top_on_a_backend_without_system_metrics_says_so(fake_backend, fake_spec, capsys):
    import json

    from fakes import run_main

    assert run_main(capsys, "submit", fake_spec, "--local", "--name", "nohw")[0] == 0
    code, out, err = run_main(capsys, "top", "nohw", "--local", "-o", "json")
    assert code == 0 and json.loads(out)["series"] == [] and "records no system metrics" in err
    code, out, err = run_main(capsys, "top", "nohw", "--local", "--once", "--interval", "2")
    assert code == 2 and "--interval" in err


def test_live_top_redraws_until_the_job_ends(fake_backend, fake_spec, capsys, monkeypatch):
    from fakes import run_main

    from dtrain.cli import top as top_cli
    from dtrain.runner import Runner

    fake_backend.scripts["live"] = ["Queued", "Running", "Running", "Completed"]
    assert run_main(capsys, "submit", fake_spec, "--local", "--name", "live")[0] == 0
    frames = []
    monkeypatch.setattr(fake_backend, "sysmetrics", lambda name: frames.append(name) or gpus(lambda k, d, m: 90.0),
                        raising=False)
    monkeypatch.setattr(top_cli.time, "sleep", lambda s: None)
    top_cli._live(Runner(), "live", True, 0.01)
    assert len(frames) >= 2 and fake_backend.jobs["live"].status == "Completed"   # the last frame after the end
