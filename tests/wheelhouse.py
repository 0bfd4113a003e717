"""Tiny wheels written in a test (a wheel is a zip with METADATA, WHEEL and RECORD), for resolving and
installing with `--no-index --find-links` and no network."""
from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(folder: Path, name: str, version: str, *, requires=(), requires_python: str | None = None,
               module: str | None = None, body: str = "") -> Path:
    """A pure-Python wheel of `name` that installs module `module` (default: the name) holding `body`."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    module = module or dist
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python:
        meta.append(f"Requires-Python: {requires_python}")
    meta += [f"Requires-Dist: {r}" for r in requires]
    files = {
        f"{module}/__init__.py": (body or f"VERSION = {version!r}\n").encode(),
        f"{info}/METADATA": ("\n".join(meta) + "\n").encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: dtrain-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/top_level.txt": f"{module}\n".encode(),
    }
    record = "".join(f"{p},{_digest(d)},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, d in files.items():
            z.writestr(p, d)
    return path
