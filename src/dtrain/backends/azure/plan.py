"""AzurePlan: what `dtrain submit` sends to Azure ML, as a value (no SDK, no network).

The job name is chosen here, client-side, before anything is sent: the PUT .../jobs/{name} is then
idempotent, so a retried PUT (or a retried `dtrain submit --name X`) never creates a second job.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

from ...spec.model import JobSpec
from .render import to_yaml
from .rest import job_body
from ..base import SubmitOptions
from ..names import generate_name

# Fields of the REST body that do not change when the SDK resolves the workspace (code uploads,
# compute/environment ARM ids): what decides whether an existing job of the same name is "this job".
STABLE_FIELDS = ("jobType", "command", "distribution", "resources", "inputs", "experimentName", "displayName",
                 "environmentVariables", "environmentId", "computeId", "limits", "outputs", "queueSettings")


@dataclass
class AzurePlan:
    name: str
    workspace: dict                 # subscription_id, resource_group, workspace_name, source
    body: dict                      # REST `properties` before workspace resolution (= render --format rest)
    yaml: str                       # what load_job reads (= render --format yaml --name NAME)
    spec_path: str | None           # the spec file; relative paths resolve against its folder
    base_dir: str
    experiment_name: str | None = None
    display_name: str | None = None
    tags: dict = field(default_factory=dict)
    name_generated: bool = False
    notes: list = field(default_factory=list)
    backend: str = "azureml"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["stable"] = stable_view(self.body)
        return d

    @property
    def relative_origin(self) -> str:
        # load_job resolves relative paths against the folder of relative_origin (a file path).
        import os

        return self.spec_path or os.path.join(self.base_dir, "job.yml")


def build_plan(spec: JobSpec, options: SubmitOptions, workspace) -> AzurePlan:
    if options.experiment_name or options.tags:
        data = copy.deepcopy(spec.data)
        if options.experiment_name:
            data["experiment_name"] = options.experiment_name
        if options.tags:
            data["tags"] = {**(data.get("tags") or {}), **options.tags}
        spec = dataclasses.replace(spec, data=data)
    name = options.name or spec.name
    generated = name is None
    name = name or generate_name()
    notes = []
    if options.input_paths:
        notes.append("--input applies to local runs only; Azure ML reads the inputs the spec names")
    return AzurePlan(
        name=name,
        workspace={"subscription_id": workspace.subscription_id, "resource_group": workspace.resource_group,
                   "workspace_name": workspace.workspace_name, "source": workspace.source},
        body=job_body(spec), yaml=to_yaml(spec, name=name),
        spec_path=str(spec.source.resolve()) if spec.source is not None else None, base_dir=str(spec.base_dir),
        experiment_name=spec.data.get("experiment_name"), display_name=spec.data.get("display_name"),
        tags=dict(spec.data.get("tags") or {}), name_generated=generated, notes=notes)


# --- "is the existing job this job?" --------------------------------------------------------------

def _last_segment(ref):
    """compute 'gpu-cluster' / 'azureml:gpu-cluster' / an ARM id -> 'gpu-cluster'."""
    if not isinstance(ref, str):
        return ref
    if "/" in ref:
        return ref.rstrip("/").rsplit("/", 1)[-1]
    return ref[len("azureml:"):] if ref.startswith("azureml:") else ref


def _environment_key(ref) -> str | None:
    """'name:version', 'name@latest', or an ARM/registry id -> 'name' + ':version' where pinned."""
    if not isinstance(ref, str):
        return None
    r = ref[len("azureml:"):] if ref.startswith("azureml:") and not ref.startswith("azureml://") else ref
    if "/environments/" in r:
        tail = r.split("/environments/", 1)[1].split("/")
        return tail[0] + (":" + tail[2] if len(tail) >= 3 and tail[1] == "versions" else "")
    if "@" in r:
        return r.split("@", 1)[0]           # @latest resolves to a version at submit: compare the name only
    return r


def _norm(v):
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items() if x not in (None, {}, [])}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return str(int(v)) if float(v).is_integer() else str(v)
    return v


def stable_view(body: dict) -> dict:
    out = {}
    for k in STABLE_FIELDS:
        v = body.get(k)
        if k == "computeId":
            v = _last_segment(v)
        elif k == "environmentId":
            v = _environment_key(v)
        elif k == "inputs":
            # literal values as written; asset inputs by type (their uris change when local data is uploaded)
            v = {n: ({"value": i.get("value")} if i.get("jobInputType") == "literal" else
                     {"type": i.get("jobInputType"), **({"uri": i["uri"]} if _remote(i.get("uri")) else {})})
                 for n, i in (v or {}).items()}
        elif k == "outputs":
            v = {n: {"type": o.get("jobOutputType"), "mode": o.get("mode"),
                     **({"uri": o["uri"]} if _remote(o.get("uri")) else {})} for n, o in (v or {}).items()}
        out[k] = _norm(v)
    return out


# What the service adds to a job it was sent (recorded answers, see docs/azure.md): defaults that
# stand for "not set" when the spec leaves the field out. Anything else it holds that we did not send
# is a real difference.
SERVICE_DEFAULTS = {"resources": {"instanceCount": "1", "shmSize": "2g", "instanceType": None, "dockerArgs": None}}
ARTIFACT_OUTPUT = "default"


def _without_service_additions(name: str | None, ours: dict, theirs: dict) -> dict:
    """The existing job's body less what the service adds: the run's artifact folder as outputs.default
    (`azureml://datastores/workspaceartifactstore/ExperimentRun/dcid.NAME`) when we sent no `default`."""
    outputs = theirs.get("outputs")
    if isinstance(outputs, dict) and ARTIFACT_OUTPUT in outputs and ARTIFACT_OUTPUT not in (ours.get("outputs") or {}):
        uri = str((outputs.get(ARTIFACT_OUTPUT) or {}).get("uri") or "")
        if "/ExperimentRun/dcid." in uri and (name is None or uri.rstrip("/").endswith("/dcid." + name)):
            theirs = dict(theirs, outputs={k: v for k, v in outputs.items() if k != ARTIFACT_OUTPUT})
    return theirs


def _remote(uri) -> bool:
    return isinstance(uri, str) and (uri.startswith(("azureml:", "https:", "http:", "wasbs:", "abfss:", "adl:")))


def _covers(mine, other) -> bool:
    """`other` holds everything `mine` sets (nested mappings: the service may add keys of its own)."""
    if isinstance(mine, dict) and isinstance(other, dict):
        return all(_covers(v, other.get(k)) for k, v in mine.items())
    return mine == other


def differences(ours: dict, theirs: dict, name: str | None = None) -> list[str]:
    """Fields where an existing job's body differs from dtrain's. Inside mappings only what dtrain sets
    is compared, plus the fields of SERVICE_DEFAULTS, which must then hold the service's default (the
    service fills in defaults and nulls, e.g. resources.shmSize "2g", displayName = name)."""
    a, b = stable_view(ours), stable_view(_without_service_additions(name, ours, theirs))
    diffs = []
    for k in STABLE_FIELDS:
        diffs += _field_differences(k, a.get(k), b.get(k))
    return diffs


# Fields the service leaves unset when not sent: a value on the existing job is then a difference.
_UNSET_UNLESS_SENT = ("distribution", "limits")
# Mappings whose keys are the user's own names: a name added or missing on either side is a difference.
_EXACT_KEYS = ("inputs", "outputs", "environmentVariables")


def _field_differences(k: str, mine, other) -> list[str]:
    """How one stable field differs ([k], ["k.sub", ...] or []). A field dtrain leaves out is a
    difference only where the service would not fill it in itself (_UNSET_UNLESS_SENT)."""
    if mine is None or mine == {}:
        return [k] if k in _UNSET_UNLESS_SENT and other not in (None, {}) else []
    if k == "environmentId" and _same_environment_name(mine, other):
        return []
    if isinstance(mine, dict) and isinstance(other, dict):
        return _mapping_differences(k, mine, other)
    return [k] if mine != other else []


def _same_environment_name(mine, other) -> bool:
    """A version-less environment name matches any version of that environment."""
    return isinstance(mine, str) and isinstance(other, str) and ":" not in mine and other.split(":")[0] == mine


def _mapping_differences(k: str, mine: dict, other: dict) -> list[str]:
    """The keys of a mapping field that differ: those dtrain sets (the service may add keys of its own),
    and those of SERVICE_DEFAULTS dtrain leaves out, which must then hold the service's default."""
    if k in _EXACT_KEYS and set(mine) != set(other):
        return [k]
    diffs = [f"{k}.{sub}" for sub, val in mine.items() if not _covers(val, other.get(sub))]
    diffs += [f"{k}.{sub}" for sub, default in SERVICE_DEFAULTS.get(k, {}).items()
              if sub not in mine and other.get(sub) not in (None, default)]
    return diffs
