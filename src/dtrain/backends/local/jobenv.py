"""A local job runs inside its own environment: a virtual environment built from the conda file's pip part
for the Python the file asks for, as Azure ML's image would hold it, so a package missing from the job's
environment is found here rather than on the paid cluster.

- What to build is decided by the plan, purely (describe: the conda file read, nothing run): the folder is
  $DTRAIN_HOME/envs/<hash>, the hash of the Python version and the pip part, so a later job with the same
  file reuses it and an edited file gets a new one.
- It is built at submit (ensure), once, under a lock (two submits build it once), with uv (`uv venv`,
  `uv pip install`) where uv is found, else `python3.X -m venv` and pip. A venv is not relocatable (its
  scripts name its folder), so it is built where it stays and counts only once its `ready` marker, written
  last, is there: a half-built folder (a killed build) is removed and built again, never used.
- Conda packages (anything but python and pip) cannot be installed this way: the plan names them.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ...envcheck.conda import read_conda
from ...envcheck.resolve import find_uv
from ...envcheck.source import environment_source
from ...errors import SpecError, UsageError
from ...spec.diagnostics import Collector
from ...spec.model import JobSpec
from ..base import Notice, Notify

READY = "ready.json"
LAYOUT = 1          # bump when what a built environment holds changes: older ones are not reused
HOST_HINT = "or run the job with the host's python: submit --local --host-python"


@dataclass(frozen=True)
class JobEnv:
    hash: str
    path: str                   # $DTRAIN_HOME/envs/<hash>
    python: str | None          # "3.10" as the conda file asks (None: not pinned)
    requirements: str           # the pip part, as the requirements file conda hands to pip
    conda_file: str             # as diagnostics name it
    cwd: str                    # relative paths in the pip part are read from here
    conda_only: tuple = ()      # conda packages not installed here

    def to_dict(self) -> dict:
        return {**asdict(self), "conda_only": list(self.conda_only)}

    @classmethod
    def from_dict(cls, d: dict) -> "JobEnv":
        return cls(**{**d, "conda_only": tuple(d.get("conda_only") or ())})

    @property
    def bin(self) -> str:
        return os.path.join(self.path, "bin")

    def note(self) -> str:
        py = f"Python {self.python}" if self.python else "the first Python found (the file pins none)"
        n = sum(1 for line in self.requirements.splitlines() if line.strip() and not line.startswith("-"))
        text = (f"the command runs in the job's environment, built from {self.conda_file} ({py}, {n} pip "
                f"requirement{'s' if n != 1 else ''}) at {self.path}")
        if self.conda_only:
            text += (f"; not installable this way (conda packages): {', '.join(self.conda_only)}: add their pip "
                     "names to the pip part to have them here")
        return text


def describe(spec: JobSpec, envs_root: Path) -> JobEnv | None:
    """The environment a local job of `spec` runs in, or None when the spec has no readable conda file. Pure."""
    c = Collector()
    env = None
    src = environment_source(spec, c)
    if src is not None and src.conda is not None:
        cc = src.conda.collector()
        env = read_conda(src.conda, cc)
        c.items.extend(cc.items)
    if c.errors:        # the environment cannot be built as written: every error, at its line (exit 2)
        raise SpecError([d for d in c.items if d.severity == "error"],
                        "the job's conda file has errors; a local job runs in the environment it describes "
                        "(--host-python: on the host's python instead)")
    if src is None or src.conda is None or env is None:
        return None
    requirements = env.pip_text()
    digest = hashlib.sha256(json.dumps({"layout": LAYOUT, "python": env.python, "pip": requirements},
                                       sort_keys=True).encode()).hexdigest()[:20]
    return JobEnv(hash=digest, path=str(envs_root / digest), python=env.python, requirements=requirements,
                  conda_file=src.conda.file or "the inline conda file", cwd=str(src.conda_dir or spec.base_dir),
                  conda_only=tuple(d.text for d in env.conda))


def ensure(env: JobEnv, notify: Notify | None = None) -> bool:
    """Build the environment unless it is there; True when it was built now. Exit 2 (UsageError) when it
    cannot be: no such Python here, a requirement that does not install."""
    say = notify or (lambda _n: None)
    path = Path(env.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock(path.parent / f"{env.hash}.lock"):
        if (path / READY).is_file():
            os.utime(path / READY)          # its last use: `dtrain clean --envs` keeps what was used lately
            say(Notice(f"reusing the job's environment {env.path} (built from {env.conda_file})"))
            return False
        if path.exists():
            shutil.rmtree(path)             # a half-built one: never used
        start = time.monotonic()
        uv = find_uv()
        say(Notice(f"building the job's environment from {env.conda_file} with {'uv' if uv else 'venv and pip'} "
                   f"in {env.path} (once: later jobs with the same pip part reuse it)"))
        try:
            _build_uv(uv, env, say) if uv else _build_pip(env, say)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        took = time.monotonic() - start
        (path / "requirements.txt").write_text(env.requirements, encoding="utf-8")
        tmp = path / f".{READY}.tmp"
        tmp.write_text(json.dumps({**env.to_dict(), "built_s": round(took, 2), "tool": "uv" if uv else "pip"}))
        os.replace(tmp, path / READY)
        say(Notice(f"built the job's environment in {took:.1f} s"))
        return True


def _build_uv(uv: str, env: JobEnv, say) -> None:
    argv = [uv, "venv", env.path, "--no-python-downloads", "--quiet"] + (["--python", env.python] if env.python else [])
    code, tail = _stream(argv, env.cwd, say)
    if code != 0:
        raise _no_python(env, tail)
    if env.requirements.strip():
        req = Path(env.path) / ".requirements.in"
        req.write_text(env.requirements, encoding="utf-8")
        code, tail = _stream([uv, "pip", "install", "--python", os.path.join(env.bin, "python"), "-r", str(req)],
                             env.cwd, say)
        if code != 0:
            raise _failed(env, tail)


def _build_pip(env: JobEnv, say) -> None:
    python = _find_python(env.python)
    if python is None:
        raise _no_python(env, [])
    code, tail = _stream([python, "-m", "venv", env.path], env.cwd, say)
    if code != 0:
        raise _failed(env, tail)
    if env.requirements.strip():
        req = Path(env.path) / ".requirements.in"
        req.write_text(env.requirements, encoding="utf-8")
        code, tail = _stream([os.path.join(env.bin, "python"), "-m", "pip", "install", "--progress-bar", "off",
                              "-r", str(req)], env.cwd, say)
        if code != 0:
            raise _failed(env, tail)


def _find_python(version: str | None) -> str | None:
    """python3.X on PATH that really is 3.X (a shim that fails does not count); without a version, dtrain's own."""
    if version is None:
        return sys.executable
    for name in (f"python{version}", "python3", "python"):
        exe = shutil.which(name)
        if exe and _version_of(exe) == version:
            return exe
    return None


def _version_of(exe: str) -> str | None:
    try:
        p = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def _stream(argv: list, cwd: str, say) -> tuple[int, list]:
    """Run a build step, each line it prints shown as progress; (exit code, its last lines)."""
    env = {**os.environ, "UV_NO_PROGRESS": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    tail: list = []
    try:
        proc = subprocess.Popen(argv, cwd=cwd if os.path.isdir(cwd) else None, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, env=env)
    except OSError as exc:
        return 127, [str(exc)]
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        if line:
            tail = (tail + [line])[-12:]
            say(Notice("  " + line, verbatim=True))
    return proc.wait(), tail


def _no_python(env: JobEnv, tail: list) -> UsageError:
    why = f" ({tail[0].strip()})" if tail else ""
    if env.python is None:
        return UsageError(f"no Python found to build the job's environment from {env.conda_file}{why}",
                          hint="put python3 on PATH, " + HOST_HINT)
    return UsageError(f"{env.conda_file} asks for Python {env.python}, and no Python {env.python} is on this "
                      f"machine{why}", hint=f"install it (e.g. `uv python install {env.python}`), " + HOST_HINT)


def _failed(env: JobEnv, tail: list) -> UsageError:
    last = " / ".join(line.strip() for line in tail[-4:])
    return UsageError(f"the job's environment from {env.conda_file} could not be built: {last}",
                      hint="`dtrain validate --env SPEC` checks the pins for that Python; fix the pip part, " + HOST_HINT)


class _lock:
    """flock(2) on a file beside the environments: one build per hash at a time on this machine. With
    wait=False, BlockingIOError at once when it is taken (clean_envs: a busy environment is left alone)."""

    def __init__(self, path: Path, wait: bool = True):
        self.path = path
        self.wait = wait
        self.fd = -1

    def __enter__(self):
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX if self.wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, *exc):
        os.close(self.fd)
