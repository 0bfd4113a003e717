"""Local datastore folders: a datastore name Azure would refuse, or a path with `..`, can never reach
outside $DTRAIN_HOME/datastores/<name> (it once let a job write into another job's folder)."""
import pytest

from dtrain.backends.base import SubmitOptions
from dtrain.backends.local import LocalBackend
from dtrain.backends.local.store import datastore_path
from dtrain.errors import UsageError
from dtrain.spec.validate import load_spec

BAD = [
    "azureml://datastores/../paths/jobs/victim/outputs",
    "azureml://datastores/./paths/x",
    "azureml://datastores/.hidden/paths/x",
    "azureml://datastores/a b/paths/x",
    "azureml://datastores/blob/paths/../../jobs/victim",
    "azureml://datastores/blob/paths/runs/../../../x",
    "azureml://datastores/blob/paths/..",
]


@pytest.mark.parametrize("uri", BAD)
def test_escaping_names_and_paths_are_refused(tmp_path, uri):
    with pytest.raises(UsageError):
        datastore_path(uri, tmp_path)


def test_symlink_inside_a_store_cannot_lead_out(tmp_path):
    (tmp_path / "datastores" / "blob").mkdir(parents=True)
    (tmp_path / "datastores" / "blob" / "out").symlink_to(tmp_path)
    with pytest.raises(UsageError, match="outside"):
        datastore_path("azureml://datastores/blob/paths/out/jobs", tmp_path)


@pytest.mark.parametrize("uri,rel", [
    ("azureml://datastores/blob/paths/runs/ckpt", "blob/runs/ckpt"),
    ("azureml://datastores/workspaceblobstore/paths/a/b/", "workspaceblobstore/a/b"),
    ("azureml://datastores/my-store_2/paths/x..y/.z", "my-store_2/x..y/.z"),
])
def test_ordinary_paths_still_map(tmp_path, uri, rel):
    assert datastore_path(uri, tmp_path) == (tmp_path / "datastores" / rel).resolve()


def test_submit_with_a_dotdot_datastore_exits_2_and_writes_nothing(cli, tmp_path):
    (tmp_path / "job.yml").write_text(
        "command: echo x > ${{outputs.o}}/f\nenvironment: azureml:x:1\ncompute: local\n"
        "outputs:\n  o: {type: uri_folder, path: 'azureml://datastores/../paths/jobs/victim'}\n")
    home = tmp_path / "home"
    r = cli("submit", tmp_path / "job.yml", env={"DTRAIN_HOME": str(home)})
    assert r.returncode == 2, r.stderr
    assert "not a datastore name" in r.stderr
    assert not (home / "jobs").exists() or not any((home / "jobs").iterdir())


def test_plan_refuses_an_input_with_dotdot(tmp_path):
    (tmp_path / "job.yml").write_text(
        "command: ls ${{inputs.i}}\nenvironment: azureml:x:1\n"
        "inputs:\n  i: {type: uri_folder, path: 'azureml://datastores/blob/paths/../../jobs'}\n")
    spec, _ = load_spec(tmp_path / "job.yml")
    with pytest.raises(UsageError, match=r"'\.\.'"):
        LocalBackend(tmp_path / "home").plan(spec, SubmitOptions(name="j"))
