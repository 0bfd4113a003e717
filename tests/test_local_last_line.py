"""The newest log line that status/watch show is read with bounded memory, even while the rank writes."""
import os
import tracemalloc

from dtrain.backends.local.backend import _last_line


def test_last_line_reads_a_bounded_tail_while_the_log_grows(tmp_path, monkeypatch):
    logs = tmp_path / "user_logs"
    logs.mkdir()
    log = logs / "std_log_process_0.txt"
    with open(log, "wb") as f:
        f.write((b"y" * 99 + b"\n") * 200_000)   # 20 MB
        f.write(b"saved checkpoint [/mnt/ckpt-100]\n")
    real_fstat, ino = os.fstat, log.stat().st_ino

    def fstat_as_if_written_since(fd):
        # the size when the log was opened, a moment before the rank wrote the last 19 MB: the read
        # must not chase them
        st = real_fstat(fd)
        if st.st_ino == ino:
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid,
                                   1_000_000, st.st_atime, st.st_mtime, st.st_ctime))
        return st

    monkeypatch.setattr(os, "fstat", fstat_as_if_written_since)
    tracemalloc.start()
    try:
        line = _last_line(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert line == "y" * 99                 # the newest complete line within the 4 KiB read
    assert peak < 1_000_000, f"read {peak} bytes for one line"


def test_last_line_is_the_newest_complete_line(tmp_path):
    logs = tmp_path / "user_logs"
    logs.mkdir()
    (logs / "std_log_process_0.txt").write_text("step 1\nsaved checkpoint [/mnt/ckpt-100]\n\n")
    assert _last_line(tmp_path) == "saved checkpoint [/mnt/ckpt-100]"
