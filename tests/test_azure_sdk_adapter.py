"""The azure-ai-ml internals dtrain relies on (backends/azure/sdk.py) are there in the installed SDK.

An SDK upgrade that moves or renames one of them fails here first, naming it, instead of as a confusing
error in the middle of a submit. When this fails after an upgrade: fix sdk.py for the new release, run
the emulator tests (tests/test_azure_backend.py), then move the range in pyproject.toml and
sdk.SUPPORTED together.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from dtrain.backends.azure import sdk

ROOT = Path(__file__).resolve().parents[1]


def _declared() -> SpecifierSet:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    reqs = [Requirement(d) for d in deps if Requirement(d).name == "azure-ai-ml"]
    assert len(reqs) == 1, "pyproject.toml must declare azure-ai-ml exactly once"
    return reqs[0].specifier


def test_the_adapter_and_pyproject_declare_the_same_sdk_range():
    assert _declared() == SpecifierSet(sdk.SUPPORTED), (
        f"pyproject.toml says azure-ai-ml{_declared()}, backends/azure/sdk.py SUPPORTED says {sdk.SUPPORTED}: "
        "move them together, after the emulator tests pass on the new release")


def test_the_installed_sdk_is_inside_the_supported_range():
    installed = importlib.metadata.version("azure-ai-ml")
    assert SpecifierSet(sdk.SUPPORTED).contains(installed, prereleases=True), (
        f"azure-ai-ml {installed} is installed, but dtrain's private SDK calls (backends/azure/sdk.py) are "
        f"known to hold only for azure-ai-ml{sdk.SUPPORTED}")


def _resolve(target: str):
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    return getattr(obj, attr) if attr else obj


@pytest.mark.parametrize("target,attr,params", sdk.PRIVATE, ids=[f"{t}.{a}" for t, a, _ in sdk.PRIVATE])
def test_each_private_sdk_member_exists_with_a_compatible_signature(target, attr, params):
    owner = _resolve(target)
    version = importlib.metadata.version("azure-ai-ml")
    try:
        member = inspect.getattr_static(owner, attr)
    except AttributeError:
        pytest.fail(f"azure-ai-ml {version}: {target} has no {attr} any more; backends/azure/sdk.py uses it")
    if params is None:
        return
    fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
    assert callable(fn), f"azure-ai-ml {version}: {target}.{attr} is no longer callable"
    sig = inspect.signature(fn)
    names = [p for p in sig.parameters if p != "self"]
    positional = [p for p in names if sig.parameters[p].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                                 inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    assert positional[:len(params)] == list(params), (
        f"azure-ai-ml {version}: {target}.{attr}{sig} no longer takes {params} first; backends/azure/sdk.py "
        "calls it that way")
    required = [p for p in positional[len(params):] if sig.parameters[p].default is inspect.Parameter.empty]
    assert not required, f"azure-ai-ml {version}: {target}.{attr}{sig} now requires {required} as well"


def test_runs_operations_is_a_property_giving_run_operations():
    from azure.ai.ml.operations import JobOperations
    from azure.ai.ml.operations._run_operations import RunOperations

    prop = inspect.getattr_static(JobOperations, "_runs_operations")
    assert isinstance(prop, property), "JobOperations._runs_operations is no longer a property"
    hints = inspect.signature(prop.fget).return_annotation
    assert hints in (RunOperations, "RunOperations"), f"JobOperations._runs_operations now returns {hints}"


def test_the_code_upload_calls_upload_file_through_the_module_so_the_watch_sees_it():
    """sdk.upload_file_failures replaces _asset_utils.upload_file: that works only while upload_directory
    looks the function up in its module at call time."""
    from azure.ai.ml._utils import _asset_utils

    def names(code):      # the function's global names and those of its comprehensions and closures
        found = set(code.co_names)
        for const in code.co_consts:
            if inspect.iscode(const):
                found |= names(const)
        return found

    assert "upload_file" in names(_asset_utils.upload_directory.__code__), (
        "azure-ai-ml's upload_directory no longer calls the module's upload_file: the upload watch in "
        "backends/azure/sdk.py (upload_guard.py's safety net) would see nothing")


def test_the_upload_watch_records_a_failure_and_puts_the_function_back():
    from azure.ai.ml._utils import _asset_utils

    original = _asset_utils.upload_file
    seen = []

    def failing(*args, **kwargs):
        raise PermissionError("403")

    _asset_utils.upload_file = failing
    try:
        with sdk.upload_file_failures(seen.append):
            with pytest.raises(PermissionError):
                _asset_utils.upload_file("client", "src")
        assert _asset_utils.upload_file is failing and len(seen) == 1
    finally:
        _asset_utils.upload_file = original


def test_no_other_module_calls_sdk_internals():
    """Private members of SDK objects are reached only through sdk.py."""
    import ast

    private = {attr for _, attr, _ in sdk.PRIVATE}
    src = ROOT / "src" / "dtrain"
    offenders = []
    for path in sorted(src.rglob("*.py")):
        if path == src / "backends" / "azure" / "sdk.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            hit = None
            if isinstance(node, ast.Attribute) and node.attr in private:
                hit = node.attr
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                hit = next((m for m in mods if m.startswith("azure.") and
                            any(part.startswith("_") for part in m.split("."))), None)
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("azure."):
                    hit = hit or next((a.name for a in node.names if a.name.startswith("_")), None)
            if hit:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {hit}")
    assert not offenders, "private SDK members used outside backends/azure/sdk.py:\n" + "\n".join(offenders)
