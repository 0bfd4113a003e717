"""Workspace discovery: config files exactly where and as MLClient.from_config finds them (checked against
the SDK itself on the same layouts), then AZUREML_ARM_* variables, then az's own defaults."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dtrain.backends.azure import workspace as wsmod

SCRUB = ("DTRAIN_", "AZURE_", "AZUREML_")


def ws_json(name, sub="sub-1", rg="rg-1") -> str:
    return json.dumps({"subscription_id": sub, "resource_group": rg, "workspace_name": name})


def scope_json(name, sub="sub-s", rg="rg-s") -> str:
    return json.dumps({"Scope": f"/subscriptions/{sub}/resourceGroups/{rg}/providers/"
                                f"Microsoft.MachineLearningServices/workspaces/{name}"})


def put(root: Path, rel: str, text: str, bom: bool = False) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())


# name -> (files relative to the layout root, the folder to start from)
LAYOUTS = {
    "parent .azureml beats the folder's config.json": (
        {"a/config.json": ws_json("folder"), ".azureml/config.json": ws_json("parent-azureml")}, "a"),
    "aml_config beats a plain config.json": (
        {"a/config.json": ws_json("plain"), "aml_config/config.json": ws_json("aml-config")}, "a"),
    "a far .azureml/config.json beats a near .azureml/project.json": (
        {"a/b/.azureml/project.json": ws_json("near-project"), ".azureml/config.json": ws_json("far-config")}, "a/b"),
    "project.json found": ({"a/project.json": ws_json("project")}, "a/b/c"),
    "aml_config/project.json beats config.json": (
        {"a/config.json": ws_json("plain"), "aml_config/project.json": ws_json("aml-project")}, "a"),
    "Scope form": ({".azureml/config.json": scope_json("scoped")}, "x/y"),
    "Scope wins over keys": (
        {"config.json": json.dumps({**json.loads(ws_json("keys")), **json.loads(scope_json("scope-wins"))})}, "."),
    "byte order mark": ({"config.json": ws_json("bom")}, "deep/er"),
    "plain config.json upward": ({"config.json": ws_json("up")}, "p/q/r/s"),
}


def _make(tmp_path, files, start, bom_all=False):
    root = tmp_path / "layout"
    for rel, text in files.items():
        put(root, rel, text, bom=bom_all or "bom" in text)
    start_dir = root / start
    start_dir.mkdir(parents=True, exist_ok=True)
    return start_dir


class _NoCredential:
    def get_token(self, *a, **k):  # pragma: no cover - from_config sends nothing
        raise AssertionError("no request expected")


def _sdk_pick(start: Path):
    from azure.ai.ml import MLClient

    c = MLClient.from_config(credential=_NoCredential(), path=str(start))
    return c.subscription_id, c.resource_group_name, c.workspace_name


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for k in list(os.environ):
        if k.startswith(SCRUB):
            monkeypatch.delenv(k)
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(tmp_path / "no-az"))
    return monkeypatch


@pytest.mark.parametrize("case", sorted(LAYOUTS))
def test_same_config_file_as_mlclient_from_config(case, tmp_path, clean_env):
    files, start = LAYOUTS[case]
    start_dir = _make(tmp_path, files, start, bom_all=(case == "byte order mark"))
    r = wsmod.resolution(start=start_dir, environ={})
    assert not r.missing, r.to_dict()
    assert tuple(r.values[p] for p in wsmod.PARTS) == _sdk_pick(start_dir)


_CANDIDATES = [f"{d}/{n}" if d else n for d in (".azureml", "aml_config", None)
               for n in ("config.json", "project.json")]


def test_generated_layouts_agree_with_mlclient_from_config(tmp_path, clean_env):
    """Random layouts (fixed seed): files of every name at several levels above the start folder, in
    both forms and sometimes not a workspace config at all; dtrain must read the file the SDK reads."""
    import random

    from azure.ai.ml.exceptions import ValidationException

    rng = random.Random(1123)
    for i in range(30):
        root = tmp_path / f"g{i}"
        start = root / "l1" / "l2" / "l3"
        start.mkdir(parents=True)
        for n in range(rng.randint(1, 4)):
            level = rng.randint(0, 3)
            folder = start.parents[level - 1] if level else start
            kind = rng.choice(["keys", "keys", "scope", "junk"])
            name = f"ws{i}-{n}"
            text = {"keys": ws_json(name), "scope": scope_json(name), "junk": json.dumps({"lr": 0.1})}[kind]
            put(folder, rng.choice(_CANDIDATES), text)
        r = wsmod.resolution(start=start, environ={})
        try:
            sdk = _sdk_pick(start)
        except ValidationException:
            sdk = None
        if sdk is None:
            assert r.config_problem and r.missing, (i, r.to_dict())
        else:
            assert tuple(r.values.get(p) for p in wsmod.PARTS) == sdk, (i, r.to_dict())


def test_symlinked_folder_walks_up_the_real_path(tmp_path, clean_env):
    # from_config looks in the start folder as given, then climbs through os.path.realpath.
    root = tmp_path / "layout"
    put(root, "real/config.json", ws_json("real-parent"))
    put(root, "links/config.json", ws_json("link-parent"))
    (root / "real" / "inner").mkdir()
    (root / "links" / "here").symlink_to(root / "real" / "inner")
    start = root / "links" / "here"
    r = wsmod.resolution(start=start, environ={})
    assert r.values["workspace_name"] == _sdk_pick(start)[2] == "real-parent"


def test_search_stops_after_twenty_parents_as_the_sdk_does(tmp_path, clean_env):
    root = tmp_path / "layout"
    put(root, ".azureml/config.json", ws_json("too-far"))
    near = root / "/".join(f"d{i}" for i in range(20))
    far = near / "d20"
    far.mkdir(parents=True)
    assert wsmod.find_config_file(near) == root / ".azureml" / "config.json"
    assert _sdk_pick(near)[2] == "too-far"
    assert wsmod.find_config_file(far) is None
    from azure.ai.ml.exceptions import ValidationException

    with pytest.raises(ValidationException):
        _sdk_pick(far)


def test_a_found_file_that_is_not_a_workspace_config_stops_the_search_as_in_the_sdk(tmp_path, clean_env):
    # The SDK reads the first file it finds and fails on it; dtrain does not read on past it either,
    # and says which file it ignored.
    start = _make(tmp_path, {"a/.azureml/config.json": json.dumps({"learning_rate": 0.1}),
                             "aml_config/config.json": ws_json("never-reached")}, "a")
    from azure.ai.ml.exceptions import ValidationException

    with pytest.raises(ValidationException):
        _sdk_pick(start)
    r = wsmod.resolution(start=start, environ={})
    assert r.missing == list(wsmod.PARTS)
    assert r.config_file == str(start / ".azureml" / "config.json")
    assert "subscription_id" in r.config_problem and "ignored" in r.found_text()


# --- after the config file: AZUREML_ARM_* and az defaults ---------------------------------------------

def az_dir(tmp_path, *, group=None, workspace=None, subs=(), bom=True) -> Path:
    d = tmp_path / "azure-config"
    d.mkdir(exist_ok=True)
    lines = ["[core]", "output = json", "", "[defaults]"]
    if group:
        lines.append(f"group = {group}")
    if workspace:
        lines.append(f"workspace = {workspace}")
    (d / "config").write_text("\n".join(lines) + "\n")
    profile = {"installationId": "x", "subscriptions": [
        {"id": sid, "name": f"name-{sid}", "state": "Enabled", "isDefault": default, "tenantId": "t",
         "environmentName": "AzureCloud", "user": {"name": "u@example.com", "type": "user"}}
        for sid, default in subs]}
    (d / "azureProfile.json").write_bytes((b"\xef\xbb\xbf" if bom else b"") + json.dumps(profile).encode())
    return d


def test_az_defaults_alone_give_a_workspace(tmp_path, clean_env):
    d = az_dir(tmp_path, group="rg-az", workspace="ws-az", subs=[("sub-other", False), ("sub-az", True)])
    r = wsmod.resolution(start=tmp_path, environ={"AZURE_CONFIG_DIR": str(d)})
    ws = r.workspace()
    assert (ws.subscription_id, ws.resource_group, ws.workspace_name) == ("sub-az", "rg-az", "ws-az")
    assert "azureProfile.json" in ws.sources["subscription_id"]
    assert "az configure default 'group'" in ws.sources["resource_group"]
    assert "az configure default 'workspace'" in ws.sources["workspace_name"]


def test_az_defaults_variables_override_the_file_as_az_does(tmp_path, clean_env):
    d = az_dir(tmp_path, group="rg-file", workspace="ws-file", subs=[("s", True)])
    r = wsmod.resolution(start=tmp_path, environ={"AZURE_CONFIG_DIR": str(d), "AZURE_DEFAULTS_GROUP": "rg-env"})
    assert r.values["resource_group"] == "rg-env" and r.sources["resource_group"] == "AZURE_DEFAULTS_GROUP"
    assert r.values["workspace_name"] == "ws-file"


def test_order_flags_env_config_arm_az(tmp_path, clean_env):
    d = az_dir(tmp_path, group="rg-az", workspace="ws-az", subs=[("sub-az", True)])
    arm = {"AZUREML_ARM_SUBSCRIPTION": "sub-arm", "AZUREML_ARM_RESOURCEGROUP": "rg-arm",
           "AZUREML_ARM_WORKSPACE_NAME": "ws-arm"}
    env = {"AZURE_CONFIG_DIR": str(d), **arm}
    empty = tmp_path / "empty"
    empty.mkdir()
    # AZUREML_ARM_* (inside an Azure ML job) before az defaults
    assert wsmod.resolution(start=empty, environ=env).values == {
        "subscription_id": "sub-arm", "resource_group": "rg-arm", "workspace_name": "ws-arm"}
    # a config file before AZUREML_ARM_*
    put(tmp_path, "proj/config.json", ws_json("ws-cfg", "sub-cfg", "rg-cfg"))
    r = wsmod.resolution(start=tmp_path / "proj", environ=env)
    assert r.values["workspace_name"] == "ws-cfg" and r.sources["workspace_name"].endswith("config.json")
    # variables before the file, flags before variables; the rest still from the file, part by part
    r = wsmod.resolution(workspace="ws-flag", start=tmp_path / "proj",
                         environ={**env, "DTRAIN_WORKSPACE": "ws-env", "DTRAIN_RESOURCE_GROUP": "rg-env"})
    assert r.values == {"subscription_id": "sub-cfg", "resource_group": "rg-env", "workspace_name": "ws-flag"}
    assert r.sources["workspace_name"] == "--workspace" and r.sources["resource_group"] == "DTRAIN_RESOURCE_GROUP"
    ws = r.workspace()
    assert "workspace name from --workspace" in ws.source and "resource group from DTRAIN_RESOURCE_GROUP" in ws.source


def test_missing_part_is_named_with_what_was_found(tmp_path, clean_env):
    d = az_dir(tmp_path, workspace="ws-az", subs=[("sub-az", True)])
    r = wsmod.resolution(start=tmp_path, environ={"AZURE_CONFIG_DIR": str(d)})
    assert r.missing == ["resource_group"]
    assert "az configure --defaults group=" in r.missing_text()[0]
    assert "workspace name 'ws-az' from az configure default 'workspace'" in r.found_text()


def test_no_default_subscription_and_broken_files_give_nothing(tmp_path, clean_env):
    d = az_dir(tmp_path, group="g", subs=[("a", False), ("b", False)])
    assert "subscription_id" not in wsmod.az_defaults({"AZURE_CONFIG_DIR": str(d)})
    (d / "azureProfile.json").write_text("{not json")
    (d / "config").write_text("no section header\n")
    assert wsmod.az_defaults({"AZURE_CONFIG_DIR": str(d)}) == {}


# --- dtrain config ---------------------------------------------------------------------------------

def _cli_env(tmp_path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUB)}
    env.update(AZURE_CONFIG_DIR=str(tmp_path / "no-az"), NO_COLOR="1", **extra)
    return env


def test_config_command_shows_each_part_and_its_source_without_the_sdk(tmp_path):
    import subprocess
    import sys

    put(tmp_path, "proj/.azureml/config.json", scope_json("ws-scope", "sub-scope", "rg-scope"))
    (tmp_path / "proj" / "sub").mkdir()
    code = ("import sys; from dtrain.cli import main; rc = main(sys.argv[1:]); "
            "print('AZURE_LOADED' if any(m.startswith('azure') for m in sys.modules) else 'NO_AZURE', "
            "file=sys.stderr); sys.exit(rc)")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = _cli_env(tmp_path, PYTHONPATH=src, DTRAIN_RESOURCE_GROUP="rg-env")

    def run(*args):
        return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path / "proj" / "sub", env=env,
                              capture_output=True, text=True, timeout=60)

    r = run("config", "-w", "ws-flag")
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in r.stdout.splitlines()}
    cfg = str(tmp_path / "proj" / ".azureml" / "config.json")
    assert rows == {"subscription_id": ["sub-scope", cfg], "resource_group": ["rg-env", "DTRAIN_RESOURCE_GROUP"],
                    "workspace_name": ["ws-flag", "--workspace"]}
    assert "NO_AZURE" in r.stderr
    r = run("config", "--output", "json")
    got = json.loads(r.stdout)
    assert r.returncode == 0 and got["workspace_name"] == "ws-scope" and got["sources"]["workspace_name"] == cfg
    assert got["missing"] == [] and "NO_AZURE" in r.stderr

    (tmp_path / "proj" / ".azureml" / "config.json").write_text("{}")
    r = run("config", "--output", "json")
    got = json.loads(r.stdout)
    assert r.returncode == 6 and got["missing"] == ["subscription_id", "workspace_name"]
    assert "missing subscription id" in r.stderr and f"ignored {cfg}" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_deeply_nested_config_json_is_a_config_problem_not_a_crash(tmp_path, clean_env):
    import subprocess
    import sys

    deep = "[" * 100_000 + "]" * 100_000     # json recurses per level: RecursionError unless caught
    put(tmp_path, "proj/config.json", deep)
    (tmp_path / "proj" / "sub").mkdir()
    r = wsmod.resolution(start=tmp_path / "proj" / "sub", environ={})
    assert r.config_file == str(tmp_path / "proj" / "config.json") and "nests too deeply" in r.config_problem
    d = az_dir(tmp_path, group="g")
    (d / "azureProfile.json").write_text(deep)
    assert set(wsmod.az_defaults({"AZURE_CONFIG_DIR": str(d)})) == {"resource_group"}   # the profile ignored
    src = str(Path(__file__).resolve().parents[1] / "src")
    p = subprocess.run([sys.executable, "-m", "dtrain", "config"], cwd=tmp_path / "proj" / "sub",
                       env=_cli_env(tmp_path, PYTHONPATH=src, DTRAIN_HOME=str(tmp_path / "home")),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 6 and str(tmp_path / "proj" / "config.json") in p.stderr, p.stderr
