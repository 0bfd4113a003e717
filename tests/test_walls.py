"""The walls between dtrain's parts, read from the source (ast), so that a new import that breaks one
fails here, naming the file and line:

- nothing outside src/dtrain/backends/azure/ imports the Azure SDK (`azure`, `azure.*`);
- a backend never imports another backend: backends/local/ never imports backends.azure, and
  backends/azure/ never imports backends.local; the shared modules directly under backends/ import
  neither (only backends/__init__.py's get_backend, the one place that picks a backend, names both);
- backends never print: nothing under backends/ calls print(), writes to sys.stdout/sys.stderr, or
  imports dtrain.output, dtrain.cli, rich, typer or click. What a backend has to say goes to the
  `notify` callable it was given (backends.base.Notice); the CLI prints it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "dtrain"
BACKENDS = PKG / "backends"
AZURE = BACKENDS / "azure"
LOCAL = BACKENDS / "local"
PRINTING = ("dtrain.output", "dtrain.cli", "rich", "typer", "click")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path):
    """(line, absolute module name) for every import in the file, at any depth (lazy imports too).
    `from X import Y` yields X and X.Y, as Y may be a submodule."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _files(root: Path):
    return sorted(root.rglob("*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(SRC.parent))


def test_the_walk_sees_the_modules():
    names = {_module_name(p) for p in _files(PKG)}
    assert {"dtrain.cli", "dtrain.backends", "dtrain.backends.azure.backend", "dtrain.backends.azure.workspace",
            "dtrain.backends.local.supervisor"} <= names
    # the resolver reads relative imports as Python does
    found = dict((m, n) for n, m in _imports(AZURE / "backend.py"))
    assert "dtrain.backends.azure.workspace" in found and "dtrain.backends.base" in found


def test_nothing_outside_backends_azure_imports_the_azure_sdk():
    bad = [f"{_rel(p)}:{n}: import {m}" for p in _files(PKG) if AZURE not in p.parents
           for n, m in _imports(p) if _within(m, "azure")]
    assert not bad, "the Azure SDK is imported outside src/dtrain/backends/azure/:\n" + "\n".join(bad)


@pytest.mark.parametrize("here,other", [(LOCAL, "dtrain.backends.azure"), (AZURE, "dtrain.backends.local")],
                         ids=["local-imports-no-azure", "azure-imports-no-local"])
def test_a_backend_never_imports_another_backend(here, other):
    bad = [f"{_rel(p)}:{n}: import {m}" for p in _files(here) for n, m in _imports(p) if _within(m, other)]
    assert not bad, f"{here.name} backend imports {other}:\n" + "\n".join(bad)


def test_shared_backend_modules_import_neither_backend():
    """What both backends use lives at backends/ level and depends on neither; only the registry's factories
    (backends/__init__.py) name one."""
    bad = []
    for p in sorted(BACKENDS.glob("*.py")):
        for n, m in _imports(p):
            if _within(m, "dtrain.backends.azure") or _within(m, "dtrain.backends.local"):
                if p.name == "__init__.py" and (_in_function(p, n, "_local") or _in_function(p, n, "_azure")):
                    continue                  # the registry's factories of the two built-in kinds
                bad.append(f"{_rel(p)}:{n}: import {m}")
    assert not bad, "shared backend modules import a backend:\n" + "\n".join(bad)


def _in_function(path: Path, line: int, name: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(f, ast.FunctionDef) and f.name == name and f.lineno <= line <= f.end_lineno
               for f in ast.walk(tree))


def test_backends_never_print():
    bad = []
    for p in _files(BACKENDS):
        for n, m in _imports(p):
            if any(_within(m, x) for x in PRINTING):
                bad.append(f"{_rel(p)}:{n}: import {m}")
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id in ("print", "pprint"):
                bad.append(f"{_rel(p)}:{node.lineno}: {f.id}()")
            elif isinstance(f, ast.Attribute) and f.attr in ("write", "writelines", "print") \
                    and isinstance(f.value, ast.Attribute) and f.value.attr in ("stdout", "stderr") \
                    and isinstance(f.value.value, ast.Name) and f.value.value.id == "sys":
                bad.append(f"{_rel(p)}:{node.lineno}: sys.{f.value.attr}.{f.attr}()")
    assert not bad, ("backends print (hand a Notice to notify instead; the CLI prints it):\n" + "\n".join(bad))


@pytest.mark.parametrize("modules", ["dtrain.backends.azure.workspace, dtrain.backends.azure", "dtrain.runner",
                                     "dtrain.cli"],
                         ids=["workspace-and-azure-package", "runner", "cli"])
def test_importing_loads_no_backend(modules):
    """`dtrain config` reads the workspace from backends/azure/, and every command builds a Runner:
    importing either (or the whole command line) must load neither the SDK nor a backend itself."""
    import subprocess
    import sys

    code = (f"import sys, {modules}\n"
            "print(sorted(m for m in sys.modules if m == 'azure' or m.startswith(('azure.', "
            "'dtrain.backends.azure.backend', 'dtrain.backends.local'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


CLI = PKG / "cli"
CLI_MAY_IMPORT = ("dtrain.backends.base", "dtrain.backends.names")   # the protocol's data types, the name rule


def test_the_cli_reaches_backends_only_through_the_runner():
    """cli/ is parsing and printing: it names no backend module (only the protocol's data types in
    backends.base and the job-name rule); choosing, routing and following go through dtrain.runner."""
    bad = [f"{_rel(p)}:{n}: import {m}" for p in _files(CLI) for n, m in _imports(p)
           if _within(m, "dtrain.backends") and not any(_within(m, ok) for ok in CLI_MAY_IMPORT)]
    assert not bad, "cli/ imports a backend module (go through dtrain.runner):\n" + "\n".join(bad)


def test_command_modules_are_thin():
    """One module per command or group, each turning options into runner calls: none above 150 lines."""
    long = {_rel(p): n for p in _files(CLI) if (n := len(p.read_text(encoding="utf-8").splitlines())) > 150}
    assert not long, f"command modules over 150 lines (move logic into the library): {long}"


def test_no_function_is_more_complex_than_c():
    """radon's cyclomatic complexity, C (20) at most, for every function in src/dtrain."""
    from radon.complexity import cc_rank, cc_visit

    bad = [f"{_rel(p)}:{b.lineno}: {b.name} {cc_rank(b.complexity)} ({b.complexity})"
           for p in _files(PKG) for b in cc_visit(p.read_text(encoding="utf-8")) if b.complexity > 20]
    assert not bad, "functions above complexity C (split them):\n" + "\n".join(bad)
