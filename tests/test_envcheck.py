"""`dtrain validate --env` (issue 27): the job's environment checked before the GPUs are paid for. Pins are
resolved by the real resolvers (uv, pip) against wheels built in the test (`--no-index --find-links` in the
conda file's pip part, as conda hands that part to pip as a requirements file): no network, except the one
test marked `network`, against the package index."""
from __future__ import annotations

import json
import socket
import sys

import pytest
from fakes import run_main
from wheelhouse import make_wheel

from dtrain.envcheck import imports
from dtrain.envcheck.resolve import find_uv, resolve

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
NEWER = f"3.{sys.version_info.minor + 1}"
HAVE_UV = find_uv() is not None
needs_uv = pytest.mark.skipif(not HAVE_UV, reason="uv is not installed (the test extra brings it)")


@pytest.fixture
def wheels(tmp_path):
    folder = tmp_path / "wheels"
    make_wheel(folder, "torch", "2.0.0")
    make_wheel(folder, "tinypkg", "1.0", requires_python=f">={NEWER}")
    make_wheel(folder, "helperdist", "1.0", requires=["extradep>=1"])
    make_wheel(folder, "extradep", "1.0")
    make_wheel(folder, "pyyaml", "6.0", module="yaml")
    return folder


def _job(write, tmp_path, wheels, pins, code, *, image="mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04",
         conda_extra=""):
    lines = "".join(f"    - {p}\n" for p in pins)
    write("conda.yml", f"name: job\ndependencies:\n  - python={PY}\n  - pip\n{conda_extra}  - pip:\n"
                       f"    - --no-index\n    - --find-links {wheels}\n{lines}")
    for rel, text in code.items():
        write(f"src/{rel}", text)
    return write("job.yml", f"command: python train.py\ncode: src\nenvironment:\n  image: {image}\n"
                            "  conda_file: conda.yml\ncompute: azureml:gpu\n")


@needs_uv
def test_imports_the_environment_lacks_are_named_with_file_and_line(capsys, write, tmp_path, wheels, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _job(write, tmp_path, wheels, ["torch==2.0.0"], {
        "train.py": "import os\nimport torch\nfrom transformers import AutoModel\nimport scipy.stats\n"
                    "from models import net\ntry:\n    import apex\nexcept ImportError:\n    apex = None\n",
        "models/__init__.py": "", "models/net.py": "import numpy as np\n"})
    code, _, err = run_main(capsys, "validate", "--env", spec)
    assert code == 2, err
    assert "src/train.py:3: error: 'transformers' is imported" in err
    assert "src/train.py:4: error: 'scipy.stats' is imported" in err and "add `scipy`" in err
    assert "src/models/net.py:1: error: 'numpy'" in err
    assert "'torch'" not in err and "'os'" not in err and "'models'" not in err and "'apex'" not in err


@needs_uv
def test_a_pin_that_cannot_be_satisfied_for_the_python_asked_is_named_at_its_line(capsys, write, tmp_path, wheels):
    spec = _job(write, tmp_path, wheels, ["torch==2.0.0", "tinypkg==1.0"], {"train.py": "import torch\n"})
    code, _, err = run_main(capsys, "validate", "--env", spec)
    assert code == 2, err
    assert f"conda.yml:9:7: error: 'tinypkg==1.0' cannot be installed for Python {PY} on Linux x86_64 (uv)" in err
    assert f"Python >={NEWER}" in err and "'torch==2.0.0' cannot" not in err


@needs_uv
def test_stdlib_own_modules_and_what_the_pins_bring_pass(capsys, write, tmp_path, wheels):
    spec = _job(write, tmp_path, wheels, ["helperdist==1.0", "pyyaml"], {
        "train.py": "import json, argparse, pathlib\nimport helperdist\nimport extradep\nimport yaml\n"
                    "from utils import x\n",
        "utils.py": "x = 1\n"})
    code, out, err = run_main(capsys, "validate", "--env", spec, "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["valid"], err
    assert not [d for d in doc["diagnostics"] if d["severity"] != "note"], doc


@needs_uv
def test_an_image_with_its_own_packages_makes_a_missing_import_a_warning(capsys, write, tmp_path, wheels):
    spec = _job(write, tmp_path, wheels, ["torch==2.0.0"], {"train.py": "import transformers\n"},
                image="mcr.microsoft.com/azureml/curated/acpt-pytorch-2.2-cuda12.1:latest")
    code, _, err = run_main(capsys, "validate", "--env", spec)
    assert code == 0 and "warning: 'transformers' is imported" in err and "only the image" in err


@pytest.mark.slow
def test_the_pip_resolver_names_the_pin_where_uv_is_absent(tmp_path, wheels):
    res = resolve(f"--no-index\n--find-links {wheels}\ntinypkg==1.0\n", PY, tmp_path, tool="pip")
    assert res.tool == "pip" and not res.ok and not res.unreachable and "tinypkg" in res.error
    ok = resolve(f"--no-index\n--find-links {wheels}\nhelperdist\n", PY, tmp_path, tool="pip")
    assert ok.ok and ok.pins == {"helperdist": "1.0", "extradep": "1.0"}


def test_registered_and_image_only_environments_are_said_unchecked(capsys, write):
    a = write("a.yml", "command: python x.py\nenvironment: azureml:my-env:3\ncompute: azureml:gpu\n")
    b = write("b.yml", "command: python x.py\nenvironment: azureml:my-env@latest\ncompute: azureml:gpu\n")
    c = write("c.yml", "command: python x.py\nenvironment: {image: 'python:3.11'}\ncompute: azureml:gpu\n")
    code, _, err = run_main(capsys, "validate", "--env", a, b, c)
    assert code == 0
    assert "a.yml:2:1: warning: environment azureml:my-env:3 is registered in Azure ML" in err and "unchecked" in err
    assert "environment azureml:my-env@latest is registered" in err
    assert "c.yml:2:15: warning: image python:3.11 without a conda file" in err
    code, _, _ = run_main(capsys, "validate", "--env", "--strict", a)
    assert code == 2


def test_the_conda_files_structure_and_python_are_checked_at_their_lines(capsys, write):
    write("env/conda.yml", "dependencies:\n  - python=2.7\n  - numpy\n  - pip:\n    - 'torch >= 2'\n    - 42\n"
                           "  - {conda: x}\nextras: 1\n")
    write("env/environment.yml", "image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04\nconda_file: conda.yml\n")
    spec = write("job.yml", "command: python x.py\nenvironment: file:env/environment.yml\ncompute: azureml:gpu\n")
    code, out, _ = run_main(capsys, "validate", "--env", spec, "-o", "json")
    diags = {(d["code"], d["line"]) for d in json.loads(out)["diagnostics"]}
    assert code == 2
    assert {("conda-python", 2), ("conda-structure", 6), ("conda-structure", 7), ("conda-structure", 8),
            ("conda-pip", 4), ("env-unchecked", 4)} <= diags


def test_an_inline_conda_file_without_python_is_warned(capsys, write):
    spec = write("job.yml", "command: python x.py\ncompute: azureml:gpu\nenvironment:\n  image: ubuntu:22.04\n"
                            "  conda_file:\n    dependencies: [pip]\n")
    code, _, err = run_main(capsys, "validate", "--env", spec)
    assert code == 0 and "job.yml:6:5: warning: conda file: no python version" in err


def test_validate_without_env_reads_no_conda_file(capsys, write):
    spec = write("job.yml", "command: python x.py\ncompute: azureml:gpu\nenvironment:\n  image: ubuntu:22.04\n"
                            "  conda_file: {dependencies: [python=2.7]}\n")
    code, _, err = run_main(capsys, "validate", spec)
    assert code == 0 and "conda" not in err


def test_the_import_map_names_distributions():
    use = imports.ImportUse("sklearn.linear_model", "sklearn", "x.py", 1)
    assert imports.suggestion(use) == "scikit-learn"
    assert imports.suggestion(imports.ImportUse("cv2", "cv2", "x.py", 1)) == "opencv-python"
    names = imports.provided_names({"pillow", "pyyaml", "opencv-python-headless", "azure-ai-ml"})
    assert {"pil", "yaml", "cv2"} <= names
    assert imports.is_provided("azure", {"azure-ai-ml"}, names, set())
    assert not imports.is_provided("transformers", {"torch"}, imports.provided_names({"torch"}), set())


def _index_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
        return True
    except OSError:
        return False


@pytest.mark.network
@pytest.mark.slow
@needs_uv
def test_against_the_package_index(tmp_path):
    if not _index_reachable():
        pytest.skip("the package index (pypi.org) is not reachable from here")
    ok = resolve("requests==2.32.3\n", "3.10", tmp_path)
    assert ok.ok and ok.pins["requests"] == "2.32.3" and "urllib3" in ok.pins
    bad = resolve("requests==2.32.3\nnumpy==2.3.0\n", "3.10", tmp_path)   # numpy 2.3 needs Python >= 3.11
    assert not bad.ok and not bad.unreachable and "numpy" in bad.error
