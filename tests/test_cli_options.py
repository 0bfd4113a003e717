"""One name for one idea: every command's options, read from the command tree itself, agree where they
are shared (the same flag, the same short form, the same kind of value)."""
from __future__ import annotations

import typer.main

from dtrain.cli import app

# flag -> its short form (None: none), for every command that has it
SHARED = {"--output": "-o", "--subscription": None, "--resource-group": "-g", "--workspace": "-w",
          "--local": None, "--timeout": None, "--tag": None, "--set": None, "--input": None, "--name": None,
          "--experiment": None, "--max-parallel": None, "--allow": None, "--follow": "-f", "--interval": None,
          "--key": "-k", "--quiet": "-q", "--rank": None, "--metric": None, "--dry-run": None, "--wait": None}


def options():
    cmd = typer.main.get_command(app)
    for name, sub in cmd.commands.items():
        for p in sub.params:
            if p.param_type_name == "option":
                yield name, p


def test_shared_options_have_one_form_everywhere():
    seen: dict = {}
    for command, p in options():
        longs = [o for o in p.opts if o.startswith("--")]
        shorts = [o for o in p.opts if not o.startswith("--")]
        for flag in longs:
            if flag in SHARED:
                assert shorts == ([SHARED[flag]] if SHARED[flag] else []), (command, flag, p.opts)
                kind = (p.is_flag, p.multiple, p.type.name)
                seen.setdefault(flag, {})[command] = kind
    for flag, kinds in seen.items():
        assert len(set(kinds.values())) == 1, (flag, kinds)


def test_commands_that_act_on_azure_all_take_the_workspace_flags():
    by_command: dict = {}
    for command, p in options():
        by_command.setdefault(command, set()).update(p.opts)
    for command in ("submit", "scale", "status", "logs", "metrics", "list", "cancel", "wait", "watch", "config"):
        assert {"--subscription", "--resource-group", "--workspace"} <= by_command[command], command
    for command in ("submit", "scale", "render"):
        assert "--input" in by_command[command], command        # local stand-ins for remote inputs
    assert "-o" in by_command["render"] and "--format" in by_command["render"]
