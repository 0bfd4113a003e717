"""`dtrain validate` in CI: GitHub and Azure Pipelines annotations with file, line and column, escaped as
each CI requires, on stderr only (stdout carries JSON)."""
import json

import pytest

from dtrain.ci import azure_pipelines_annotation, github_annotation
from dtrain.spec.diagnostics import Diagnostic

BAD = ("command: python train.py\nenvironment: azureml:env:1\n"
       "distribution:\n  type: pytorch\n  proces_count_per_instance: 2\n")
NO_CI = {"GITHUB_ACTIONS": "", "TF_BUILD": "", "GITHUB_WORKSPACE": ""}


def test_github_annotations_point_at_file_line_column(cli, write, tmp_path):
    p = write("specs/job.yml", BAD)
    r = cli("validate", "-o", "json", "specs/job.yml", cwd=tmp_path,
            env={**NO_CI, "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)})
    assert r.returncode == 2
    json.loads(r.stdout)  # stdout is only the JSON
    (ann,) = [l for l in r.stderr.splitlines() if l.startswith("::error")]
    assert ann.startswith("::error file=specs/job.yml,line=5,col=3,title=dtrain unknown-key::")
    assert "unknown key 'proces_count_per_instance'" in ann and "%0Ahint: did you mean" in ann
    assert p.is_file()


def test_azure_pipelines_annotations(cli, write, tmp_path):
    write("job.yml", BAD)
    r = cli("validate", "job.yml", cwd=tmp_path, env={**NO_CI, "TF_BUILD": "True"})
    assert r.returncode == 2 and "##vso" not in r.stdout
    (ann,) = [l for l in r.stderr.splitlines() if l.startswith("##vso[task.logissue")]
    assert ann.startswith("##vso[task.logissue type=error;sourcepath=job.yml;linenumber=5;columnnumber=3;"
                          "code=unknown-key]unknown key 'proces_count_per_instance'")


def test_no_annotations_outside_ci(cli, write, tmp_path):
    write("job.yml", BAD)
    r = cli("validate", "job.yml", cwd=tmp_path, env=NO_CI)
    assert "::error" not in r.stderr and "##vso" not in r.stderr


def _diag(**kw):
    base = dict(severity="error", message="m", path=(), file="a.yml", line=1, column=2, hint=None, code="c")
    base.update(kw)
    return Diagnostic(**base)


@pytest.mark.parametrize("file,message", [
    ("dir,x/a:b.yml", "100% wrong\r\nsecond: line, with comma"),
    ("we;ird]/a.yml", "a;b]c%d\ne"),
])
def test_properties_and_data_are_escaped_per_ci(file, message):
    d = _diag(file=file, message=message, code="x:y,z")
    gh = github_annotation(d)
    head, _, data = gh[2:].partition("::")
    assert "\n" not in gh and "\r" not in gh
    # properties: the separators ':' and ',' of GitHub's syntax never appear unescaped inside a value
    props = dict(p.split("=", 1) for p in head.split(" ", 1)[1].split(","))
    assert set(props) == {"file", "line", "col", "title"}
    def unescape(s):
        return s.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")
    assert unescape(props["file"]) == file and unescape(props["title"]) == "dtrain x:y,z"
    assert unescape(data) == message
    vso = azure_pipelines_annotation(d)
    assert "\n" not in vso and "\r" not in vso
    body = vso[len("##vso[task.logissue "):]
    props_part, _, data = body.partition("]")
    vprops = dict(p.split("=", 1) for p in props_part.split(";"))
    def unv(s):
        return s.replace("%3B", ";").replace("%5D", "]").replace("%0D", "\r").replace("%0A", "\n").replace("%AZP25", "%")
    assert unv(vprops["sourcepath"]) == file and vprops["linenumber"] == "1" and vprops["columnnumber"] == "2"
    assert unv(data) == message


def test_a_set_value_is_annotated_without_a_file():
    d = _diag(file="--set resources.instance_count=x", line=None, column=None)
    assert github_annotation(d).startswith("::error title=dtrain c::")
    assert "sourcepath" not in azure_pipelines_annotation(d)
