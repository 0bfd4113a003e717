"""Resolve a conda file's pip part for the Python it asks for on Linux x86_64, as Azure's image build
would, without installing anything: `uv pip compile --python-version X --python-platform
x86_64-unknown-linux-gnu` (uv: a fast, well-kept resolver), else pip's resolver (`pip install --dry-run
--report`). Option lines of the pip part (--index-url, --find-links, --no-index) apply, as they do in the
requirements file conda hands to pip; so do uv's and pip's own variables (UV_INDEX_URL, PIP_INDEX_URL...)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .conda import normalize

PLATFORM = "x86_64-unknown-linux-gnu"
# pip's tags for the same machine: Azure ML's images are Ubuntu 20.04/22.04 (glibc 2.31+)
_PIP_PLATFORMS = ("manylinux_2_31_x86_64", "manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                  "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64")
TIMEOUT_S = 180
_NETWORK = re.compile(r"(error sending request|dns error|failed to fetch|connection (refused|reset|timed out)|"
                      r"network is unreachable|failed to establish a new connection|temporary failure in name "
                      r"resolution|max retries exceeded|could not fetch url|no route to host)", re.I)


@dataclass
class Resolution:
    tool: str                                  # "uv" | "pip" | "" (none ran)
    ok: bool = False
    pins: dict = field(default_factory=dict)   # normalized name -> version, the whole resolved set
    error: str = ""                            # the resolver's explanation, tidied to one paragraph
    unreachable: bool = False                  # the index could not be reached: nothing is known


def find_uv() -> str | None:
    """uv on PATH, else the binary of the `uv` Python package (the test extra installs it)."""
    exe = shutil.which("uv")
    if exe:
        return exe
    try:
        import uv  # type: ignore[import-not-found]

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError, AttributeError):
        return None


def resolve(requirements: str, python: str, cwd: Path | None = None, *, tool: str | None = None) -> Resolution:
    """Resolve `requirements` (a requirements file's text) for Python `python` ("3.10") on Linux x86_64.
    tool: "uv" or "pip" to force one (tests); default: uv where found, else pip."""
    uv = find_uv() if tool in (None, "uv") else None
    if tool == "uv" and uv is None:
        return Resolution("", error="uv is not installed")
    with tempfile.TemporaryDirectory(prefix="dtrain-resolve-") as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(requirements, encoding="utf-8")
        if uv:
            argv = [uv, "pip", "compile", str(req), "--python-version", python, "--python-platform", PLATFORM,
                    "--no-header", "--no-annotate", "--quiet", "--no-python-downloads"]
            return _run("uv", argv, cwd, _uv_pins)
        report = Path(tmp) / "report.json"
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
                "--report", str(report), "--target", str(Path(tmp) / "t"), "--only-binary=:all:",
                "--python-version", python, "-r", str(req)]
        for p in _PIP_PLATFORMS:
            argv += ["--platform", p]
        return _run("pip", argv, cwd, lambda _out: _pip_pins(report))


def _run(tool: str, argv: list, cwd: Path | None, pins) -> Resolution:
    env = {**os.environ, "UV_NO_PROGRESS": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        p = subprocess.run(argv, cwd=cwd if cwd and cwd.is_dir() else None, capture_output=True, text=True,
                           timeout=TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Resolution(tool, error=f"{tool} did not finish resolving in {TIMEOUT_S} s", unreachable=True)
    except OSError as exc:
        return Resolution(tool, error=f"{tool} did not run: {exc}")
    if p.returncode == 0:
        return Resolution(tool, ok=True, pins=pins(p.stdout))
    text = tidy(p.stderr or p.stdout)
    return Resolution(tool, error=text, unreachable=bool(_NETWORK.search(text)))


def tidy(text: str) -> str:
    """The resolver's error as one paragraph: no box drawing, no `error:`/`cause:` prefixes, no blank lines."""
    lines = []
    for raw in text.splitlines():
        line = re.sub(r"^[\s×╰─▶│]+", "", raw).strip()
        line = re.sub(r"^(error|cause|hint|ERROR):\s*", "", line)
        if line:
            lines.append(line)
    return " ".join(lines)


def _uv_pins(stdout: str) -> dict:
    pins = {}
    for line in stdout.splitlines():
        line = line.split("#", 1)[0].strip()
        name, sep, version = line.partition("==")
        if sep and name:
            pins[normalize(name.split("[")[0].strip())] = version.split(";")[0].strip()
    return pins


def _pip_pins(report: Path) -> dict:
    try:
        doc = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out = {}
    for item in doc.get("install", []):
        meta = item.get("metadata") or {}
        if meta.get("name"):
            out[normalize(meta["name"])] = str(meta.get("version", ""))
    return out


def named_in(error: str, names) -> list:
    """The names (normalized) the resolver's explanation mentions, in the order given."""
    words = {normalize(w) for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", error)}
    return [n for n in names if n in words]
