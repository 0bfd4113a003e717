"""dtrain why on real local jobs (CPU): each failure reproduced through the local backend, found by
`dtrain why NAME` and shown at the end of `submit --wait`."""
import json
import re

import pytest

JOB = """\
command: bash -c '{command}'
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
compute: local
distribution:
  type: pytorch
  process_count_per_instance: 1
resources:
  instance_count: 2
"""

pytestmark = pytest.mark.slow

# rank 1 fails as given; rank 0 waits to be stopped
CASES = {
    "missing_module": ("python -c \"import not_a_package\"", "not_a_package"),
    "killed": ("kill -9 $$", "node 1"),
    "no_space": ("python -c \"f = open(\\\"/dev/full\\\", \\\"w\\\"); f.write(\\\"x\\\"); f.close()\"", "no space left"),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_failed_local_job_says_why(cli, write, kind):
    command, said = CASES[kind]
    spec = write("job.yml", JOB.format(command=f"if [ $RANK = 1 ]; then {command} || exit 1; fi; sleep 30"))
    r = cli("submit", spec, "--wait", timeout=120)
    assert r.returncode == 1, r.stderr
    assert f"why: {kind}" in r.stderr and "hint:" in r.stderr
    assert said in r.stderr
    name = next(line.split(":")[0] for line in r.stderr.splitlines() if ": why: " in line)
    w = cli("why", name, "-o", "json")
    assert w.returncode == 0, w.stderr
    got = json.loads(w.stdout)
    assert got["job"] == name
    top = got["causes"][0]
    assert (top["kind"], top["ranks"]) == (kind, [1])
    assert top["nodes"] == [1] and top["hint"]
    assert re.fullmatch(r"user_logs/std_log_process_0*1\.txt", top["evidence"][0]["file"])


def test_a_completed_local_job_has_no_cause(cli, write):
    spec = write("job.yml", JOB.format(command="echo step 1 loss 0.5"))
    r = cli("submit", spec, "--wait", timeout=120)
    assert r.returncode == 0 and "why:" not in r.stderr
    listed = json.loads(cli("list", "--local", "-o", "json").stdout)
    name = listed[0]["name"]
    w = cli("why", name, "-o", "json")
    assert w.returncode == 0 and json.loads(w.stdout)["causes"] == []
