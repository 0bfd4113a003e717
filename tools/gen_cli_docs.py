"""Writes docs/cli.md, the command reference, from dtrain's commands themselves.

    python tools/gen_cli_docs.py           # rewrite docs/cli.md
    python tools/gen_cli_docs.py --check   # exit 1 if docs/cli.md is not what the commands say

tests/test_docs.py runs the check. The text comes from each command's help and parameters (not from
`--help` output, whose layout depends on the terminal and the typer/click versions).
"""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "cli.md"

HEADER = """# Command reference

Generated from the commands by `python tools/gen_cli_docs.py`; do not edit by hand
(`tests/test_docs.py` fails when this file and the commands disagree). Exit codes:
[exit-codes.md](exit-codes.md). Variables: [configuration.md](configuration.md).
"""


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


# typer >= 0.26 vendors click (typer._click), so parameters are told apart by their kind, not their class
def _is_argument(param) -> bool:
    return param.param_type_name == "argument"


# click names its types text/integer, typer's vendored click str/int: one spelling whatever is installed
_TYPE_NAMES = {"text": "TEXT", "str": "TEXT", "string": "TEXT", "integer": "INTEGER", "int": "INTEGER",
               "float": "FLOAT", "boolean": "BOOLEAN", "bool": "BOOLEAN", "path": "PATH", "filename": "PATH"}


def _arg_name(param) -> str:
    """SPEC for SPEC..., NAME for [NAME...]: usage adds the brackets and dots back."""
    return (param.metavar or param.name.upper()).strip("[]").rstrip(".")


def _value(param) -> str:
    if getattr(param, "is_flag", False):
        return ""
    if param.metavar:
        return param.metavar
    if type(param.type).__name__ == "Choice":
        return "|".join(param.type.choices)
    name = param.type.name.lower()
    return _TYPE_NAMES.get(name, name.upper())


def _default(param) -> str:
    d = param.default
    if callable(d) or d in (None, False, (), []) or getattr(param, "is_flag", False) and not d:
        return ""
    if isinstance(d, (list, tuple)):
        d = ", ".join(map(str, d))
    return f"`{d}`"


def _usage(path: str, command) -> str:
    parts = [path, "[OPTIONS]"]
    for p in command.params:
        if _is_argument(p):
            name = _arg_name(p) + ("..." if p.nargs == -1 else "")
            parts.append(name if p.required else f"[{name}]")
    if getattr(command, "commands", None):
        parts.append("COMMAND")
    return " ".join(parts)


def _section(path: str, command, level: str) -> list[str]:
    out = [f"{level} `{path}`", "", f"```\n{_usage(path, command)}\n```", ""]
    if command.help:
        out += [inspect.cleandoc(command.help).replace("\b\n", ""), ""]
    args = [p for p in command.params if _is_argument(p)]
    opts = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
    if args:
        out += ["| argument | required | description |", "|---|---|---|"]
        for p in args:
            help_text = getattr(p, "help", None) or ""
            out.append(f"| `{_arg_name(p)}` | {'yes' if p.required else 'no'} | {_cell(help_text)} |")
        out.append("")
    if opts:
        out += ["| option | value | default | description |", "|---|---|---|---|"]
        for p in opts:
            names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            value = _value(p)
            out.append(f"| {names} | {f'`{value}`' if value else ''} | {_default(p)} | {_cell(p.help or '')} |")
        out.append("")
    return out


def render() -> str:
    import typer

    sys.path.insert(0, str(ROOT / "src"))
    from dtrain.cli import app

    group = typer.main.get_command(app)
    lines = [HEADER, *_section("dtrain", group, "##")]
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        lines += _section(f"dtrain {name}", command, "##")
        for sub in sorted(getattr(command, "commands", {}) or {}):
            lines += _section(f"dtrain {name} {sub}", command.commands[sub], "###")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not TARGET.is_file() or TARGET.read_text() != text:
            print(f"{TARGET} is out of date: run python tools/gen_cli_docs.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
