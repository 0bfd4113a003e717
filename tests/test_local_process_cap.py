"""A local job may not plan more processes than the machine can hold (refused before any is laid out)."""
from __future__ import annotations

import pytest

from dtrain.backends.base import SubmitOptions
from dtrain.backends.local import LocalBackend
from dtrain.backends.local import plan as local_plan
from dtrain.errors import UsageError
from dtrain.exitcodes import ExitCode
from test_local_plan import dist_body, make_spec


def test_render_local_refuses_more_processes_than_dtrain_allows(write, cli, tmp_path):
    spec = write("big.yml", "command: echo hi\nenvironment: azureml:env@latest\n"
                            "resources: {instance_count: 100000}\n"
                            "distribution: {type: pytorch, process_count_per_instance: 8}\n")
    r = cli("render", spec, "--local", env={"DTRAIN_HOME": str(tmp_path / "home")}, timeout=60)
    assert r.returncode == ExitCode.INVALID, r.stderr
    assert "800000 processes" in r.stderr and "at most" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize("kind,nodes,ppn,ps", [("pytorch", 6, 10, 0), ("mpi", 2, 26, 0), ("none", 51, 1, 0),
                                               ("tensorflow", 50, 1, 1)])
def test_half_of_pid_max_is_the_cap(tmp_path, dtrain_home, monkeypatch, kind, nodes, ppn, ps):
    pid_max = tmp_path / "pid_max"
    pid_max.write_text("100\n")
    monkeypatch.setattr(local_plan, "PID_MAX_FILE", str(pid_max))
    monkeypatch.setattr(local_plan, "check_mpirun", lambda: "/usr/bin/mpirun")
    assert local_plan.process_cap()[0] == 50
    b = LocalBackend()
    with pytest.raises(UsageError, match=r"at most 50 \(half of this machine's pid_max \(100\)\)"):
        b.plan(make_spec(tmp_path, dist_body(kind, nodes, ppn, ps=ps)), SubmitOptions(name="big"))
    ok = b.plan(make_spec(tmp_path, dist_body(kind, 5, 10 if kind in ("pytorch", "mpi") else 1)),
                SubmitOptions(name="fits"))
    assert ok.name == "fits"
