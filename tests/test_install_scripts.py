"""The training scripts need only what the README's Quickstart install gives them (dtrain[torch]).

Static and fast; tests/test_install_quickstart.py checks the same in a real fresh environment.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "training_scripts"
TF_SCRIPTS = ("tf_multiworker.py", "tf_parameter_server.py")


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """Top-level names of every import in the file (at any depth), and those probed in a try block
    (optional: the script works without them)."""
    tree = ast.parse(path.read_text())
    every, probed = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            for inner in (n for body in node.body for n in ast.walk(body)):
                probed |= _names(inner)
        every |= _names(node)
    return every, probed


def _names(node) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name.split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module != "__future__":
        return {node.module.split(".")[0]}
    return set()


def _extra(name: str) -> set[str]:
    """Distribution names of a pyproject extra (torch==2.13.0 -> torch)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower() for req in project["optional-dependencies"][name]}


def test_every_script_imports_only_the_stdlib_its_folder_and_the_torch_extra():
    local = {p.stem for p in SCRIPTS.glob("*.py")}
    every, probed = set(), set()
    for path in SCRIPTS.glob("*.py"):
        e, p = _imports(path)
        every |= e
        probed |= p
    third_party = every - set(sys.stdlib_module_names) - local - probed
    # TensorFlow is the one thing the Quickstart install leaves out (tf_common says what to add)
    assert third_party - {"tensorflow"} <= _extra("torch"), third_party - _extra("torch")
    assert {"numpy", "torch"} <= third_party


@pytest.mark.parametrize("script", TF_SCRIPTS)
def test_tensorflow_scripts_say_what_to_add_when_tensorflow_is_missing(tmp_path, script):
    # -S: no site-packages at all, so neither TensorFlow nor numpy can be imported
    r = subprocess.run([sys.executable, "-S", "-s", "-E", str(SCRIPTS / script)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"{script}: TensorFlow is not installed") and "dtrain[tensorflow]" in r.stderr


@pytest.mark.parametrize("template", ["tensorflow-multiworker", "tensorflow-parameter-server"])
def test_tensorflow_templates_say_what_to_add(template):
    lines = (ROOT / "job_templates" / f"{template}.yml").read_text().splitlines()
    assert any(line.startswith("#") and "dtrain[tensorflow]" in line for line in lines[:3])
