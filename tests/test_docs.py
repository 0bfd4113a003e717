"""docs/ stays true to the code: every schema field and every exit code is documented."""
from pathlib import Path

from dtrain.exitcodes import ExitCode
from dtrain.spec.schema import field_rows

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_every_field_is_in_the_spec_reference():
    text = (DOCS / "spec.md").read_text()
    missing = [p for p, *_ in field_rows() if f"`{p}`" not in text]
    assert missing == []


def test_every_exit_code_is_documented():
    text = (DOCS / "exit-codes.md").read_text()
    for code in ExitCode:
        assert f"| {int(code)} |" in text, code


def test_ci_runs_the_readme_test_command():
    root = DOCS.parent
    readme = (root / "README.md").read_text()
    section = readme.split("## Tests", 1)[1]
    command = section.split("```sh", 1)[1].split("```", 1)[0].strip()
    ci = (root / ".ci" / "run").read_text()
    assert command in ci
