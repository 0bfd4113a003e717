"""A conda environment file read for what a check needs: its Python version, its conda packages and its pip
part, each with the location of its line, and its structure checked as `conda env create` reads it."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..spec.diagnostics import Collector
from .source import Doc

_KEYS = {"name", "channels", "dependencies", "prefix", "variables"}
# PEP 508's name at the start of a requirement; conda's match spec name (before a space, = < > ! [)
_NAME = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
_PY = re.compile(r"^python(?:\s*(?:==|=|>=|~=|\s)\s*(\d+)(?:\.(\d+))?[\d.*]*)?\s*$", re.I)
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Dep:
    text: str          # the line as written
    name: str | None   # the normalized distribution name (None for an option line such as --index-url)
    path: tuple        # where it is (a location path of the Doc's file)


@dataclass
class CondaEnv:
    doc: Doc
    python: str | None = None           # "3.10", as the file asks (None: no version pinned)
    python_path: tuple | None = None
    conda: list = field(default_factory=list)   # [Dep]: conda packages (not python, not pip)
    pip: list = field(default_factory=list)     # [Dep]: the pip part, option lines included
    pip_path: tuple | None = None

    @property
    def pip_requirements(self) -> list:
        return [d for d in self.pip if d.name]

    def pip_text(self) -> str:
        """The pip part as the requirements file conda hands to pip."""
        return "".join(d.text + "\n" for d in self.pip)


def read_conda(doc: Doc, c: Collector) -> CondaEnv | None:
    """The conda file's content, its structural problems added to `c`; None when it is not a mapping."""
    out = CondaEnv(doc)
    data = doc.data
    if not isinstance(data, dict):
        c.error(doc.at(), "a conda file is a mapping (name, channels, dependencies)", code="conda-structure",
                hint="see https://docs.conda.io/projects/conda/en/stable/user-guide/tasks/manage-environments.html")
        return None
    for k in data:
        if k not in _KEYS:
            c.warning(doc.at(k), f"conda file: unknown key '{k}' (conda reads {', '.join(sorted(_KEYS))})",
                      code="conda-structure")
    deps = data.get("dependencies")
    if not isinstance(deps, list):
        c.error(doc.at("dependencies") if "dependencies" in data else doc.at(),
                "conda file: `dependencies` must be a list of packages", code="conda-structure",
                hint="e.g. dependencies: [python=3.10, pip, {pip: [torch==2.3.1]}]")
        return out
    has_pip = False
    for i, d in enumerate(deps):
        if isinstance(d, str):
            has_pip |= _conda_dep(out, d, doc.at("dependencies", i), c)
        elif isinstance(d, dict) and list(d) == ["pip"]:
            _pip_part(out, d["pip"], doc.at("dependencies", i, "pip"), c)
        else:
            c.error(doc.at("dependencies", i), "conda file: a dependency is a package spec or a `pip:` list",
                    code="conda-structure")
    if out.pip and not has_pip:
        c.warning(out.pip_path or doc.at("dependencies"), "conda file: a `pip:` part without `pip` among the "
                  "conda dependencies: conda may use another pip, or none", code="conda-pip",
                  hint="add `- pip` to dependencies")
    if out.python is None and out.python_path is None:
        c.warning(doc.at("dependencies"), "conda file: no python version: conda picks the newest it finds when "
                  "the image is built, which may not be the one the code was tested with", code="conda-python",
                  hint="pin it, e.g. `- python=3.11`")
    return out


def _conda_dep(out: CondaEnv, text: str, path: tuple, c: Collector) -> bool:
    """One conda dependency; True when it is pip itself."""
    spec = text.split("::")[-1].strip()          # a channel prefix: conda-forge::numpy
    m = _NAME.match(spec)
    if not m:
        c.error(path, f"conda file: '{text}' is not a package spec", code="conda-structure")
        return False
    name = m.group(1).lower()
    if name == "python":
        _python(out, spec, path, c)
        return False
    if name == "pip":
        return True
    out.conda.append(Dep(text, normalize(name), path))
    return False


def _python(out: CondaEnv, spec: str, path: tuple, c: Collector) -> None:
    out.python_path = path
    m = _PY.match(spec)
    if not m:
        c.error(path, f"conda file: '{spec}' is not a Python version conda understands", code="conda-python",
                hint="write e.g. `python=3.11`")
        return
    if m.group(1) is None:
        c.warning(path, "conda file: python without a version: conda picks the newest when the image is built",
                  code="conda-python", hint="pin it, e.g. `- python=3.11`")
        return
    major, minor = int(m.group(1)), int(m.group(2) or 0)
    if major != 3 or m.group(2) is None:
        c.error(path, f"conda file: '{spec}' asks for no Python 3.x version", code="conda-python",
                hint="write e.g. `python=3.11`")
        return
    if minor < 8:
        c.warning(path, f"conda file: Python 3.{minor} is past its end of life: current packages publish no wheels "
                  "for it", code="conda-python", hint="pin a supported version, e.g. `python=3.11`")
    out.python = f"3.{minor}"


def _pip_part(out: CondaEnv, items, path: tuple, c: Collector) -> None:
    out.pip_path = path
    if not isinstance(items, list):
        c.error(path, "conda file: `pip:` must be a list of requirements", code="conda-structure")
        return
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            c.error(path + (i,), "conda file: a pip requirement is a string, e.g. torch==2.3.1",
                    code="conda-structure", hint=("quote the line: YAML reads `x: y` as a mapping"
                                                  if isinstance(item, dict) else None))
            continue
        text = item.strip()
        if text.startswith("-"):
            out.pip.append(Dep(text, None, path + (i,)))     # --index-url, --find-links, -r file: options
            continue
        m = _EGG.search(text) if "://" in text.split("@")[0] or text.startswith(("git+", "http")) else None
        m = m or _NAME.match(text)
        if not m:
            c.error(path + (i,), f"conda file: '{text}' is not a pip requirement", code="pip-requirement",
                    hint="write NAME, NAME==VERSION or NAME @ URL")
            continue
        out.pip.append(Dep(text, normalize(m.group(1)), path + (i,)))
