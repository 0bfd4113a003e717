"""Code folders: the local snapshot and the pre-upload check refuse what Azure's upload would hang or fail
on (special files, loops, broken links, too much data), follow symlinks as the SDK does, and leave no
staging folder behind."""
import os
from pathlib import Path

import pytest

from dtrain.codefiles import code_files
from dtrain.errors import UsageError
from test_local_plan import snapshot

JOB = "command: python train.py\ncode: src\nenvironment: azureml:env:1\ncompute: local\n"


def _project(tmp_path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print('hi')\n")
    (tmp_path / "job.yml").write_text(JOB)
    return src


def _leftovers(home: Path):
    jobs = home / "jobs"
    return sorted(p.name for p in jobs.iterdir()) if jobs.is_dir() else []


def _submit_refused(cli, tmp_path, needle):
    home = tmp_path / "home"
    r = cli("submit", tmp_path / "job.yml", env={"DTRAIN_HOME": str(home)}, timeout=60)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert _leftovers(home) == []          # no job folder, no .staging-*
    return r


def test_symlink_to_dev_zero_is_refused_at_once(cli, tmp_path):
    src = _project(tmp_path)
    os.symlink("/dev/zero", src / "zeros.bin")
    r = _submit_refused(cli, tmp_path, "zeros.bin")
    assert "device" in r.stderr


def test_fifo_is_refused(cli, tmp_path):
    src = _project(tmp_path)
    os.mkfifo(src / "pipe")
    r = _submit_refused(cli, tmp_path, "pipe")
    assert "FIFO" in r.stderr


def test_folder_symlink_loop_is_refused(cli, tmp_path):
    src = _project(tmp_path)
    (src / "sub").mkdir()
    os.symlink("..", src / "sub" / "up")
    r = _submit_refused(cli, tmp_path, "up")
    assert "parent" in r.stderr


def test_file_symlink_loop_and_broken_link_are_refused(tmp_path):
    src = _project(tmp_path)
    os.symlink("b", src / "a")
    os.symlink("a", src / "b")
    with pytest.raises(UsageError, match="loop"):
        code_files(src)
    os.unlink(src / "a"), os.unlink(src / "b")
    os.symlink("missing.txt", src / "dangling")
    with pytest.raises(UsageError, match="broken symlink"):
        code_files(src)


def test_ignored_special_files_and_loops_are_never_touched(tmp_path):
    src = _project(tmp_path)
    (src / "junk").mkdir()
    os.mkfifo(src / "junk" / "pipe")
    os.symlink("/dev/zero", src / "junk" / "zeros")
    os.symlink("missing", src / "junk" / "dangling")
    os.symlink(".", src / "junk" / "self")
    (src / ".amlignore").write_text("junk/\n")
    snapshot(src, tmp_path / "snap")
    assert sorted(p.name for p in (tmp_path / "snap").iterdir()) == [".amlignore", "train.py"]


def test_symlinked_folders_and_files_are_copied_with_their_contents(tmp_path):
    src = _project(tmp_path)
    outside = tmp_path / "shared_lib"
    outside.mkdir()
    (outside / "util.py").write_text("X = 1\n")
    os.symlink(outside, src / "lib")
    os.symlink("train.py", src / "main.py")
    n, _ = snapshot(src, tmp_path / "snap")
    snap = tmp_path / "snap"
    assert n == 3
    assert (snap / "lib" / "util.py").read_text() == "X = 1\n" and not (snap / "lib").is_symlink()
    assert (snap / "main.py").read_text() == "print('hi')\n" and not (snap / "main.py").is_symlink()


def test_size_limit(cli, tmp_path, monkeypatch):
    src = _project(tmp_path)
    (src / "big.bin").write_bytes(b"\0" * (2 * 1024 * 1024))
    monkeypatch.setenv("DTRAIN_CODE_LIMIT_MB", "1")
    with pytest.raises(UsageError, match="over the 1 MB limit") as e:
        code_files(src)
    assert "big.bin" in e.value.message
    monkeypatch.setenv("DTRAIN_CODE_LIMIT_MB", "3")
    assert len(code_files(src).files) == 2
    home = tmp_path / "home"
    r = cli("submit", tmp_path / "job.yml", env={"DTRAIN_HOME": str(home), "DTRAIN_CODE_LIMIT_MB": "1"})
    assert r.returncode == 2 and "big.bin" in r.stderr and _leftovers(home) == []


def test_azure_submit_checks_the_code_folder_before_any_request(cli, tmp_path):
    src = _project(tmp_path)
    os.symlink("/dev/zero", src / "zeros.bin")
    (tmp_path / "job.yml").write_text(JOB.replace("compute: local\n", "compute: azureml:gpu\n"))
    # an endpoint nothing listens on: had dtrain sent anything, this would be a connection error instead
    env = {"DTRAIN_HOME": str(tmp_path / "home"), "DTRAIN_ARM_ENDPOINT": "http://127.0.0.1:9",
           "DTRAIN_ARM_TOKEN": "x", "AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000"}
    r = cli("submit", tmp_path / "job.yml", "-g", "rg", "-w", "ws", env=env, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "zeros.bin" in r.stderr and "device" in r.stderr


def test_negation_under_an_excluded_folder_reaches_the_local_snapshot(cli, tmp_path):
    src = _project(tmp_path)
    (src / "data").mkdir()
    (src / "data" / "small.csv").write_text("a,b\n1,2\n")
    (src / "data" / "big.csv").write_text("x" * 10000)
    (src / ".amlignore").write_text("data/\n!data/small.csv\n")
    (tmp_path / "job.yml").write_text(JOB.replace("python train.py", "cat data/small.csv; ls data"))
    home = tmp_path / "home"
    r = cli("submit", tmp_path / "job.yml", "--wait", "--name", "neg", env={"DTRAIN_HOME": str(home)},
            timeout=120)
    assert r.returncode == 0, r.stderr
    snap = home / "jobs" / "neg" / "snapshot"
    assert (snap / "data" / "small.csv").read_text() == "a,b\n1,2\n"
    assert not (snap / "data" / "big.csv").exists()
    assert "1,2" in r.stdout + r.stderr


def test_a_copy_failing_midway_leaves_no_staging_folder(tmp_path, monkeypatch):
    """ENOSPC (or anything) while the snapshot is copied: the staging folder goes, no job is created."""
    import errno

    import dtrain.backends.local.backend as local
    from dtrain.backends.base import SubmitOptions
    from dtrain.spec.validate import load_spec

    src = _project(tmp_path)
    for i in range(5):
        (src / f"f{i}.py").write_text("x")
    real_copy = local.copy_files

    def copy_then_disk_full(files, dest, **kw):
        files.files = files.files[:2]
        real_copy(files, dest, **kw)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(local, "copy_files", copy_then_disk_full)
    home = tmp_path / "home"
    backend = local.LocalBackend(home)
    spec, _ = load_spec(tmp_path / "job.yml")
    from dtrain.errors import ConfigError

    with pytest.raises(ConfigError):            # a full disk is the environment's problem: exit 6, not 70
        backend.submit(backend.plan(spec, SubmitOptions(name="full")))
    assert _leftovers(home) == []
