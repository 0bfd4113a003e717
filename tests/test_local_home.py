"""DTRAIN_HOME that cannot hold local jobs (a file, a read-only folder) is a configuration error: exit 6
with a message naming it, never exit 70."""
import errno
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


def _enospc(*a, **kw):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.timeout(60)
def test_a_full_disk_while_copying_is_a_configuration_error_and_leaves_nothing(write, dtrain_home, monkeypatch,
                                                                                capsys):
    from dtrain.backends.local import backend as local
    from dtrain.cli import main

    write("src/train.py", "x = 1\n" * 1000)
    spec = write("job.yml", JOB + "code: src\n")
    monkeypatch.setattr(local, "copy_files", _enospc)
    assert main(["submit", str(spec), "--name", "full"]) == 6
    err = capsys.readouterr().err
    assert f"no space left under {dtrain_home / 'jobs'}" in err and "needs at least 1.1 MB" in err, err
    assert "MB free there" in err and "Traceback" not in err
    assert sorted(p.name for p in (dtrain_home / "jobs").iterdir()) == []     # no job, no .staging-*


@pytest.mark.timeout(60)
def test_a_full_disk_when_starting_the_supervisor_leaves_no_queued_job(write, dtrain_home, monkeypatch, capsys):
    from dtrain.backends.local import backend as local
    from dtrain.cli import main

    spec = write("job.yml", JOB)
    started = []
    real = local.LocalBackend._start_supervisor

    def start_then_fill_the_disk(self, job_dir):
        started.append(read_token(job_dir))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(local, "update_state", _enospc)          # the watchdog starts; recording it fails
            real(self, job_dir)

    monkeypatch.setattr(local.LocalBackend, "_start_supervisor", start_then_fill_the_disk)
    assert main(["submit", str(spec), "--name", "full2"]) == 6
    assert "no space left under" in capsys.readouterr().err
    assert [p.name for p in (dtrain_home / "jobs").iterdir()] == []
    from dtrain.backends.local import procs
    assert procs.job_pids(started[0]) == []                         # nothing of it left running
    monkeypatch.setattr(local.LocalBackend, "_start_supervisor", real)
    assert main(["submit", str(spec), "--name", "full2", "--wait"]) == 0   # the name is not used up
    assert (dtrain_home / "jobs" / "full2" / "state.json").is_file()


def read_token(job_dir):
    import json
    return json.loads((job_dir / "state.json").read_text())["token"]
