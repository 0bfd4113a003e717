"""Which `python` a local job's command runs, said truthfully, and whether its program exists at all.

Azure ML runs the command in the environment's image, where `python` is the environment's. Here the
ranks inherit the submitting shell's PATH, so `python` is whatever comes first there:
- an activated environment's python stays first (a user who installed dtrain with pipx or `uv tool`
  still runs their project's python);
- where `python` resolves to nothing and dtrain itself runs from a virtual environment (`.venv/bin/dtrain`
  not activated), that environment's bin folder goes first on the job's PATH;
- `--python PATH` (or DTRAIN_LOCAL_PYTHON) chooses the interpreter: the job folder's bin/python links to
  it (submit makes the link) and goes first.
check_program refuses, before any process starts, a command whose program is not on the job's PATH."""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass

from ...errors import UsageError
from ...settings import current

PYTHON_VAR = "DTRAIN_LOCAL_PYTHON"
# words bash runs itself: nothing to find on PATH
_SHELL_WORDS = {"cd", "export", "set", "source", ".", "if", "for", "while", "case", "[", "[[", "{", "(", "echo",
                "exec", "true", "false", "test", "eval", "unset", "ulimit", "umask", "time", "!"}


@dataclass(frozen=True)
class Interpreter:
    path: str | None        # the job's PATH when dtrain changes it, else None (the shell's is inherited)
    link: str | None        # the interpreter the job folder's bin/python links to (--python), else None
    python: str | None      # what `python` resolves to for the job (None: nothing)
    why: str                # how it was chosen, for the note


def chosen_by_setting() -> bool:
    return bool(current().text(PYTHON_VAR))


def choose(job_dir: str, chosen: str | None = None, base_path: str | None = None,
           env_bin: str | None = None) -> Interpreter:
    """The job's `python`. chosen: --python (else DTRAIN_LOCAL_PYTHON); base_path: the PATH the job would
    inherit (the spec's PATH, else this process's); env_bin: the bin folder of the job's own environment
    (jobenv.py), first on its PATH when no interpreter is chosen."""
    base = base_path if base_path is not None else os.environ.get("PATH", "")
    chosen = chosen or current().text(PYTHON_VAR)
    if env_bin and not chosen:
        return Interpreter(_prepend(env_bin, base), None, os.path.join(env_bin, "python"), "the job's environment")
    if chosen:
        exe = shutil.which(chosen) if os.sep not in chosen else chosen
        if not exe or not os.access(exe, os.X_OK) or os.path.isdir(exe):
            raise UsageError(f"--python {chosen}: no such interpreter" + (f" ({PYTHON_VAR})" if
                             chosen == current().text(PYTHON_VAR) else ""),
                             hint="give the path of a python executable, e.g. .venv/bin/python")
        exe = os.path.abspath(exe)
        return Interpreter(_prepend(os.path.join(job_dir, "bin"), base), exe, exe, "chosen with --python")
    found = shutil.which("python", path=base)
    if found:
        return Interpreter(None, None, found, "first on PATH")
    if sys.prefix != sys.base_prefix:               # dtrain runs from a virtual environment not activated
        venv_bin = os.path.dirname(sys.executable)
        if shutil.which("python", path=venv_bin):
            return Interpreter(_prepend(venv_bin, base), None, os.path.join(venv_bin, "python"),
                               "`python` is not on PATH: dtrain's own virtual environment's")
    return Interpreter(None, None, None, "`python` is not on PATH")


def _prepend(folder: str, path: str) -> str:
    return os.pathsep.join([folder] + [p for p in path.split(os.pathsep) if p and p != folder])


def note(environment: str | None, it: Interpreter) -> str:
    """The plan's note: what runs in place of the spec's environment (JobSpec.environment_label)."""
    where = f"python is {it.python} ({it.why})" if it.python else it.why
    if environment:
        return f"{environment} is not used locally (no Docker): the command runs here; {where}"
    return f"the command runs here; {where}"


def program(command: str) -> str | None:
    """The program the command starts (its first word after VAR=value assignments), or None when bash
    runs it itself or the command cannot be read that simply."""
    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        return None
    words = [w for w in words if not (("=" in w) and w.split("=", 1)[0].isidentifier())] or [""]
    first = words[0]
    if not first or first in _SHELL_WORDS or any(c in first for c in "$`;|&<>"):
        return None
    return first


def _bash_knows(prog: str, path: str, cwd: str) -> bool:
    """Whether bash runs `prog` itself (a builtin or keyword: exit, read, wait, ...) or finds it: asked of
    bash, once, at submit."""
    import subprocess

    try:
        return subprocess.run(["bash", "-c", 'command -v -- "$1" >/dev/null', "_", prog], env={"PATH": path},
                              cwd=cwd if os.path.isdir(cwd) else None, timeout=10,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return True                               # cannot tell: let the job say it


def check_program(command: str, path: str, cwd: str) -> None:
    """Exit 2 before N processes start when the command's program is not there: found on `path` (the job's
    PATH), or, for a relative path with a slash, in the job's code folder `cwd`."""
    prog = program(command)
    if prog is None:
        return
    if os.sep in prog:
        full = prog if os.path.isabs(prog) else os.path.join(cwd, prog)
        if os.path.exists(full):
            return
    elif shutil.which(prog, path=path) or _bash_knows(prog, path, cwd):
        return
    hint = ("activate the environment that has it, or choose one with --python PATH (or DTRAIN_LOCAL_PYTHON)"
            if prog in ("python", "python3") else "install it, or put its folder on PATH")
    raise UsageError(f"the command runs '{prog}', and it is not on the job's PATH; no process was started",
                     hint=hint)
