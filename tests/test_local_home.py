"""DTRAIN_HOME that cannot hold local jobs (a file, a read-only folder) is a configuration error: exit 6
with a message naming it, never exit 70."""
import os
import shutil
import subprocess

import pytest

JOB = "command: echo hi\nenvironment: azureml:env:1\ncompute: local\n"


@pytest.fixture
def read_only_dir(tmp_path):
    d = tmp_path / "ro-home"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    # root ignores permission bits: the immutable attribute is what stops it
    if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode:
        pytest.skip("running as root without chattr +i: no way to make a folder read-only here")
    yield d
    subprocess.run(["chattr", "-i", str(d)], check=True)


def test_read_only_home_is_a_configuration_error(cli, write, read_only_dir):
    r = cli("submit", write("job.yml", JOB), env={"DTRAIN_HOME": str(read_only_dir)})
    assert r.returncode == 6, r.stderr
    assert str(read_only_dir) in r.stderr and "DTRAIN_HOME" in r.stderr and "Traceback" not in r.stderr


def test_home_that_is_a_file_is_a_configuration_error(cli, write, tmp_path):
    f = tmp_path / "not-a-folder"
    f.write_text("x")
    spec = write("job.yml", JOB)
    for args in (("submit", spec), ("list", "--local"), ("status", "some_job", "--local")):
        r = cli(*args, env={"DTRAIN_HOME": str(f)})
        assert r.returncode == 6, (args, r.stderr)
        assert f"DTRAIN_HOME {f} is not a folder" in r.stderr
