"""Ignore files with azure-ai-ml's semantics: every case is checked against the SDK's own IgnoreFile
(get_ignore_file / is_file_excluded), its upload file list and its content hash."""
import os
import re
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtrain.codefiles import code_files
from dtrain.errors import UsageError
from dtrain.ignorefile import IgnoreRules
from dtrain.backends.azure.rest import job_body, object_hash
from dtrain.spec.validate import load_spec

warnings.simplefilter("ignore", DeprecationWarning)
# generated bracket expressions such as "[[ab]" make re warn about nested sets, in the SDK as here
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")
from azure.ai.ml._utils import _asset_utils as sdk  # noqa: E402


def _sdk_excluded(root: Path, rel: str):
    try:
        return sdk.get_ignore_file(root).is_file_excluded(root / rel)
    except (ValueError, re.error):   # an invalid pattern: the SDK fails the upload on it
        return "error"


def _ours_excluded(root: Path, rel: str):
    try:
        rules = IgnoreRules.for_folder(root)
    except UsageError:
        return "error"
    return rules.excluded(root / rel)


def _write_ignore(root: Path, lines, name=".amlignore"):
    root.mkdir(parents=True, exist_ok=True)
    for n in (".amlignore", ".gitignore"):
        (root / n).unlink(missing_ok=True)
    (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


CASES = [
    # negation after an excluded folder: Azure re-includes (git would not)
    (["data/", "!data/small.csv"], ["data/small.csv", "data/big.csv", "data", "x/data/small.csv"]),
    (["build/", "!build/keep"], ["build/keep", "build/out.o", "build", "src/build/keep"]),
    (["*.log", "!keep.log"], ["a.log", "keep.log", "sub/keep.log", "sub/a.log"]),
    (["!keep.log", "*.log"], ["keep.log"]),
    # anchoring
    (["/build"], ["build", "build/x", "src/build", "src/build/x"]),
    (["foo/bar"], ["foo/bar", "x/foo/bar", "foo/bar/baz"]),
    (["/a/b/"], ["a/b/c", "a/b", "x/a/b/c"]),
    # ** forms
    (["**/tmp"], ["tmp", "a/b/tmp", "a/tmp/x"]),
    (["docs/**"], ["docs", "docs/a/b.md"]),
    (["a/**/z"], ["a/z", "a/b/c/z", "b/a/z"]),
    (["**"], ["x", "a/b"]),
    (["**/"], ["x", "a/b"]),
    (["*/"], ["x", "a/b"]),
    (["**/**/x"], ["x", "a/x"]),
    (["/**/"], ["x", "a/a", "a/b/c"]),         # nothing, in the SDK's vendored pathspec (hypothesis found it)
    (["*", "!/**/**/"], ["x", "a/a"]),
    # trailing slash: matches what is inside a folder, never the name itself
    (["logs/"], ["logs", "logs/a.txt", "a/logs/b"]),
    # globs, classes
    (["ch?.txt", "[ab].py", "[!c]x", "[^a]y", "[]]z"], ["ch1.txt", "b.py", "c.py", "dx", "cx", "^y", "by",
                                                         "]z"]),
    (["[unclosed"], ["[unclosed", "u"]),
    (["[z-a]"], ["b"]),
    # comments, blanks, escapes, spaces
    (["# comment", "", "   ", "\\#hash", "\\!bang"], ["#hash", "!bang", "# comment"]),
    (["  lead", "trail   ", "\\*star"], ["lead", "trail", "*star", "xstar"]),
    (["escaped\\ "], ["escaped ", "escaped"]),
    (["bad\\"], ["bad"]),
    (["!/", "/"], ["a"]),
    (["!"], ["a", "!"]),
    (["a b", "c\\ d"], ["a b", "c d"]),
]


@pytest.mark.parametrize("lines,paths", CASES, ids=[" | ".join(c[0]) for c in CASES])
def test_patterns_match_the_sdk(tmp_path, lines, paths):
    _write_ignore(tmp_path, lines)
    for rel in paths:
        assert _ours_excluded(tmp_path, rel) == _sdk_excluded(tmp_path, rel), rel


_TOKENS = ["a", "b", "data", "*", "**", "?", "[ab]", "[!a]", "[^a]", "/", "\\", "\\ ", " ", "!", "#",
           "x.py", "[", "]", "-", ".", "\\*", "\\!", "\\#", "é"]
_NAMES = ["a", "b", "data", "x.py", "b.txt", "#a", "!a", "a b", "^", "[", "é", "-"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=5).map("".join),
                      min_size=1, max_size=4),
       paths=st.lists(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4).map("/".join),
                      min_size=1, max_size=6),
       name=st.sampled_from([".amlignore", ".gitignore"]))
def test_generated_patterns_match_the_sdk(tmp_path, lines, paths, name):
    root = tmp_path / "gen"
    _write_ignore(root, lines, name=name)
    for rel in paths:
        assert _ours_excluded(root, rel) == _sdk_excluded(root, rel), (lines, rel)


def test_amlignore_wins_over_gitignore_and_only_the_root_one_counts(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / ".gitignore").write_text("*.py\n")
    (tmp_path / "sub" / ".amlignore").write_text("*.txt\n")
    assert IgnoreRules.for_folder(tmp_path).excluded(tmp_path / "a.py")
    assert not IgnoreRules.for_folder(tmp_path).excluded(tmp_path / "sub" / "a.txt")
    (tmp_path / ".amlignore").write_text("*.txt\n")
    rules = IgnoreRules.for_folder(tmp_path)
    assert rules.source.name == ".amlignore"
    assert not rules.excluded(tmp_path / "a.py") and rules.excluded(tmp_path / "sub" / "a.txt")


def test_an_invalid_pattern_is_an_error_naming_the_line(tmp_path):
    (tmp_path / ".amlignore").write_text("*.log\nfoo\\ \n")
    with pytest.raises(UsageError) as e:
        IgnoreRules.for_folder(tmp_path)
    assert ".amlignore:2" in e.value.message


# --- whole trees: the upload list and the content hash ---------------------------------------------------

def _tree(root: Path, files):
    for f in files:
        p = root / f
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"content of {f}")


def _sdk_upload_list(root: Path):
    files = sdk.get_upload_files_from_folder(root, ignore_file=sdk.get_ignore_file(root))
    return sorted(dest for _, dest in files)


def _our_upload_list(root: Path):
    return sorted(f.dest for f in code_files(root).files)


TREE = ["train.py", "a.log", "keep.log", "data/small.csv", "data/big.csv", "data/sub/x.csv",
        "build/keep", "build/out.o", "src/build/keep", "logs/l.txt", "pkg/__init__.py", "pkg/cache/c.pyc",
        "docs/a/b.md", "sp ace/f", "#h", "!b"]
IGNORES = [
    ["data/", "!data/small.csv"],
    ["build/", "!build/keep"],
    ["*.log", "!keep.log", "/build", "**/cache", "docs/**"],
    ["*", "!*.py", "!*/"],
    ["data", "!data/sub/x.csv"],
    ["# just a comment"],
    ["**/", "!pkg/**"],
    ["\\#h", "\\!b", "sp ace/"],
    ["/*", "!/src"],
]


@pytest.mark.parametrize("lines", IGNORES, ids=[" | ".join(x) for x in IGNORES])
def test_upload_list_and_content_hash_match_the_sdk(tmp_path, lines):
    root = tmp_path / "code"
    _tree(root, TREE)
    _write_ignore(root, lines)
    assert _our_upload_list(root) == _sdk_upload_list(root)
    assert object_hash(root) == sdk.get_object_hash(root, sdk.get_ignore_file(root))


def test_symlinked_folders_and_files_upload_as_the_sdk_uploads_them(tmp_path):
    root = tmp_path / "code"
    _tree(root, ["train.py", "real/a.txt", "real/b.log"])
    _tree(tmp_path / "outside", ["o.txt", "o.log"])
    os.symlink(tmp_path / "outside", root / "linked")
    os.symlink("real", root / "alias")
    os.symlink("train.py", root / "train_link.py")
    _write_ignore(root, ["*.log", "linked/o.txt"])   # the SDK matches linked/o.txt at its real path: kept
    assert _our_upload_list(root) == _sdk_upload_list(root)
    assert "linked/o.txt" in _our_upload_list(root) and "alias/a.txt" in _our_upload_list(root)
    assert object_hash(root) == sdk.get_object_hash(root, sdk.get_ignore_file(root))


def test_environment_hash_with_a_negation_under_an_excluded_folder_equals_the_sdks(tmp_path):
    from sdk_reference import sdk_job_body

    ctx = tmp_path / "ctx"
    _tree(ctx, ["Dockerfile", "build/keep", "build/out.o", "app.py"])
    (ctx / ".amlignore").write_text("build/\n!build/keep\n")
    p = tmp_path / "job.yml"
    p.write_text("command: echo\nenvironment:\n  build:\n    path: ctx\n")
    spec, _ = load_spec(p)
    ours = job_body(spec)["environmentId"]
    assert ours == sdk_job_body(p)["environmentId"]
    # and the negation matters: without it the hash differs
    (ctx / ".amlignore").write_text("build/\n")
    spec, _ = load_spec(p)
    assert job_body(spec)["environmentId"] != ours
