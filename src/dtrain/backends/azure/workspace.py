"""Which Azure ML workspace a command talks to, and where each part of it came from, decided without
importing the Azure SDK and without running `az`.

Each part (subscription, resource group, workspace name) comes from the first source that has it:

1. flags (--subscription, --resource-group, --workspace);
2. DTRAIN_* / AZURE_* variables (ENV_* below);
3. the workspace config file MLClient.from_config finds from the current folder (find_config_file:
   the same folders, sub-folders, file names and both file forms as azure-ai-ml);
4. AZUREML_ARM_* variables, which Azure ML sets inside a job (so a job can submit jobs);
5. az's own defaults: `az configure --defaults group=... workspace=...` ([defaults] in
   $AZURE_CONFIG_DIR/config, or AZURE_DEFAULTS_GROUP / AZURE_DEFAULTS_WORKSPACE as az reads them) and
   the subscription `az account set` chose (isDefault in $AZURE_CONFIG_DIR/azureProfile.json).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

ENV_SUBSCRIPTION = ("DTRAIN_SUBSCRIPTION_ID", "AZURE_SUBSCRIPTION_ID")
ENV_RESOURCE_GROUP = ("DTRAIN_RESOURCE_GROUP", "AZURE_RESOURCE_GROUP", "AZUREML_RESOURCE_GROUP")
ENV_WORKSPACE = ("DTRAIN_WORKSPACE", "AZUREML_WORKSPACE_NAME", "AZURE_ML_WORKSPACE")
# Set by Azure ML in every job's environment.
ARM_SUBSCRIPTION, ARM_RESOURCE_GROUP, ARM_WORKSPACE = (
    "AZUREML_ARM_SUBSCRIPTION", "AZUREML_ARM_RESOURCEGROUP", "AZUREML_ARM_WORKSPACE_NAME")

PARTS = ("subscription_id", "resource_group", "workspace_name")
LABELS = {"subscription_id": "subscription id", "resource_group": "resource group",
          "workspace_name": "workspace name"}
# How to set each part, for messages naming a missing one.
HOW_TO_SET = {
    "subscription_id": "--subscription, DTRAIN_SUBSCRIPTION_ID, a config.json, or `az account set --subscription`",
    "resource_group": "--resource-group, DTRAIN_RESOURCE_GROUP, a config.json, or `az configure --defaults group=`",
    "workspace_name": "--workspace, DTRAIN_WORKSPACE, a config.json, or `az configure --defaults workspace=`",
}

# MLClient.from_config: each (sub-folder, file name) pair in this order is searched for in the start
# folder and up to 20 parents before the next pair is tried (azure/ai/ml/_ml_client.py).
_CONFIG_DIRS = (".azureml", "aml_config", None)
_CONFIG_NAMES = ("config.json", "project.json")
_CONFIG_LEVELS = 20


@dataclass(frozen=True)
class Workspace:
    subscription_id: str
    resource_group: str
    workspace_name: str
    source: str                                   # where it came from, one line for messages
    sources: dict = field(default_factory=dict, compare=False)   # part -> where that part came from


@dataclass
class Resolution:
    """Every part with its source; what is missing; a config file found but unusable."""

    values: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    config_file: str | None = None       # the file from_config's search found (used or not)
    config_problem: str | None = None    # why that file could not be used

    @property
    def missing(self) -> list[str]:
        return [p for p in PARTS if not self.values.get(p)]

    @property
    def intended(self) -> bool:
        """Whether Azure is evidently meant: a workspace name, or any part given as a flag. (az login's
        default subscription or an az default group alone say nothing: many az users never use Azure ML.)
        Commands that fall back to local jobs do so only when Azure is not meant."""
        return bool(self.values.get("workspace_name")) or any(
            (s or "").startswith("--") for s in self.sources.values())

    def missing_text(self) -> list[str]:
        return [f"{LABELS[p]} ({HOW_TO_SET[p]})" for p in self.missing]

    def found_text(self) -> str:
        """'found: resource group from X, ...' for what is there, and a config file that was not usable."""
        bits = [f"{LABELS[p]} '{self.values[p]}' from {self.sources[p]}" for p in PARTS if self.values.get(p)]
        text = ("found " + ", ".join(bits)) if bits else "nothing found in flags, environment, config.json or az defaults"
        if self.config_problem:
            text += f"; ignored {self.config_file}: {self.config_problem}"
        return text

    def missing_message(self) -> str:
        return ("no Azure ML workspace configured: missing " + ", ".join(self.missing_text())
                + f"; {self.found_text()}")

    def workspace(self) -> Workspace | None:
        if self.missing:
            return None
        srcs = [self.sources[p] for p in PARTS]
        if len(set(srcs)) == 1:
            line = srcs[0]
        else:
            line = ", ".join(f"{LABELS[p]} from {self.sources[p]}" for p in PARTS)
        return Workspace(**{p: self.values[p] for p in PARTS}, source=line, sources=dict(self.sources))

    def to_dict(self) -> dict:
        return {**{p: self.values.get(p) for p in PARTS}, "sources": {p: self.sources.get(p) for p in PARTS},
                "missing": self.missing, "config_file": self.config_file, "config_problem": self.config_problem}


# --- config.json, as MLClient.from_config finds and reads it ------------------------------------------

def find_config_file(start: Path | None = None) -> Path | None:
    """The file MLClient.from_config(path=start) would read, or None.

    Like the SDK: for each (.azureml/, aml_config/, the folder itself) x (config.json, project.json)
    in that order, walk from the start folder up through 20 parents (resolving symlinks on the way up,
    as os.path.realpath does) and take the first file that exists, whatever is in it. So a parent's
    .azureml/config.json wins over a config.json in the current folder."""
    here = Path(start) if start is not None else Path(".")
    root = os.path.realpath(os.sep)
    for sub in _CONFIG_DIRS:
        for name in _CONFIG_NAMES:
            rel = os.path.join(sub, name) if sub else name
            cur, level = str(here), 0
            while True:
                candidate = os.path.join(cur, rel)
                if os.path.isfile(candidate):
                    return Path(os.path.abspath(candidate))
                if cur == root or level == _CONFIG_LEVELS:
                    break
                cur = os.path.realpath(os.path.join(cur, os.pardir))
                level += 1
    return None


def read_config_file(path: Path) -> tuple[dict | None, str | None]:
    """(parts, None) or (None, why not). Both of the SDK's forms: the three keys, or
    {"Scope": "/subscriptions/S/resourceGroups/G/providers/Microsoft.MachineLearningServices/workspaces/W"}."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except OSError as exc:
        return None, f"cannot read it ({exc.strerror})"
    except ValueError:
        return None, "it is not valid JSON"
    except RecursionError:  # json recurses once per level: 100,000 nested lists exhaust the stack
        return None, "it nests too deeply to be a workspace config"
    if not isinstance(data, dict):
        return None, "it is not a JSON object"
    scope = data.get("Scope")
    if scope:
        pieces = str(scope).split("/")
        if len(pieces) < 9 or not all(pieces[i] for i in (2, 4, 8)):
            return None, f"its Scope '{scope}' is not a workspace resource id"
        return {"subscription_id": pieces[2], "resource_group": pieces[4], "workspace_name": pieces[8]}, None
    lacking = [k for k in PARTS if k not in data]
    if lacking:
        return None, "it has no " + ", ".join(lacking) + " (nor a Scope)"
    if not all(isinstance(data[k], str) and data[k] for k in PARTS):
        return None, "its subscription_id, resource_group and workspace_name must be non-empty strings"
    return {k: data[k] for k in PARTS}, None


# --- az's own defaults ----------------------------------------------------------------------------

def azure_config_dir(environ=None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("AZURE_CONFIG_DIR") or Path.home() / ".azure").expanduser()


def az_defaults(environ=None) -> dict:
    """part -> (value, source) from `az configure --defaults` and the default subscription of `az login`.
    az lets AZURE_DEFAULTS_<KEY> override the [defaults] section of its config file; so does dtrain."""
    env = os.environ if environ is None else environ
    cfg_dir = azure_config_dir(env)
    found: dict = {}
    section: dict = {}
    cfg = cfg_dir / "config"
    if cfg.is_file():
        import configparser

        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(cfg, encoding="utf-8-sig")
            if parser.has_section("defaults"):
                section = dict(parser.items("defaults"))
        except (configparser.Error, OSError, UnicodeDecodeError):
            section = {}
    for part, key in (("resource_group", "group"), ("workspace_name", "workspace")):
        var = f"AZURE_DEFAULTS_{key.upper()}"
        if env.get(var):
            found[part] = (env[var], var)
        elif (section.get(key) or "").strip():
            found[part] = (section[key].strip(), f"az configure default '{key}' ({cfg})")
    profile = cfg_dir / "azureProfile.json"
    if profile.is_file():
        try:
            data = json.loads(profile.read_text(encoding="utf-8-sig"))   # az writes it with a BOM
            subs = data.get("subscriptions") if isinstance(data, dict) else None
            for s in subs or []:
                if isinstance(s, dict) and s.get("isDefault") is True and s.get("id"):
                    found["subscription_id"] = (str(s["id"]), f"az login default subscription ({profile})")
                    break
        except (OSError, ValueError, RecursionError):
            pass
    return found


# --- the whole order ------------------------------------------------------------------------------

def _first_env(names, env) -> tuple[str | None, str | None]:
    for n in names:
        if env.get(n):
            return env[n], n
    return None, None


def resolution(subscription: str | None = None, resource_group: str | None = None,
               workspace: str | None = None, *, start: Path | None = None, environ=None) -> Resolution:
    env = os.environ if environ is None else environ
    r = Resolution()

    def take(part, value, source):
        if value and not r.values.get(part):
            r.values[part], r.sources[part] = value, source

    for part, value, flag in (("subscription_id", subscription, "--subscription"),
                              ("resource_group", resource_group, "--resource-group"),
                              ("workspace_name", workspace, "--workspace")):
        take(part, value, flag)
    for part, names in (("subscription_id", ENV_SUBSCRIPTION), ("resource_group", ENV_RESOURCE_GROUP),
                        ("workspace_name", ENV_WORKSPACE)):
        take(part, *_first_env(names, env))
    if r.missing:
        path = find_config_file(start)
        if path is not None:
            r.config_file = str(path)
            parts, problem = read_config_file(path)
            r.config_problem = problem
            for part, value in (parts or {}).items():
                take(part, value, str(path))
    if r.missing:
        for part, var in (("subscription_id", ARM_SUBSCRIPTION), ("resource_group", ARM_RESOURCE_GROUP),
                          ("workspace_name", ARM_WORKSPACE)):
            take(part, env.get(var), var)
    if r.missing:
        for part, (value, source) in az_defaults(env).items():
            take(part, value, source)
    return r


def resolve(subscription: str | None = None, resource_group: str | None = None,
            workspace: str | None = None) -> tuple[Workspace | None, list[str]]:
    """(workspace, descriptions of the missing parts)."""
    r = resolution(subscription, resource_group, workspace)
    return r.workspace(), r.missing_text()
