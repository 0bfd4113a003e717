"""CI summaries and annotations from a job whose output (or the service's error) tries to inject
Markdown, runner commands, escape bytes or leak secrets (docs/ci.md, Untrusted text)."""
from __future__ import annotations

import re

import pytest

from dtrain import ci, untrusted
from dtrain.backends.base import FailureInfo, JobInfo

# markdown-it-py comes with rich; rendering the summary is what tells whether anything escaped
markdown_it = pytest.importorskip("markdown_it")

TOKEN = "opaque-token-0123456789"
SAS = "https://acct.blob.core.windows.net/logs/std.txt?sv=2021&sr=b&sig=S3cr3tSig%2Babc%3D"
KEY = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=QUNDT1VOVEtFWQ==;EndpointSuffix=core.windows.net"
EVIL_LINES = [
    "```",
    "# Owned heading",
    "![x](http://evil.example/pixel.png)",
    "| a | b |",
    "|---|---|",
    "| 1 | 2 |",
    "<img src=http://evil.example/html.png>",
    "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ \x1b[2J\x07",
    "::add-mask::X",
    "##vso[task.setvariable variable=EVIL]pwned",
    f"Bearer {TOKEN} {SAS} {KEY}",
]


@pytest.fixture(autouse=True)
def _token_in_use():
    untrusted.forget_secrets()
    untrusted.remember_secret(TOKEN)
    yield
    untrusted.forget_secrets()


def failed_job(name="train-1", lines=EVIL_LINES, message="Traceback follows **bold**"):
    return JobInfo(name=name, backend="azureml", status="Failed", nodes=2, processes_per_node=8,
                   url="https://ml.azure.com/runs/train-1?x=(1)", started="2026-01-01T00:00:00Z",
                   failure=FailureInfo(message=message, rank=0, exit_code=1, last_lines=list(lines)))


def render(md: str) -> str:
    return markdown_it.MarkdownIt("commonmark").enable("table").render(md)


def assert_no_secret(text: str):
    for secret in (TOKEN, "S3cr3tSig", "QUNDT1VOVEtFWQ"):
        assert secret not in text


def test_a_log_line_of_backticks_cannot_close_the_summarys_code_block():
    md = ci.summary_markdown([failed_job()])
    html = render(md)
    # ours: the heading and the jobs table; theirs would add a heading, a table and images
    assert re.findall(r"<h\d>", html) == ["<h3>"]
    assert html.count("<table>") == 1
    assert "<img" not in html and 'href="http://evil.example' not in html
    # every evil line is inside the one code block, as text
    code = re.findall(r"<pre><code>(.*?)</code></pre>", html, re.S)
    assert len(code) == 1
    for line in ("```", "# Owned heading", "![x](http://evil.example/pixel.png)", "| a | b |"):
        assert line in code[0]


def test_the_fence_is_longer_than_any_run_of_backticks_in_the_text():
    md = ci.summary_markdown([failed_job(lines=["````````", "# after"])])
    fences = [line for line in md.splitlines() if re.fullmatch(r"`{3,}", line)]
    assert fences[0] == "`" * 9 and fences[-1] == "`" * 9
    assert "<h1>" not in render(md)


def test_no_escape_bytes_and_no_secret_land_in_the_summary():
    md = ci.summary_markdown([failed_job()])
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", md)
    assert "evil.example\\" not in md and "]8;;" not in md         # whole sequences gone, not just ESC
    assert_no_secret(md)
    assert "Bearer ***" in md and "sig=***" in md and "AccountKey=***" in md


def test_table_cells_from_a_job_render_as_text():
    info = failed_job(name="a|b")
    info.failure = None
    info.status = "Failed ![x](http://evil.example/s.png)"
    md = ci.summary_markdown([info], metrics={"a|b": {"![m](http://evil.example/m.png) | x": _Point()}},
                             columns={"a|b": {"inputs.lr": "[click](http://evil.example)"}})
    html = render(md)
    assert "<img" not in html and "evil.example\"" not in html and "<a href=\"http://evil" not in html
    # the jobs table keeps its columns: the job's name and values did not split a row
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", html, re.S) if "a|b" in r)
    assert row.count("<td>") == 6
    assert 'href="https://ml.azure.com/runs/train-1?x=%281%29"' in html


class _Point:
    value, step = 0.5, 3


def test_github_error_annotation_is_one_command_redacted_without_control_bytes(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    ci.report([failed_job(name="x::y,z")])
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("::error title=")
    head, _, data = err[0][2:].partition("::")
    assert head == "error title=x%3A%3Ay%2Cz%3A Failed%3A rank 0 exited 1"   # ':' and ',' escaped in the title
    assert "\x1b" not in err[0] and "\x07" not in err[0]
    assert "%0A::add-mask::X%0A" in data             # data: a line of it cannot start a command
    assert_no_secret(err[0])
    assert_no_secret((tmp_path / "summary.md").read_text())


def test_azure_pipelines_logissue_neutralizes_vso_and_redacts(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("TF_BUILD", "True")
    monkeypatch.setenv("AGENT_TEMPDIRECTORY", str(tmp_path))
    ci.report([failed_job()])
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[1].startswith("##vso[task.uploadsummary]")
    issue = err[:1]
    assert issue[0].startswith("##vso[task.logissue type=error]")
    assert issue[0].lower().count("##vso[") == 1                     # only dtrain's own command
    assert "\x1b" not in issue[0]
    assert_no_secret(issue[0])
    assert_no_secret((tmp_path / "dtrain-summary.md").read_text())
