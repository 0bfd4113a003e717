"""The CI summaries say why a job failed: the top cause (`dtrain why`) and its hint under the failure, in the
GitHub step summary and annotation and in the Azure Pipelines summary and logissue, with the job's words
escaped as everything from a job is (untrusted.py). In process, over the fake backend (tests/fakes.py)."""
from __future__ import annotations

import pytest

from fakes import run_main

SPEC = "command: python train.py\nenvironment: azureml:env@latest\ncompute: local\n"
LINES = ["Traceback (most recent call last):", '  File "train.py", line 1, in <module>',
         "ModuleNotFoundError: No module named 'not_a_package_`|[x](http://e.vil)'"]


@pytest.fixture
def failed(fake_backend, tmp_path):
    spec = tmp_path / "job.yml"
    spec.write_text(SPEC)
    fake_backend.scripts["bad"] = ["Queued", "Running", "Failed"]
    fake_backend.lines["bad"] = LINES
    return spec


def test_the_github_summary_and_annotation_say_why(failed, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    code, _, err = run_main(capsys, "submit", failed, "--local", "--wait", "--name", "bad", "-q")
    assert code == 1
    summary = (tmp_path / "summary.md").read_text()
    (why,) = [line for line in summary.splitlines() if line.startswith("why: ")]
    # the module's name is the job's text: escaped, so that no link or code span renders from it
    assert why == "why: `missing_module`: 'not_a_package\\_\\`\\|\\[x\\]\\(http://e.vil\\)' cannot be imported in " \
                  "the job's environment \\(rank 0\\)"
    assert "hint: add the package to the job" in summary
    assert "```\nrank 0:3: ModuleNotFoundError: No module named" in summary        # the evidence, fenced
    (annotation,) = [line for line in err.splitlines() if line.startswith("::error")]
    assert "why: missing_module: " in annotation and "%0Ahint: add the package" in annotation
    assert "bad: why: missing_module" in err                 # and on stderr, as without CI


def test_the_azure_pipelines_summary_and_issue_say_why(failed, monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("TF_BUILD", "True")
    monkeypatch.setenv("AGENT_TEMPDIRECTORY", str(tmp_path))
    code, _, err = run_main(capsys, "submit", failed, "--local", "--wait", "--name", "bad", "-q")
    assert code == 1
    assert "why: `missing_module`" in (tmp_path / "dtrain-summary.md").read_text()
    (issue,) = [line for line in err.splitlines() if line.startswith("##vso[task.logissue")]
    assert "why: missing_module" in issue and issue.lower().count("##vso[") == 1


def test_a_completed_job_has_no_why_in_the_summary(fake_backend, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    spec = tmp_path / "job.yml"
    spec.write_text(SPEC)
    assert run_main(capsys, "submit", spec, "--local", "--wait", "--name", "ok", "-q")[0] == 0
    assert "why:" not in (tmp_path / "summary.md").read_text()


def test_a_watch_in_ci_says_why_a_watched_job_failed(fake_backend, monkeypatch, tmp_path, capsys):
    from dtrain.backends.base import JobInfo

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    fake_backend.add(JobInfo(name="w", backend="local", status="Running"), then=["Running", "Failed"])
    fake_backend.lines["w"] = LINES
    code, _, _ = run_main(capsys, "watch", "w", "--interval", "0.01", "-o", "json", "--no-metrics")
    assert code == 1
    assert "why: `missing_module`" in (tmp_path / "summary.md").read_text()
