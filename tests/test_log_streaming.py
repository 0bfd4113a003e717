"""Log streaming in bounded memory, and Azure Blob reads in documented range forms only."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tracemalloc

import pytest

from dtrain.backends.azure import logs as alogs
from dtrain.backends.lines import LineBuffer
from dtrain.backends.local.logs import FileTail

DOCUMENTED = re.compile(r"^bytes=(\d+)-(\d*)$")     # bytes=START- and bytes=START-END


# --- lines -----------------------------------------------------------------------------------

def test_line_buffer_holds_partial_lines_and_splits_giant_ones():
    b = LineBuffer(max_line=8)
    assert list(b.feed(b"one\ntw")) == ["one"]
    assert list(b.feed(b"o\r\nthr")) == ["two"]
    assert b.held == 3
    assert list(b.feed(b"ee", final=True)) == ["three"]
    # a "line" without newline never grows past max_line: passed on in pieces, characters intact
    assert list(b.feed("ααααα".encode())) == ["αααα"] and list(b.feed(b"\n")) == ["α"]
    assert list(b.feed(b"x" * 20)) == ["x" * 8, "x" * 8] and b.held == 4


# --- a blob served with Azure's range rules ----------------------------------------------------

class _Raw:
    def __init__(self, data):
        self._data, self._pos = data, 0

    def read(self, n, decode_content=True):
        out = self._data[self._pos:self._pos + n]
        self._pos += len(out)
        return out


class _Resp:
    def __init__(self, status, headers, data):
        self.status_code, self.headers, self.raw = status, headers, _Raw(data)

    def iter_content(self, n):
        while True:
            block = self.raw.read(n)
            if not block:
                return
            yield block

    def close(self):
        pass


class BlobSession:
    """Answers GETs of one growing blob as the Blob service does, recording every range asked for;
    an undocumented form (a suffix range) is a 400, as a malformed header is."""

    def __init__(self, data: bytes):
        self.data = data
        self.ranges: list[str] = []

    def get(self, url, headers=None, timeout=None, stream=False):
        rng = (headers or {}).get("x-ms-range") or (headers or {}).get("Range")
        self.ranges.append(rng)
        size = len(self.data)
        if not rng:
            return _Resp(200, {"Content-Length": str(size)}, self.data)
        m = DOCUMENTED.match(rng)
        if not m:
            return _Resp(400, {"x-ms-error-code": "InvalidHeaderValue"}, b"")
        start = int(m.group(1))
        end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
        if start >= size:
            return _Resp(416, {"Content-Range": f"bytes */{size}"}, b"")
        return _Resp(206, {"Content-Range": f"bytes {start}-{end}/{size}"}, self.data[start:end + 1])


def _big_log(mb: int) -> bytes:
    line = b"step 123456: loss=0.12345 lr=0.001 samples/s=1234.5\n"
    return line * (mb * 1024 * 1024 // len(line))


def test_azure_logs_read_a_big_log_in_bounded_memory_with_documented_ranges():
    data = _big_log(8)
    session = BlobSession(data)
    details = lambda: ("Completed", {"user_logs/std_log.txt": "http://blob/x"})  # noqa: E731
    import requests  # noqa: F401  (imported by follow_logs: not the log's memory)

    tracemalloc.start()
    try:
        count = total = 0
        for line in alogs.follow_logs(details, follow=True, session=session, sleep=lambda s: None):
            count += 1
            total += len(line.text) + 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (count, total) == (data.count(b"\n"), len(data))
    assert peak < 3 * alogs.CHUNK, peak                  # a few chunks, not the 8 MB log
    assert session.ranges and all(DOCUMENTED.match(r) for r in session.ranges)


def test_azure_failure_tail_learns_the_size_then_asks_start_end():
    lines = [f"line {i}" for i in range(20000)]
    session = BlobSession(("\n".join(lines) + "\n").encode())
    got = alogs.tail_lines(session, "http://blob/x", max_bytes=1000)
    assert got and got == lines[-len(got):] and len(got) > 50
    assert session.ranges[0] == "bytes=0-0"
    assert all(DOCUMENTED.match(r) and not r.endswith("-") for r in session.ranges)
    assert alogs.tail_lines(BlobSession(b""), "http://blob/x") == []     # empty blob: 416 bytes */0


def test_emulator_refuses_a_suffix_range():
    import requests
    from azure_emulator import AzureMLEmulator
    from azure_emulator.wire import Blob

    with AzureMLEmulator() as emu:
        emu.blobs[("c", "b.txt")] = Blob(b"0123456789", "text/plain")
        url = f"{emu.storage_url}/c/b.txt?sig=x"
        assert requests.get(url, headers={"x-ms-range": "bytes=-4"}).status_code == 400
        r = requests.get(url, headers={"x-ms-range": "bytes=6-9"})
        assert r.status_code == 206 and r.content == b"6789"
        r = requests.get(url, headers={"x-ms-range": "bytes=0-0"})
        assert r.headers["Content-Range"] == "bytes 0-0/10"


# --- local logs ------------------------------------------------------------------------------

def test_local_file_tail_reads_a_big_log_in_bounded_memory(tmp_path):
    p = tmp_path / "std_log_process_00.txt"
    data = _big_log(8)
    p.write_bytes(data)
    t = FileTail(p, 0, 0, p.name)
    tracemalloc.start()
    try:
        count = sum(1 for _ in t.drain(final=True))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        t.close()
    assert count == data.count(b"\n")
    assert peak < 1024 * 1024, peak


@pytest.mark.slow
@pytest.mark.timeout(300)  # writes and reads back a big log
def test_dtrain_logs_on_a_big_log_holds_memory_flat(tmp_path):
    """A whole `dtrain logs` process over a 120 MB log: its peak RSS stays far under the log's size
    (it was about 5x the log before streaming was bounded)."""
    env = dict(os.environ, DTRAIN_HOME=str(tmp_path / "home"), NO_COLOR="1", GITHUB_ACTIONS="", TF_BUILD="")
    spec = tmp_path / "job.yml"
    writer = ("import sys; w = sys.stdout.buffer; block = b'x' * 99 + b'\\n'; "
              "[w.write(block * 10000) for _ in range(120)]")
    spec.write_text(f'command: python -c "{writer}"\nenvironment: azureml:env@latest\ncompute: local\n')
    r = subprocess.run([sys.executable, "-m", "dtrain", "submit", str(spec), "--wait", "-o", "json"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    name = json.loads(r.stdout)["name"]
    for follow in ([], ["--follow"]):
        with open(os.devnull, "wb") as devnull:
            p = subprocess.Popen([sys.executable, "-m", "dtrain", "logs", name, *follow], env=env,
                                 stdout=devnull, stderr=subprocess.PIPE)
            peak_mb = 0.0
            while p.poll() is None:        # VmHWM is the peak so far: reading it now and then loses nothing
                peak_mb = max(peak_mb, _vm_hwm_mb(p.pid))
                time.sleep(0.02)
        assert p.returncode == 0, p.stderr.read()
        assert 0 < peak_mb < 100, (follow, peak_mb)


def _vm_hwm_mb(pid: int) -> float:
    """The process's own peak RSS since exec (not ru_maxrss, which Linux carries over from the
    forking parent: a big pytest process would count)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return 0.0
