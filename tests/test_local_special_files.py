"""A job may leave anything in its folders: a metric file that is a symlink to /dev/zero (endless bytes)
or a FIFO (an open that blocks), a rank log replaced by either. dtrain reads only regular files, with
bounded reads, and skips the rest with a note: submit --wait, metrics, watch --once and logs return."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from dtrain.backends.local import LocalBackend

JOB = """\
command: bash make.sh
code: src
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
compute: local
resources:
  instance_count: 3
"""
# Every node: node 0 writes the metrics folder's entries, nodes 1 and 2 replace their own log.
MAKE_SH = """\
jd=${MLFLOW_TRACKING_URI#file://}; jd=${jd%/mlruns}
m=$jd/mlruns/$MLFLOW_EXPERIMENT_ID/$MLFLOW_RUN_ID/metrics
log=$jd/user_logs/std_log_process_0$AZ_BATCHAI_TASK_INDEX.txt
case $AZ_BATCHAI_TASK_INDEX in
0) ln -s /dev/zero "$m/zero"; mkfifo "$m/fifo"; printf '100 0.5 1\\n' > "$m/loss" ;;
1) rm "$log"; mkfifo "$log" ;;
2) rm "$log"; ln -s /dev/zero "$log" ;;
esac
echo "node $AZ_BATCHAI_TASK_INDEX done"
"""


def _limit_memory():
    # Were /dev/zero read to its end, the process would die here instead of taking the machine down.
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def cli(*args, timeout):
    return subprocess.run([sys.executable, "-m", "dtrain", *map(str, args)], env=dict(os.environ), text=True,
                          capture_output=True, timeout=timeout, preexec_fn=_limit_memory)


@pytest.mark.timeout(180)
def test_special_files_in_a_job_are_skipped_and_nothing_hangs(write, dtrain_home):
    write("src/make.sh", MAKE_SH)
    spec = write("job.yml", JOB)
    r = cli("submit", spec, "--name", "odd", "--wait", timeout=90)
    assert r.returncode == 0, r.stderr                         # the job's outcome: Completed
    metrics_dir = next((dtrain_home / "jobs" / "odd" / "mlruns").glob("*/odd/metrics"))
    assert (metrics_dir / "zero").is_symlink() and (metrics_dir / "fifo").exists()

    m = cli("metrics", "odd", "-o", "json", timeout=30)
    assert m.returncode == 0, m.stderr
    assert [p["value"] for p in json.loads(m.stdout)["metrics"]["loss"]] == [0.5]
    assert set(json.loads(m.stdout)["metrics"]) == {"loss"}
    w = cli("watch", "--once", "odd", timeout=30)
    assert w.returncode == 0, w.stderr
    lg = cli("logs", "odd", timeout=30)
    assert lg.returncode == 0, lg.stderr
    assert "node 0 done" in lg.stdout and "node 1 done" not in lg.stdout

    # the skipped entries are named, once each, to the backend's notify
    notes: list = []
    b = LocalBackend(notify=notes.append)
    assert [p.value for p in b.metrics("odd")["loss"]] == [0.5]
    assert b.latest_metrics([b.status("odd")])["odd"]["loss"].value == 0.5
    assert list(b.logs("odd", rank=0))[0].text == "node 0 done"
    assert list(b.logs("odd", rank=1)) == [] and list(b.logs("odd", rank=2)) == []
    texts = [n.text for n in notes]
    assert sum("zero is a symlink to /dev/zero" in t for t in texts) == 1
    assert sum("fifo is a FIFO" in t for t in texts) == 1
    assert any("std_log_process_01.txt: a FIFO" in t for t in texts)
    assert any("std_log_process_02.txt: a symlink to /dev/zero" in t for t in texts)
