"""Retry chains on the local backend, end to end through the CLI (docs/retries.md): a killed supervisor (a
lost node) makes the next attempt start and resume from the chain's checkpoint folder; Failed attempts are
retried only with --retry-on failed; no process is left."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dtrain.backends.local import LocalBackend
from dtrain.backends.local.store import read_state
from test_local_run import _stop_leftover_jobs, cmdline_pids, no_job_processes  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.slow

# Checkpoints a step counter to its output folder every step and resumes from it: what the shipped
# training scripts do with real checkpoints, in a few lines.
STEPPER = """\
import os, sys, time
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
path = os.path.join(out, "step")
step = int(open(path).read()) if os.path.exists(path) else 0
print(f"start step {step}", flush=True)
while step < int(sys.argv[2]):
    time.sleep(0.1)
    step += 1
    with open(path + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(path + ".tmp", path)
    print(f"step {step}", flush=True)
print("done", flush=True)
"""

SPEC = """\
command: python stepper.py ${{{{outputs.ckpt}}}} {steps} retrytest-{marker}
code: src
environment: azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest
compute: local
outputs:
  ckpt:
    type: uri_folder
    path: azureml://datastores/workspaceblobstore/paths/retrytest/${{{{name}}}}/ckpt
"""


@pytest.fixture
def job(write):
    def make(steps=40, marker="a", command=None):
        write("src/stepper.py", STEPPER)
        text = SPEC.format(steps=steps, marker=marker)
        if command:
            text = text.replace(text.splitlines()[0], f"command: {command}")
        return write("job.yml", text)
    return make


def _env():
    return {**os.environ, "DTRAIN_RETRY_BACKOFF_S": "0.2"}


def _dtrain(*args):
    return subprocess.Popen([sys.executable, "-m", "dtrain", *map(str, args)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_until(pred, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _step(home: Path, chain: str) -> int:
    p = home / "datastores" / "workspaceblobstore" / "retrytest" / chain / "ckpt" / "step"
    try:
        return int(p.read_text() or 0)
    except (OSError, ValueError):
        return 0


def _kill_supervisor_mid_run(home: Path, name: str, at_step: int = 3) -> None:
    _wait_until(lambda: _step(home, name.split("-r")[0]) >= at_step, what=f"{name} to reach step {at_step}")
    sup = read_state(home / "jobs" / name).supervisor
    os.kill(sup["pid"], signal.SIGKILL)


def _submit_and_lose_a_node(*args, lose, timeout: float):
    """`dtrain submit ARGS` in the background; lose() (a killed supervisor) while it follows the job.
    Returns (exit code, stderr); the submit is never left running."""
    p = _dtrain("submit", *args)
    try:
        lose()
        _, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, err


def test_a_killed_supervisor_starts_a_second_attempt_that_resumes_and_completes(job, cli, dtrain_home):
    spec = job(steps=30, marker="resume")
    rc, err = _submit_and_lose_a_node(spec, "--local", "--retries", "2", "--wait", "--name", "ch", timeout=120,
                                      lose=lambda: _kill_supervisor_mid_run(dtrain_home, "ch"))
    assert rc == 0, err
    assert "attempt 2 of 3 submitted: ch-r1" in err
    st = json.loads(cli("status", "ch", "--output", "json").stdout)
    assert st["name"] == "ch" and st["status"] == "Completed"
    attempts = st["attempts"]
    assert [a["name"] for a in attempts] == ["ch", "ch-r1"]
    assert attempts[0]["status"] == "NotResponding" and attempts[0]["outcome"] == "infrastructure"
    assert "supervisor" in attempts[0]["reason"] and attempts[0]["exit_code"] == 5
    assert attempts[1]["status"] == "Completed" and attempts[1]["outcome"] == "completed"
    assert st["chain"]["retries"] == 2 and st["chain"]["retry_on"] == "infrastructure"
    # attempt 2 resumed from attempt 1's checkpoint, in the same datastore folder
    logs = cli("logs", "ch-r1").stdout
    first = [ln for ln in logs.splitlines() if "start step" in ln][0]
    assert int(first.rsplit(" ", 1)[1]) > 0, logs
    assert "done" in logs and _step(dtrain_home, "ch") == 30
    # `logs CHAIN` is the latest attempt's; both attempts carry the chain's tags
    assert "done" in cli("logs", "ch").stdout
    b = LocalBackend(dtrain_home)
    tags = b.status("ch-r1").tags
    assert tags == {"dtrain.chain": "ch", "dtrain.attempt": "2", "dtrain.retries": "2",
                    "dtrain.retry_on": "infrastructure"}
    assert no_job_processes(b, "ch", marker="retrytest-resume") and no_job_processes(b, "ch-r1")
    # list folds the chain into one row
    rows = json.loads(cli("list", "--local", "--output", "json").stdout)
    assert [r["name"] for r in rows] == ["ch"] and len(rows[0]["attempts"]) == 2
    # and so does watch, with the attempt the chain is on
    table = cli("watch", "--local", "--once", "--no-metrics").stdout
    assert [ln.split()[:3] for ln in table.splitlines()[1:]] == [["ch", "Completed,", "attempt"]], table
    assert "attempt 2/3" in table, table
    # re-running the same command follows the chain: nothing new is started
    again = cli("submit", spec, "--local", "--retries", "2", "--wait", "--name", "ch", env={"DTRAIN_RETRY_BACKOFF_S": "0"})
    assert again.returncode == 0, again.stderr
    assert sorted(d.name for d in (dtrain_home / "jobs").iterdir() if not d.name.startswith(".")) == ["ch", "ch-r1"]


def test_without_retries_the_same_kill_exits_5(job, dtrain_home):
    spec = job(steps=30, marker="noretry")
    rc, err = _submit_and_lose_a_node(spec, "--local", "--wait", "--name", "one", timeout=60,
                                      lose=lambda: _kill_supervisor_mid_run(dtrain_home, "one"))
    assert rc == 5, err
    assert not (dtrain_home / "jobs" / "one-r1").exists()
    assert no_job_processes(LocalBackend(dtrain_home), "one", marker="retrytest-noretry")


@pytest.mark.parametrize("flags, attempts", [((), 1), (("--retry-on", "failed"), 3)])
def test_a_failing_script_is_retried_only_with_retry_on_failed(job, cli, dtrain_home, flags, attempts):
    spec = job(command="bash -c 'echo flaky; exit 1'")
    r = cli("submit", spec, "--local", "--retries", "2", *flags, "--wait", "--name", "fl",
            env={"DTRAIN_RETRY_BACKOFF_S": "0"})
    assert r.returncode == 1, r.stderr
    names = sorted(d.name for d in (dtrain_home / "jobs").iterdir() if not d.name.startswith("."))
    assert names == ["fl", "fl-r1", "fl-r2"][:attempts]
    st = json.loads(cli("status", "fl", "--output", "json").stdout)
    assert [a["outcome"] for a in st["attempts"]] == ["failed"] * attempts
    assert st["status"] == "Failed" and st["chain"]["next"] is None


def test_submit_without_wait_then_wait_drives_the_chain(job, cli, dtrain_home):
    spec = job(command="bash -c 'echo flaky; exit 1'")
    r = cli("submit", spec, "--local", "--retries", "1", "--retry-on", "failed", "--name", "nw",
            env={"DTRAIN_RETRY_BACKOFF_S": "0"})
    assert r.returncode == 0 and r.stdout.strip() == "nw", r.stderr
    assert "dtrain wait nw" in r.stderr
    _wait_until(lambda: LocalBackend(dtrain_home).status("nw").terminal, what="attempt 1 to end")
    # nothing drives it until someone waits: status shows the retry that is due
    st = json.loads(cli("status", "nw", "--output", "json").stdout)
    assert st["status"] == "Retrying" and st["chain"]["next"]["name"] == "nw-r1"
    assert not (dtrain_home / "jobs" / "nw-r1").exists()
    w = cli("wait", "nw", env={"DTRAIN_RETRY_BACKOFF_S": "0"})
    assert w.returncode == 1, w.stderr
    assert (dtrain_home / "jobs" / "nw-r1").is_dir()
    assert "attempt 2 of 2 submitted: nw-r1" in w.stderr


def test_a_refused_rerun_with_another_spec_leaves_the_chain_as_it_was(job, cli, dtrain_home):
    """Re-running `submit --retries` under the chain's name with an edited spec exits 2, and the attempts
    still to come run the spec the chain was started with, not the refused one."""
    spec = job(command="bash -c 'echo ORIGINAL; exit 1'")
    args = ("submit", spec, "--local", "--retries", "1", "--retry-on", "failed", "--name", "rs")
    assert cli(*args).returncode == 0
    _wait_until(lambda: LocalBackend(dtrain_home).status("rs").terminal, what="attempt 1 to end")
    spec.write_text(spec.read_text().replace("ORIGINAL", "EDITED"))
    r = cli(*args)
    assert r.returncode == 2 and "attempt 1 of the retry chain 'rs' (--retries 1 --retry-on failed)" in r.stderr, r.stderr
    w = cli("wait", "rs", env={"DTRAIN_RETRY_BACKOFF_S": "0"})
    assert w.returncode == 1, w.stderr
    logs = cli("logs", "rs-r1").stdout
    assert "ORIGINAL" in logs and "EDITED" not in logs, logs


def test_usage_errors(job, cli, dtrain_home):
    spec = job()
    for args, msg in [(("--retry-on", "failed"), "--retry-on only applies with --retries"),
                      (("--retries", "0"), "--retries must be at least 1"),
                      (("--retries", "1", "--retry-on", "canceled"), "--retry-on must be one of"),
                      (("--retries", "1", "--dry-run"), "--retries does nothing with --dry-run"),
                      (("--retries", "1", "--matrix", "inputs.x=1,2"), "--retries does not apply with --matrix")]:
        r = cli("submit", spec, "--local", *args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
    assert not (dtrain_home / "jobs").exists()


def test_a_shipped_template_resumes_in_its_second_attempt(cli, dtrain_home, tmp_path):
    """The single-node template binds its checkpoints to a ${{name}} datastore path: attempt 2 of a chain
    loads what attempt 1 saved there (the script says `resumed from step N`). The template as shipped, its
    script replaced by tests/stubs/train_stub.py (the real script's resumption: test_training_scripts.py)."""
    template = Path(__file__).resolve().parents[1] / "job_templates" / "single-node.yml"
    code = tmp_path / "stub-code"
    code.mkdir()
    shutil.copy(Path(__file__).resolve().parent / "stubs" / "train_stub.py", code / "single_node.py")
    ckpts = dtrain_home / "datastores" / "workspaceblobstore" / "dtrain" / "tpl" / "checkpoints"

    def lose_after_the_first_checkpoint():
        _wait_until(lambda: any(ckpts.glob("ckpt_step*")), timeout=90, what="attempt 1's first checkpoint")
        os.kill(read_state(dtrain_home / "jobs" / "tpl").supervisor["pid"], signal.SIGKILL)

    # 10 epochs of 32 steps at 0.02 s a step: attempt 1 is still running when its first checkpoint appears
    rc, err = _submit_and_lose_a_node(template, "--local", "--retries", "1", "--wait", "--name", "tpl",
                                      "--set", f"code={code}",
                                      "--set", "inputs.epochs=10", "--set", "inputs.checkpoint_every=10",
                                      timeout=120, lose=lose_after_the_first_checkpoint)
    assert rc == 0, err[-3000:]
    assert "attempt 2 of 2 submitted: tpl-r1" in err
    logs = cli("logs", "tpl-r1").stdout
    m = [ln for ln in logs.splitlines() if "resumed from step" in ln]
    assert m and int(m[0].split("resumed from step ")[1].split()[0]) > 0, logs[-2000:]
    assert re.search(r"final_loss=\S+ step=320$", logs, re.M), logs[-2000:]
    assert no_job_processes(LocalBackend(dtrain_home), "tpl") and no_job_processes(LocalBackend(dtrain_home), "tpl-r1")
