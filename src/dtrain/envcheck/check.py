"""`dtrain validate --env`: the job's environment checked offline as far as it can be, every problem at once
as diagnostics (file:line), like the rest of validate: the conda file's structure and Python version, its pip
part resolved for that Python on Linux x86_64, and the code's imports against what the environment, the
standard library and the code folder provide. What cannot be checked here (a registered environment, an
image's own packages, a Docker build context) is said to be unchecked, never passed in silence."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Callable

from ..errors import DtrainError
from ..spec.diagnostics import Collector, Diagnostic
from ..spec.model import JobSpec
from . import imports as _imports
from .conda import CondaEnv, read_conda
from .resolve import Resolution, named_in, resolve
from .source import Doc, EnvSource, environment_source

Lookup = Callable[[str], "dict | None"]

# Images with no Python packages of their own: what the conda file lists is all there is.
_BARE_IMAGES = re.compile(r"^(mcr\.microsoft\.com/azureml/(openmpi|intelmpi|minimal|base|inference-base)[^/]*|"
                          r"(docker\.io/)?(library/)?(ubuntu|debian|python|continuumio/miniconda3?)(:|$))", re.I)


def host_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def check_environment(spec: JobSpec, *, tool: str | None = None, lookup: Lookup | None = None) -> list:
    """Every problem of the spec's environment. tool: force "uv" or "pip" as the resolver; lookup: reads a
    registered environment from the workspace (Runner.read_environment), where one is configured."""
    c = Collector()
    src = environment_source(spec, c)
    if src is None:
        return c.items
    where = src.where.collector()
    env: CondaEnv | None = None
    resolution: Resolution | None = None
    if src.kind != "inline" and not _registered(src, lookup, where, spec.base_dir):
        c.items.extend(where.items)
        return c.items
    if src.conda is not None:
        cc = src.conda.collector()
        env = read_conda(src.conda, cc)
        if env is not None and env.pip_requirements and not cc.errors:
            resolution = _resolve(env, src, cc, tool)
        elif env is not None and env.pip_requirements:
            cc.note(env.pip_path or (), "pip part not resolved: fix the conda file's errors first",
                    code="env-unchecked")
        c.items.extend(cc.items)
    elif src.build:
        where.warning(src.where.at("build"), f"built from the Docker context '{src.build}': its packages are not "
                      "checked (unchecked)", code="env-unchecked")
    elif src.image:
        where.warning(src.where.at("image"), f"image {src.image} without a conda file: the image's packages are "
                      "not checked (unchecked)", code="env-unchecked")
    c.items.extend(where.items)
    if env is not None:
        c.items.extend(_check_imports(spec, src, env, resolution))
    return c.items


def _registered(src: EnvSource, lookup: Lookup | None, where: Collector, base_dir: Path) -> bool:
    """Read a registered environment from the workspace into `src`; False when it cannot be checked (said)."""
    got: dict | None = None
    try:
        got = lookup(src.ref or "") if lookup is not None else None
    except DtrainError as exc:
        got = {"found": None, "why": exc.message}
    if got and got.get("found") is False:
        where.error(src.where.at(), f"{src.label} does not exist in {got['where']}", code="env-not-found",
                    hint="fix its name or version, or register it (az ml environment create)")
        return False
    if not got or not got.get("found"):
        why = (got or {}).get("why") or "no Azure ML workspace to read it from"
        where.warning(src.where.at(), f"{src.label} is registered in Azure ML and was not read ({why}): its "
                      "packages are unchecked", code="env-unchecked",
                      hint="configure the workspace (dtrain config) to read it, or use an inline environment "
                           "with a conda file: docs/environments.md")
        return False
    src.image, src.build = got.get("image"), ("(the registered build context)" if got.get("build") else None)
    if isinstance(got.get("conda_file"), dict):   # its lines are the workspace's: point at `environment:`
        src.conda, src.conda_dir = Doc(got["conda_file"], src.where.file, src.where.locations, src.where.prefix), base_dir
    where.note(src.where.at(), f"{src.label} read from the workspace (version {got.get('version')})",
               code="env-registered")
    return True


def _resolve(env: CondaEnv, src: EnvSource, c: Collector, tool: str | None) -> Resolution:
    python = env.python or host_python()
    res = resolve(env.pip_text(), python, src.conda_dir, tool=tool)
    if res.ok:
        return res
    if res.unreachable or not res.tool:
        c.warning(env.pip_path or (), f"pip part not resolved ({res.error or 'no resolver'}): its pins are "
                  "unchecked", code="env-unchecked", hint="check the network or the index settings, and run again")
        return res
    reqs = env.pip_requirements
    named = set(named_in(res.error, [d.name for d in reqs]))
    culprits = [d for d in reqs if d.name in named] or [None]
    for d in culprits:
        what = f"'{d.text}' cannot be installed" if d else "the pip part cannot be resolved"
        c.error(d.path if d else (env.pip_path or ()), f"{what} for Python {python} on Linux x86_64 "
                f"({res.tool}): {res.error}", code="pip-unsatisfiable",
                hint="change or drop the pin: Azure's image build would fail on it after minutes of building")
    return res


def _check_imports(spec: JobSpec, src: EnvSource, env: CondaEnv, res: Resolution | None) -> list:
    code = spec.code_path()
    if code is None or not code.exists():
        return []
    shown = _shown(code)
    uses, local = _imports.scan(code, shown)
    dists = {d.name for d in env.conda + env.pip if d.name}
    if res is not None and res.ok:
        dists |= set(res.pins)           # what the pins bring with them is installed too
    names = _imports.provided_names(dists)
    bare = src.image is None or bool(_BARE_IMAGES.match(src.image))
    conda_file = src.conda.file if src.conda else None
    out, seen = [], set()
    for u in uses:
        if (u.top, u.file) in seen or _imports.is_provided(u.top, dists, names, local):
            continue
        seen.add((u.top, u.file))
        dist = _imports.suggestion(u)
        where = f" ({Path(conda_file).name})" if conda_file else ""
        if bare:
            out.append(Diagnostic("error", f"'{u.name}' is imported, and neither the environment{where}, the "
                                  f"standard library nor the code folder provides it", file=u.file, line=u.line,
                                  hint=f"add `{dist}` to the conda file's pip part", code="missing-import"))
        else:
            out.append(Diagnostic("warning", f"'{u.name}' is imported and the conda file{where} does not provide "
                                  f"it: only the image {src.image} can", file=u.file, line=u.line,
                                  hint=f"add `{dist}` to the conda file's pip part unless the image has it",
                                  code="missing-import"))
    return out


def _shown(path: Path) -> str:
    """A path as diagnostics name it: relative to the working folder when under it."""
    rel = os.path.relpath(path)
    return path.as_posix() if rel.startswith("..") else rel
