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


def test_readme_keeps_two_commands_at_the_top():
    readme = (DOCS.parent / "README.md").read_text()
    sections = [s.split("\n", 1)[0] for s in readme.split("\n## ")[1:]]
    assert sections[:2] == ["Quickstart", "Tests"]
    for name in ("Quickstart", "Tests"):
        body = readme.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        blocks = body.split("```sh\n")[1:]
        assert len(blocks) == 1 and blocks[0].split("```")[0].count("\n") == 1, name   # one command, one line


def test_readme_links_every_guide():
    readme = (DOCS.parent / "README.md").read_text()
    for page in ("install", "configuration", "migrating", "troubleshooting", "cli"):
        assert f"(docs/{page}.md)" in readme, page
        assert (DOCS / f"{page}.md").is_file(), page


def test_cli_reference_is_generated_from_the_commands():
    import runpy

    gen = runpy.run_path(str(DOCS.parent / "tools" / "gen_cli_docs.py"))
    assert (DOCS / "cli.md").read_text() == gen["render"](), "run: python tools/gen_cli_docs.py"


def test_every_variable_dtrain_reads_is_in_the_configuration_reference():
    import re

    src = DOCS.parent / "src" / "dtrain"
    code = "\n".join(p.read_text() for p in src.rglob("*.py"))
    names = set(re.findall(r"[\"'](DTRAIN_[A-Z0-9_]*[A-Z0-9])[\"']", code))
    names |= set(re.findall(r"(?:environ|env)(?:\.get)?\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']", code))
    names |= set(re.findall(r"environ\[[\"']([A-Z][A-Z0-9_]+)[\"']\]", code))
    assert {"DTRAIN_HOME", "DTRAIN_ARM_ENDPOINT", "GITHUB_ACTIONS"} <= names
    text = (DOCS / "configuration.md").read_text()
    assert sorted(n for n in names if f"`{n}`" not in text) == []
