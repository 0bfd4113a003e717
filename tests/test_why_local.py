"""dtrain why on real local jobs (CPU): each failure reproduced through the local backend by
tests/stubs/why_repro.py, found by `dtrain why NAME` and shown at the end of `submit --wait`. One 2x2 torch job
(the gloo timeout); the others are 1x2 jobs, torch-free but for the rank that starts a process group alone."""
import json
import re
from pathlib import Path

import pytest

STUBS = Path(__file__).resolve().parent / "stubs"
JOB = """\
command: python why_repro.py {mode}
code: {code}
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
compute: local
distribution:
  type: pytorch
  process_count_per_instance: {ppn}
resources:
  instance_count: 2
  instance_type: Standard_ND96isr_H100_v5
"""

pytestmark = pytest.mark.slow

# mode -> (processes per node, kind, [ranks], [nodes], words the summary says, the evidence's rank)
CASES = {
    "missing": (1, "missing_module", [1], [1], "'not_a_package' cannot be imported", 1),
    "killed": (1, "killed", [1], [1], "rank 1 killed by SIGKILL with no traceback on node 1", 1),
    "no_space": (1, "no_space", [1], [1], "no space left on device on rank 1", 1),
    "no_join": (1, "rendezvous", [1], [1], "rank 1 never joined (1/2 clients joined)", 0),
    "gloo_lag": (2, "collective_timeout", [3], [1], "recv timed out on ranks 0, 1, 2; lagging: rank 3", 0),
}


@pytest.mark.parametrize("mode", sorted(CASES))
def test_a_failed_local_job_says_why(cli, write, mode):
    ppn, kind, ranks, nodes, said, evidence_rank = CASES[mode]
    spec = write("job.yml", JOB.format(mode=mode, code=STUBS, ppn=ppn))
    r = cli("submit", spec, "--wait", timeout=120)
    assert r.returncode == 1, r.stderr
    assert f"why: {kind}: " in r.stderr and "hint:" in r.stderr, r.stderr[-3000:]
    assert said in r.stderr, r.stderr[-3000:]
    name = next(line.split(":")[0] for line in r.stderr.splitlines() if ": why: " in line)
    w = cli("why", name, "-o", "json")
    assert w.returncode == 0, w.stderr
    got = json.loads(w.stdout)
    assert got["job"] == name
    top = got["causes"][0]
    assert (top["kind"], top["ranks"], top["nodes"]) == (kind, ranks, nodes)
    assert top["hint"] and said in top["summary"]
    assert re.fullmatch(rf"user_logs/std_log_process_0*{evidence_rank}\.txt", top["evidence"][0]["file"])


def test_a_completed_local_job_has_no_cause(cli, write):
    spec = write("job.yml", JOB.format(mode="missing", code=STUBS, ppn=1).replace(
        "python why_repro.py missing", "echo step 1 loss 0.5"))
    r = cli("submit", spec, "--wait", timeout=120)
    assert r.returncode == 0 and "why:" not in r.stderr
    listed = json.loads(cli("list", "--local", "-o", "json").stdout)
    name = listed[0]["name"]
    w = cli("why", name, "-o", "json")
    assert w.returncode == 0 and json.loads(w.stdout)["causes"] == []
    assert json.loads(cli("status", name, "-o", "json").stdout)["instance_type"] == "Standard_ND96isr_H100_v5"
