"""The Azure ML REST job body (`properties` of PUT .../jobs/{name}) for a spec, before workspace
resolution: what azure-ai-ml's load_job(...)._to_rest_object() builds, computed without the SDK.

Local code and input paths stay as written (the SDK uploads them at submit and swaps in asset ids);
an inline environment becomes the anonymous environment the SDK registers,
azureml:CliV2AnonymousEnvironment:<content hash>, hashed exactly as the SDK hashes it.
"""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Callable

import yaml

from ...ignorefile import IgnoreRules
from ...spec.fields import camel_to_snake
from ...spec.model import JobSpec

ANONYMOUS_ENV_NAME = "CliV2AnonymousEnvironment"

_DIST_TYPE = {"pytorch": "PyTorch", "tensorflow": "TensorFlow", "mpi": "Mpi", "ray": "Ray"}
_INPUT_MODE = {"mount": "ReadOnlyMount", "ro_mount": "ReadOnlyMount", "rw_mount": "ReadWriteMount",
               "download": "Download", "direct": "Direct", "eval_mount": "EvalMount",
               "eval_download": "EvalDownload"}
_OUTPUT_MODE = {"mount": "ReadWriteMount", "rw_mount": "ReadWriteMount", "upload": "Upload", "direct": "Direct"}
_SERVICE_TYPE = {"jupyter_lab": "JupyterLab", "vs_code": "VSCode", "tensor_board": "TensorBoard", "ssh": "SSH"}
_IDENTITY = {"user_identity": "UserIdentity", "managed": "Managed", "managed_identity": "Managed",
             "aml_token": "AMLToken"}
_JOB_TIER = {"null": "Null", "spot": "Spot", "basic": "Basic", "standard": "Standard", "premium": "Premium"}
_PRIORITY = {"low": 1, "medium": 2, "high": 3}
# What CommandJob._to_rest_object removes from the user's properties bag: set by the service, read-only.
_READ_ONLY_PROPERTIES = ("_azureml.ComputeTargetType",)
# resources.properties keys the SDK spells its own way (Properties._KEY_MAPPING, matched case-insensitively):
# Singularity is sent as AISuperComputer.
_RESOURCE_PROPERTY_KEYS = {"aisupercomputer": "AISuperComputer", "singularity": "AISuperComputer",
                           "itp": "itp", "target_selector": "target_selector"}


def job_body(spec: JobSpec) -> dict:
    """The body, one entry per REST field in a fixed order (kept, so the serialized body stays the same);
    optional fields are left out where the SDK leaves them out."""
    d = spec.data
    return {
        **_if_given(d, "code", "codeId", _strip_azureml),
        "command": map_single_brackets(d["command"]),
        **_compute_id(d),
        **_if_given(d, "description", "description"),
        **_if_given(d, "display_name", "displayName"),
        **_if_set(d, "distribution", "distribution", _distribution),
        "environmentId": environment_id(spec),
        "environmentVariables": dict(d.get("environment_variables") or {}),
        **_if_given(d, "experiment_name", "experimentName"),
        **_if_set(d, "identity", "identity", _identity),
        "inputs": _each(d.get("inputs"), _input),
        "isArchived": False,
        "jobType": "Command",
        **_limits(d),
        "outputs": _each(d.get("outputs"), _output),
        "properties": _user_properties(d.get("properties")),
        **_if_set(d, "queue_settings", "queueSettings", _queue),
        **_resources_field(d),
        **_if_set(d, "services", "services", lambda services: _each(services, _service)),
        "tags": dict(d.get("tags") or {}),
        **_if_given(d, "parent_job_name", "parentJobName"),
    }


def _as_is(v):
    return v


def _if_given(d: dict, key: str, rest: str, convert: Callable = _as_is) -> dict:
    """{rest: convert(value)} when the spec gives `key` a value, else {}: the SDK omits None fields."""
    return {rest: convert(d[key])} if d.get(key) is not None else {}


def _if_set(d: dict, key: str, rest: str, convert: Callable) -> dict:
    """{rest: convert(value)} when `key` is set to something non-empty, else {}: for the fields the SDK
    only sends when truthy (an empty distribution or identity is not sent)."""
    return {rest: convert(d[key])} if d.get(key) else {}


def _each(mapping: dict | None, convert: Callable) -> dict:
    """Each value of a name -> value mapping converted, names and order kept (none: {})."""
    return {k: convert(v) for k, v in (mapping or {}).items()}


def _compute_id(d: dict) -> dict:
    """computeId, absent for `compute: local`, which the SDK sends as a resources property instead."""
    if d.get("compute") is not None and str(d["compute"]).lower() != "local":
        return {"computeId": _strip_azureml(d["compute"])}
    return {}


def _limits(d: dict) -> dict:
    """limits, sent only when a timeout is set."""
    if (d.get("limits") or {}).get("timeout"):
        return {"limits": {"jobLimitsType": "Command", "timeout": iso_duration(d["limits"]["timeout"])}}
    return {}


def _user_properties(props: dict | None) -> dict:
    """The user's properties bag less what CommandJob._to_rest_object removes (service-set, read-only)."""
    return {k: v for k, v in (props or {}).items() if k not in _READ_ONLY_PROPERTIES}


def _resources_field(d: dict) -> dict:
    """resources, when the spec has any or runs locally (the IsLocal marker lives there)."""
    res = _resources(d.get("resources"), local=str(d.get("compute", "")).lower() == "local")
    return {"resources": res} if res is not None else {}


def _strip_azureml(ref: str) -> str:
    # "azureml:name:version" -> "name:version"; "azureml://..." URIs and ARM ids stay as written.
    if isinstance(ref, str) and ref.startswith("azureml:") and not ref.startswith("azureml://"):
        return ref[len("azureml:"):]
    return ref


def map_single_brackets(command: str) -> str:
    """The SDK rewrites the deprecated {inputs.x} form to ${{inputs.x}} before sending."""
    for prefix in ("inputs", "outputs", "search_space"):
        command = re.sub(r"(?<!\{)\{" + prefix + r"\.([^}]*)\}(?!\})", "${{" + prefix + r".\g<1>}}", command)
    return command


def iso_duration(seconds: int) -> str:
    """ISO 8601 duration as isodate formats a timedelta: PT1H, P1DT2H3M4S."""
    days, rem = divmod(int(seconds), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    out = "P" + (f"{days}D" if days else "")
    t = (f"{h}H" if h else "") + (f"{m}M" if m else "") + (f"{s}S" if s else "")
    if t:
        out += "T" + t
    return out if out != "P" else "P0D"


def _distribution(d: dict) -> dict:
    kind = str(d["type"]).lower()
    out: dict = {"distributionType": _DIST_TYPE[kind]}
    if kind in ("pytorch", "mpi"):
        if d.get("process_count_per_instance") is not None:
            out["processCountPerInstance"] = d["process_count_per_instance"]
    elif kind == "tensorflow":
        out["parameterServerCount"] = d.get("parameter_server_count") or 0
        if d.get("worker_count") is not None:
            out["workerCount"] = d["worker_count"]
    elif kind == "ray":
        for k, rk in (("port", "port"), ("address", "address"), ("include_dashboard", "includeDashboard"),
                      ("dashboard_port", "dashboardPort"), ("head_node_additional_args", "headNodeAdditionalArgs"),
                      ("worker_node_additional_args", "workerNodeAdditionalArgs")):
            if d.get(k) is not None:
                out[rk] = d[k]
    return out


def _literal(v) -> str | None:
    return None if v is None else str(v)


def _input(v) -> dict:
    if isinstance(v, dict) and ("type" in v or "path" in v):
        t = str(v.get("type", "uri_folder")).lower()
        path = v.get("path")
        if isinstance(path, str) and path.startswith("${{"):
            return {"jobInputType": "literal", "value": path}
        out = {"jobInputType": t}
        if v.get("mode"):
            out["mode"] = _INPUT_MODE[str(v["mode"]).lower()]
        if path is not None:
            out["uri"] = _strip_azureml(path)
        return out
    if isinstance(v, dict):
        v = v.get("value")
    return {"jobInputType": "literal", "value": _literal(v)}


def _output(v) -> dict:
    if v is None:
        return {"jobOutputType": "uri_folder"}
    out = {"jobOutputType": str(v.get("type", "uri_folder")).lower()}
    if v.get("name") is not None:
        out["assetName"] = v["name"]
    if v.get("mode"):
        out["mode"] = _OUTPUT_MODE[str(v["mode"]).lower()]
    if v.get("path") is not None:
        out["uri"] = v["path"]
    if v.get("version") is not None:
        out["assetVersion"] = str(v["version"])
    return out


def _identity(v: dict) -> dict:
    kind = camel_to_snake(str(v["type"]))
    out = {"identityType": _IDENTITY[kind]}
    for k, rk in (("client_id", "clientId"), ("object_id", "objectId")):
        if v.get(k) is not None:
            out[rk] = v[k]
    return out


def _queue(v: dict) -> dict:
    out: dict = {}
    if v.get("job_tier") is not None:
        out["jobTier"] = _JOB_TIER[str(v["job_tier"]).lower()]
    if v.get("priority") is not None:
        out["priority"] = _PRIORITY[str(v["priority"]).lower()]
    return out


def _resources(r: dict | None, *, local: bool) -> dict | None:
    if r is None and not local:
        return None
    r = r or {}
    out: dict = {}
    docker_args = r.get("docker_args")
    # The SDK takes its list branch only for a non-empty list: `docker_args: []` is sent as dockerArgs.
    as_list = isinstance(docker_args, list) and bool(docker_args)
    if as_list:
        out["dockerArgsList"] = docker_args
    elif docker_args is not None:
        out["dockerArgs"] = docker_args
    if r.get("instance_count") is not None:
        out["instanceCount"] = r["instance_count"]
    if r.get("instance_type") is not None:
        out["instanceType"] = r["instance_type"]
    props = dict(r.get("properties") or {})
    if local:
        props["IsLocal"] = {"IsLocal": True}   # the SDK's marker for compute: local
    out["properties"] = _resource_properties(props)
    if r.get("shm_size") is not None:
        out["shmSize"] = r["shm_size"]
    if r.get("locations") is not None and not as_list:
        out["locations"] = r["locations"]
    if r.get("max_instance_count") is not None and not as_list:
        out["maxInstanceCount"] = r["max_instance_count"]
    return out


def _resource_properties(props: dict) -> dict:
    """As the SDK's Properties.as_dict: None values dropped at every depth, known keys respelled, then
    None and empty mappings dropped at every depth (lists included)."""
    def drop_none(o):
        return {k: drop_none(v) for k, v in o.items() if v is not None} if isinstance(o, dict) else o

    def drop_empty(o):
        if isinstance(o, list):
            return [x for x in map(drop_empty, o) if not (x is None or x == {})]
        if isinstance(o, dict):
            return {k: x for k, x in ((k, drop_empty(v)) for k, v in o.items()) if not (x is None or x == {})}
        return o

    renamed = {}
    for k, v in drop_none(props).items():
        renamed[_RESOURCE_PROPERTY_KEYS.get(k.lower(), k) if isinstance(k, str) else k] = v
    return drop_empty(renamed)


def _service(v: dict) -> dict:
    kind = str(v.get("type", "")).lower()
    out: dict = {}
    if kind in _SERVICE_TYPE:  # the SDK sends other (custom) types without a jobServiceType
        out["jobServiceType"] = _SERVICE_TYPE[kind]
    if v.get("nodes") is not None:
        out["nodes"] = {"nodesValueType": "All"}
    if v.get("port") is not None:
        out["port"] = v["port"]
    props = dict(v.get("properties") or {})
    if kind == "tensor_board" and v.get("log_dir") is not None:
        props["logDir"] = v["log_dir"]
    if kind == "ssh" and v.get("ssh_public_keys") is not None:
        props["sshPublicKeys"] = v["ssh_public_keys"]
    if props:
        out["properties"] = props
    return out


# --- environments ----------------------------------------------------------------------------------

def environment_id(spec: JobSpec) -> str:
    env, base_dir = spec.environment, spec.base_dir
    env_file = spec.environment_file()
    if env_file is not None:
        # An environment YAML referenced from a job is registered anonymously, like an inline one.
        with open(env_file, encoding="utf-8") as f:
            env, base_dir = yaml.safe_load(f), env_file.parent
    if isinstance(env, str):
        return _strip_azureml(env)
    return f"azureml:{ANONYMOUS_ENV_NAME}:{anonymous_environment_version(env, base_dir)}"


def _sha(text: str | None) -> str:
    return hashlib.sha256(text.encode("utf8")).hexdigest() if text is not None else ""


def anonymous_environment_version(env: dict, base_dir: Path) -> str:
    """The version the SDK gives an inline environment (Environment._generate_anonymous_name_version).
    The str.join calls mirror the SDK's, which interleave rather than concatenate; kept as is so the
    hash matches."""
    hash_str = ""
    build = env.get("build")
    if build:
        path = Path(build["path"])
        if not path.is_absolute():
            path = (base_dir / path).resolve()
        upload_hash = object_hash(path)
        dockerfile = build.get("dockerfile_path")
        if not dockerfile:
            hash_str = hash_str.join(_sha(upload_hash))
        else:
            hash_str = hash_str.join(_sha(upload_hash)).join(_sha(dockerfile))
    elif env.get("image"):
        hash_str = hash_str.join(_sha(env["image"]))
        if env.get("inference_config"):
            hash_str = hash_str.join(_sha(yaml.dump(env["inference_config"], sort_keys=True)))
        conda = _conda_text(env.get("conda_file"), base_dir)
        if conda:
            hash_str = hash_str.join(_sha(conda))
    return _sha(hash_str)


def _conda_text(conda_file, base_dir: Path) -> str | None:
    if conda_file is None:
        return None
    if isinstance(conda_file, str):
        with open(base_dir / conda_file, encoding="utf-8") as f:
            conda_file = yaml.safe_load(f)
    return yaml.dump(conda_file, sort_keys=True, Dumper=yaml.Dumper)


def object_hash(path: Path) -> str:
    """The SDK's get_object_hash: sha256 over names and contents, walking folders sorted case-insensitively
    and skipping what the folder's ignore file (.amlignore, else .gitignore) excludes."""
    h = hashlib.sha256(b"Initialize for october 2021 AML CLI version")
    if path.is_dir():
        _dir_hash(path, h, IgnoreRules.for_folder(path), path)
    else:
        _file_hash(Path(os.path.realpath(path)), h)
    return h.hexdigest()


def _file_hash(path: Path, h) -> None:
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)


def _dir_hash(directory: Path, h, rules: IgnoreRules, root: Path) -> None:
    """The SDK's _get_dir_hash: every entry is matched on its own path (IgnoreFile.is_file_excluded: no
    folder pruning, last match wins); a symlinked folder is walked at its resolved location."""
    for p in sorted(directory.iterdir(), key=lambda x: str(x).lower()):
        if rules.excluded(p):
            continue
        h.update(p.name.encode())
        if p.is_symlink():
            p = Path(os.path.realpath(p))
        if p.is_file():
            _file_hash(p, h)
        elif p.is_dir():
            _dir_hash(p, h, rules, root)
