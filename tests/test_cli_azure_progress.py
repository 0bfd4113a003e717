"""submit --wait on Azure (the emulator): what it says while the job starts, and its summary line."""
import re

import pytest

from test_azure_backend import dtrain, emu, emu_env, project  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.sdk]   # a job started and followed through the emulator


def test_submit_wait_reports_each_start_phase_and_ends_with_the_studio_url(emu, project):  # noqa: F811
    env = emu_env(emu, project)
    emu.script_job_statuses(["Queued"] * 4 + ["Preparing"] * 4 + ["Running"] * 4 + ["Completed"], 0.5, job="prog")
    r = dtrain("submit", "job.yml", "--name", "prog", "--wait", env=env, cwd=project, timeout=120)
    assert r.returncode == 0, r.stderr
    # not a terminal: one line per phase, with the time so far; no in-place updates
    phases = re.findall(r"^prog: (\w+)(?:: waiting for the first log line)? after \d+ s$", r.stderr, re.M)
    assert phases[:2] == ["Queued", "Preparing"], r.stderr
    assert re.search(r"^prog: first log line after [\d.]+ s$", r.stderr, re.M) and "\r" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"prog: Completed in \d+:\d\d(, ran \d+:\d\d)?; 2 nodes x 2 processes; "
                        r"logs in Azure ML studio: \S+", last), last
