"""Text from a job or the service leaves dtrain one way (output.py): whatever the command, no secret is
printed, in CI no line starts a runner command, and a job's lines to a pipe stay byte-exact. Through the
real command line in process, over a fake backend whose job and failure carry hostile text."""
from __future__ import annotations

import re

import pytest

from dtrain.backends.base import FailureInfo
from dtrain.cli import main

SPEC = "command: python train.py\nenvironment: azureml:env@latest\ncompute: local\n"
TOKEN = "opaque-token-0123456789abcdef"        # a token in use: registered, whatever it looks like
SECRETS = ["Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "sig=AbCdEf0123456789%2Bxyz",
           "AccountKey=c2VjcmV0a2V5c2VjcmV0a2V5c2VjcmV0a2V5", TOKEN]
HOSTILE = ["::add-mask::X", "  ::set-output name=a::b", "##vso[task.setvariable variable=EVIL]pwned",
           "title \x1b]0;pwned\x07 link \x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ \x1b[2J end"]


@pytest.fixture
def hostile(fake_backend, tmp_path):
    from dtrain.untrusted import remember_secret

    remember_secret(TOKEN)
    (tmp_path / "job.yml").write_text(SPEC)
    fake_backend.scripts["h"] = ["Queued", "Running", "Failed"]
    fake_backend.lines["h"] = HOSTILE + [f"leaked {s}" for s in SECRETS]
    fake_backend.failures["h"] = FailureInfo(message="\n".join(HOSTILE + SECRETS), rank=0,
                                             last_lines=HOSTILE + SECRETS)
    return str(tmp_path / "job.yml")


COMMANDS = [["submit", "{spec}", "--local", "--name", "h", "--wait"], ["status", "h"], ["logs", "h"],
            ["list"], ["wait", "h"], ["watch", "--once", "--local"], ["status", "h", "-o", "json"]]


@pytest.mark.parametrize("ci", ["GITHUB_ACTIONS=true", "TF_BUILD=True", None])
def test_no_command_prints_a_secret_or_a_runner_command(hostile, capsys, monkeypatch, ci):
    if ci:
        k, v = ci.split("=")
        monkeypatch.setenv(k, v)
        monkeypatch.setenv("GITHUB_STEP_SUMMARY" if k == "GITHUB_ACTIONS" else "AGENT_TEMPDIRECTORY",
                           str(hostile.rsplit("/", 1)[0] + ("/summary.md" if k == "GITHUB_ACTIONS" else "")))
    for argv in COMMANDS:
        main([a.format(spec=hostile) for a in argv])
        out, err = capsys.readouterr()
        text = out + err
        if ci is None:       # a job's own lines go to a pipe byte-exact (the next test); the rest is checked
            text = "\n".join(line for line in text.splitlines() if not line.startswith("n0/r0 | "))
        for s in SECRETS:
            assert s.split("=", 1)[-1].split(" ", 1)[-1] not in text, (argv, s)
        if ci:                # dtrain's own commands (the failure's annotation, the summary) carry none inside
            own = re.compile(r"^##vso\[task\.(logissue type=error|uploadsummary)\]")
            rest = [own.sub("", line) for line in text.splitlines()]
            assert not [r for r in rest if "##vso[" in r.lower() or "##[" in r], argv
        if ci == "GITHUB_ACTIONS=true":
            starts = [line for line in text.splitlines() if line.lstrip().startswith("::")
                      and not re.match(r"::(error|warning|notice)\b", line)]
            assert not starts, (argv, starts)


def test_a_jobs_lines_to_a_pipe_are_byte_exact_outside_ci(hostile, capsys):
    main(["submit", hostile, "--local", "--name", "h"])
    capsys.readouterr()
    main(["logs", "h"])
    out = capsys.readouterr().out
    assert [line.split(" | ", 1)[1] for line in out.splitlines()][:len(HOSTILE)] == HOSTILE


def test_on_a_terminal_escapes_are_shown_not_obeyed(hostile, capsys, monkeypatch):
    import sys

    main(["submit", hostile, "--local", "--name", "h"])
    capsys.readouterr()
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    main(["logs", "h"])
    main(["status", "h"])
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "^[]8;;" in out and "^[]8;;" in err
