"""untrusted.py: secrets redacted, terminal control shown instead of obeyed, CI runner commands
neutralized, per destination (docs/monitoring.md, Untrusted text)."""
from __future__ import annotations

import re

import pytest

from dtrain import untrusted as u

TOKEN = "opaque-token-0123456789"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4IiwiZXhwIjo5OTk5OTk5OTk5fQ.c2lnbmF0dXJl"


@pytest.fixture(autouse=True)
def _empty_registry():
    u.forget_secrets()
    yield
    u.forget_secrets()


def test_a_remembered_token_is_masked_wherever_it_appears():
    u.remember_secret(TOKEN)
    assert u.redact(f"the service said: token {TOKEN} is invalid ({TOKEN})") == \
        "the service said: token *** is invalid (***)"


def test_short_values_are_not_remembered():
    u.remember_secret("job-1")      # would mask every mention of a job name
    u.remember_secret(None)
    assert u.redact("job-1 failed") == "job-1 failed"


@pytest.mark.parametrize("text,expected", [
    (f"Authorization: Bearer {TOKEN}", "Authorization: Bearer ***"),
    (f"authorization: bearer {JWT}", "authorization: bearer ***"),
    ("https://acct.blob.core.windows.net/c/b.txt?sv=2021-08-06&se=2030&sig=AbC%2Bdef%3D&sp=r",
     "https://acct.blob.core.windows.net/c/b.txt?sv=2021-08-06&se=2030&sig=***&sp=r"),
    ("next%3Fsv%3D1%26sig%3DAb%2BC%3D%26se%3D2", "next%3Fsv%3D1%26sig%3D***%26se%3D2"),
    ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=k3y+/abc==;EndpointSuffix=core.windows.net",
     "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=***;EndpointSuffix=core.windows.net"),
    ("Endpoint=sb://ns/;SharedAccessKeyName=Root;SharedAccessKey=k3y+abc==",
     "Endpoint=sb://ns/;SharedAccessKeyName=Root;SharedAccessKey=***"),
    ("SharedAccessSignature sr=ns&sig=QQQQ&se=1&skn=Root", "SharedAccessSignature sr=ns&sig=***&se=1&skn=Root"),
    ("BlobEndpoint=https://a;SharedAccessSignature=sv=2020&sig=zzz", "BlobEndpoint=https://a;SharedAccessSignature=***&sig=***"),
    ('{"client_secret": "s3cret-value", "db_password":"pw"}', '{"client_secret": "***", "db_password":"***"}'),
    ("Server=db;User Id=u;Password=hunter22;", "Server=db;User Id=u;Password=***;"),
    (f"AADSTS70021: no match for assertion {JWT}.", "AADSTS70021: no match for assertion ***."),
])
def test_secret_looking_values_are_masked_and_their_key_kept(text, expected):
    assert u.redact(text) == expected


@pytest.mark.parametrize("text", [
    "signal 9 received; signature verified",
    'WWW-Authenticate: Bearer authorization_uri="https://login.example", error="invalid_token"',
    "epoch 3 loss=0.25 lr=1e-4",
])
def test_ordinary_text_is_left_alone(text):
    assert u.redact(text) == text


def test_a_debug_traceback_is_redacted_with_its_causes():
    try:
        try:
            raise ValueError(f"sent Bearer {TOKEN}")
        except ValueError as inner:
            raise RuntimeError("AccountKey=abcdefgh123") from inner
    except RuntimeError as exc:
        text = u.redact_traceback(exc)
    assert "ValueError" in text and "RuntimeError" in text
    assert TOKEN not in text and "abcdefgh123" not in text


# --- terminal --------------------------------------------------------------------------------------

def test_controls_are_shown_as_cat_v_does_and_cannot_act():
    text = "a\x1b]0;owned\x07b\x1b[2J\x1b[Hc\rd\x9b31m\x00\x7f\te"
    shown = u.for_terminal(text)
    assert shown == "a^[]0;owned^Gb^[[2J^[[Hc^MdM-^[31m^@^?\te"
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", shown)


def test_bidi_overrides_are_shown_by_code_point():
    assert u.for_terminal("abc\u202edef") == "abc<U+202E>def"


def test_plain_text_is_returned_unchanged():
    s = "n0/r1 | epoch 1 loss 0.5 ✓ 日本"
    assert u.for_terminal(s) is s


def test_cutting_an_osc8_link_never_leaves_a_sequence_open_or_half_shown():
    link = "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ and more text"
    for width in range(1, 40):
        cut = u.cut_for_terminal(link, width)
        assert "\x1b" not in cut and len(cut) <= width
        assert not cut.rstrip("…").endswith("^"), cut      # `^[` kept or dropped whole
    assert u.cut_for_terminal("short", 10) == "short"
    assert u.cut_for_terminal("日本語テキスト", 5) == "日本…"


def test_strip_controls_removes_whole_sequences():
    assert u.strip_controls("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \x1b[31mred\x1b[0m\x07\r\n") == "alink red\n"


# --- CI --------------------------------------------------------------------------------------------

def test_ci_kind_is_read_from_the_runner_variables():
    assert u.ci_kind({"GITHUB_ACTIONS": "true"}) == u.GITHUB
    assert u.ci_kind({"TF_BUILD": "True"}) == u.AZURE_PIPELINES
    assert u.ci_kind({"GITHUB_ACTIONS": "false"}) is None and not u.in_ci({})


EVIL = ["::add-mask::X", "    ::add-mask::X", "\t::error::x", "##vso[task.setvariable variable=EVIL]pwned",
        "n0/r0 | ##vso[task.setvariable variable=EVIL]pwned", "##[group]x", "n0/r0 | ##[add-mask]X",
        "progress 50%\r::add-mask::X", "ok\n  ::stop-commands::abc"]


def _github_reads_a_command(line: str) -> bool:
    # the runner splits on CR and LF, trims, then looks for `::` (v2) or `##[` (v1, anywhere)
    return any(part.strip().startswith("::") or "##[" in part for part in re.split(r"\r\n|\r|\n", line))


@pytest.mark.parametrize("line", EVIL)
def test_no_runner_command_survives_outside_a_block(line):
    gh = u.safe_line(line, tty=False, ci=u.GITHUB)
    assert not _github_reads_a_command(gh), gh
    azp = u.safe_line(line, tty=False, ci=u.AZURE_PIPELINES)
    assert "##vso[" not in azp.lower() and "##[" not in azp


def test_the_neutralized_line_still_reads_as_written():
    assert u.neutralize_commands("  ::add-mask::X", u.GITHUB) == "  \\::add-mask::X"
    assert u.neutralize_commands("a ##VSO[x]", u.AZURE_PIPELINES) == "a #\\#VSO[x]"


def test_inside_a_stop_commands_block_lines_stay_exact_and_the_block_closes():
    written: list[str] = []
    with u.github_stop_commands(written.append, u.GITHUB) as in_block:
        assert in_block
        written.append(u.safe_line("::add-mask::X", tty=False, ci=u.GITHUB, job_output=True, in_block=True))
    start, line, end = written
    token = start.removeprefix("::stop-commands::")
    assert len(token) >= 32 and line == "::add-mask::X" and end == f"::{token}::"
    with u.github_stop_commands(written.append, u.GITHUB) as _:
        pass
    assert written[3] != start     # a fresh token each time: a job cannot guess it


def test_no_block_outside_github():
    written: list[str] = []
    with u.github_stop_commands(written.append, u.AZURE_PIPELINES) as in_block:
        assert not in_block
    assert written == []


# --- the entry point --------------------------------------------------------------------------------

def test_a_jobs_log_line_to_a_pipe_outside_ci_is_byte_exact():
    line = f"\x1b[31mBearer {TOKEN}\r::add-mask::X ##vso[x]"
    u.remember_secret(TOKEN)
    assert u.safe_line(line, tty=False, ci=None, job_output=True) is line
    # the same line from the service is redacted even to a pipe
    assert u.safe_line(line, tty=False, ci=None) == "\x1b[31mBearer ***\r::add-mask::X ##vso[x]"


def test_on_a_terminal_a_line_is_redacted_and_escaped():
    u.remember_secret(TOKEN)
    assert u.safe_line(f"\x1b]0;t\x07{TOKEN}\r", tty=True, ci=None, job_output=True) == "^[]0;t^G***^M"


def test_in_ci_a_line_is_redacted_and_neutralized():
    u.remember_secret(TOKEN)
    assert u.safe_line(f"::add-mask::{TOKEN}", tty=False, ci=u.GITHUB, job_output=True) == "\\::add-mask::***"


def test_destination_reads_the_stream_once():
    class Tty:
        def isatty(self):
            return True

    d = u.Destination.of(Tty(), env={"TF_BUILD": "True"})
    assert (d.tty, d.ci) == (True, u.AZURE_PIPELINES)
    assert d.safe("\x1b[2J##vso[x]") == "^[[2J#\\#vso[x]"
    assert u.Destination.of(object(), env={}).tty is False
