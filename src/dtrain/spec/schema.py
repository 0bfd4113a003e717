"""The Azure ML CLI v2 command-job schema (commandJob.schema.json), written once in fields.py's language.

Names, types and enums follow azure-ai-ml's marshmallow schema; enum matching is case-insensitive
where the SDK's is (StringTransformedEnum lower-cases). Keys Azure renamed are named in the error.
"""
from __future__ import annotations

from .fields import (AnyValue, Bool, DictField, EnvValue, Field, Int, ListField, Map, Scalar, Str, Tagged,
                     UnionField, camel_to_snake)

# Azure ML run ids: a letter or digit, then letters, digits, '_' or '-', at most 255 in all.
JOB_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,254}"
JOB_NAME_HINT = "use letters, digits, '-' and '_', starting with a letter or digit (at most 255)"
SHM_PATTERN = r"[1-9][0-9]*[bBkKmMgG]|0*[1-9][0-9]*[bBkKmMgG]"
SHM_HINT = "write <number><unit> with unit b, k, m or g, e.g. 16g"

ENV_REF_PATTERN = r"(azureml:|file:).+"
ENV_REF_HINT = ("name a registered environment as azureml:NAME:VERSION or azureml:NAME@latest, a registry one as "
                "azureml://registries/REG/environments/NAME/versions/V, an environment YAML as file:PATH, "
                "or write an inline mapping with image:")

INPUT_MODES = {
    "uri_file": ("ro_mount", "download", "direct"),
    "uri_folder": ("ro_mount", "download", "direct"),
    "mltable": ("ro_mount", "download", "direct", "eval_mount", "eval_download"),
    "custom_model": ("ro_mount", "download", "direct"),
    "mlflow_model": ("ro_mount", "download", "direct"),
    "triton_model": ("ro_mount", "download", "direct"),
}
OUTPUT_TYPES = ("uri_folder", "uri_file", "mltable", "custom_model", "mlflow_model", "triton_model")
OUTPUT_MODES = ("rw_mount", "upload", "direct", "mount")

# Counts the REST body holds as int32: azure-ai-ml sends a larger one as written, the service refuses it.
INT32_MAX = 2**31 - 1


def _count(doc="", *, min=1):
    return Int(doc, min=min, max=INT32_MAX, max_hint="Azure ML reads this as a 32-bit integer")


_path_doc = ("Local path (uploaded), azureml:name:version / azureml:name@latest asset, "
             "azureml://datastores/... URI, https:// or wasbs:// URL")


def _input(types):
    modes = sorted({m for t in types for m in INPUT_MODES[t]})
    return Map({
        "type": Str("Input type.", enum=types, ci=True),
        "path": Str(_path_doc),
        "mode": Str("How the job sees the data.", enum=modes, ci=True),
        "path_on_compute": Str("Where the data appears on the compute (file: URI)."),
        "datastore": Str("Datastore a local path is uploaded to."),
    }, "Data or model input.", renamed={
        "data": "the preview `data:` key is now `path:` (azureml:name:version, a datastore URI or a local path)",
        "dataset": "the preview `dataset:` key is now `path:` with `type: uri_folder`, `uri_file` or `mltable`",
    })


INPUT = Tagged({
    "uri_folder": _input(("uri_folder",)),
    "uri_file": _input(("uri_file",)),
    "mltable": _input(("mltable",)),
    "custom_model": _input(("custom_model",)),
    "mlflow_model": _input(("mlflow_model",)),
    "triton_model": _input(("triton_model",)),
}, "An asset input; `type` defaults to uri_folder.", default="uri_folder")

LITERAL_VALUE = Map({"value": Scalar("The literal value.")}, "A literal wrapped as {value: ...}.", required=("value",))


# Typed inputs (`type: integer, default: 2`) are a component's; azure-ai-ml's load_job refuses them
# in a command job, where an input is the literal itself.
_COMPONENT_TYPES = {"integer", "number", "boolean", "string"}


def _typed_input(v: dict, path, c) -> None:
    name = path[-1] if path else "x"
    given = next((k for k in ("default", "value") if k in v), None)
    example = _literal_example(v, given)
    c.error(path + ("type",), f"input '{name}': `type: {v['type']}` declares a component input; in a command "
            "job an input is its literal value", code="enum",
            hint=f"write `{name}: {example}`" + (f" (the {given} is not {_article(v['type'])})"
                                                 if given and not _fits(v[given], v["type"]) else ""))


def _literal_example(v: dict, given) -> str:
    if given is None:
        return {"integer": "2", "number": "0.1", "boolean": "true"}.get(str(v["type"]).lower(), "text")
    value = v[given]
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _article(t) -> str:
    t = str(t).lower()
    return {"integer": "an integer", "number": "a number", "boolean": "a boolean"}.get(t, "a string")


def _fits(value, t) -> bool:
    t = str(t).lower()
    if t == "boolean":
        return isinstance(value, bool)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, str)


class InputField(UnionField):
    """A literal (string, number, boolean), {value: literal}, or an asset mapping with type/path/mode."""

    def __init__(self):
        super().__init__(Scalar(), INPUT, doc="A literal or an asset input.")

    def check(self, v, path, c):
        if isinstance(v, dict) and str(v.get("type", "")).lower() in _COMPONENT_TYPES:
            _typed_input(v, path, c)
        elif isinstance(v, dict) and "value" in v and "type" not in v and "path" not in v:
            LITERAL_VALUE.check(v, path, c)
        else:
            super().check(v, path, c)

    def json(self):
        return {"anyOf": [Scalar().json(), LITERAL_VALUE.json(), INPUT.json()], "description": self.doc}


OUTPUT = Map({
    "type": Str("Output type.", enum=OUTPUT_TYPES, ci=True),
    "mode": Str("How the job writes the output.", enum=OUTPUT_MODES, ci=True),
    "path": Str("azureml://datastores/<store>/paths/<path> where the output is written."),
    "name": Str("Register the output as a data/model asset of this name."),
    "version": UnionField(Str(), Int(), doc="Version of the registered asset."),
}, "A job output; `type` defaults to uri_folder.")


class OutputField(Field):
    doc = "A job output, or empty for a default uri_folder output."

    def check(self, v, path, c):
        if v is None:
            return
        OUTPUT.check(v, path, c)

    def json(self):
        return {"anyOf": [{"type": "null"}, OUTPUT.json()], "description": self.doc}

    def describe(self):
        return "mapping"


DISTRIBUTION = Tagged({
    "pytorch": Map({
        "type": Str(enum=("pytorch",), ci=True),
        "process_count_per_instance": _count("Processes per node; one per GPU is usual."),
    }, "torch.distributed: one process per GPU, MASTER_ADDR/RANK/WORLD_SIZE set for each.",
        renamed={"process_count": "Azure renamed it to 'process_count_per_instance' (processes per node)",
                 "node_count": "the number of nodes is `resources.instance_count`"}),
    "tensorflow": Map({
        "type": Str(enum=("tensorflow",), ci=True),
        "worker_count": _count("Workers in all; defaults to resources.instance_count."),
        "parameter_server_count": _count("Parameter servers (ParameterServerStrategy); 0 by default.", min=0),
    }, "TensorFlow: TF_CONFIG set for each worker and parameter server.",
        renamed={"process_count": "TensorFlow jobs count `worker_count` (in all) and `parameter_server_count`",
                 "process_count_per_instance": "TensorFlow jobs count `worker_count` (in all), "
                                               "not processes per instance"}),
    "mpi": Map({
        "type": Str(enum=("mpi",), ci=True),
        "process_count_per_instance": _count("MPI ranks per node."),
    }, "MPI: mpirun starts the ranks.",
        renamed={"process_count": "Azure renamed it to 'process_count_per_instance' (ranks per node)"}),
    "ray": Map({
        "type": Str(enum=("ray",), ci=True),
        "port": Int(min=1, max=65535), "address": Str(), "include_dashboard": Bool(),
        "dashboard_port": Int(min=1, max=65535), "head_node_additional_args": Str(),
        "worker_node_additional_args": Str(),
    }, "Ray (preview in Azure ML); validated and rendered, not run locally."),
}, "How the command is launched on each node.")

RESOURCES = Map({
    "instance_count": _count("Number of nodes."),
    "instance_type": Str("VM size of each node, e.g. Standard_NC24ads_A100_v4."),
    "shm_size": Str("Shared memory of the container, e.g. 16g.", pattern=SHM_PATTERN, pattern_hint=SHM_HINT,
                    number_hint=lambda v: f"a size needs a unit: write {v:g}g (gigabytes), or m, k, b"),
    "docker_args": UnionField(Str(), ListField(Str()), doc="Extra docker run arguments."),
    "locations": ListField(Str(), "Regions the job may run in (serverless)."),
    "max_instance_count": _count("Upper bound of nodes for elastic training."),
    "properties": DictField(AnyValue(), "Extra resource properties passed through."),
}, "Compute resources of the job.", renamed={
    "process_count_per_instance": "processes per node belong in `distribution.process_count_per_instance`",
    "node_count": "the number of nodes is `instance_count`",
})

ENVIRONMENT = Map({
    "name": Str(), "version": UnionField(Str(), Int()), "description": Str(),
    "image": Str("Docker image, e.g. mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04."),
    "conda_file": UnionField(Str("Path to a conda YAML."), DictField(AnyValue()),
                             doc="Conda environment, path or inline."),
    "build": Map({"path": Str("Docker build context (folder or URL)."), "dockerfile_path": Str()},
                 "Docker build context.", required=("path",)),
    "os_type": Str(enum=("linux", "windows"), ci=True),
    "tags": DictField(Scalar()), "properties": DictField(Scalar()),
    "inference_config": DictField(AnyValue()),
    "datastore": Str(),
    "$schema": Str(),
}, "An inline (anonymous) environment.", renamed={
    "docker": "the preview `docker:` block is gone; write `image:` or `build: {path: ...}` directly",
    "conda": "write `conda_file:`",
})

SERVICE_BASE = {
    "type": Str(enum=("jupyter_lab", "ssh", "tensor_board", "vs_code"), ci=True),
    "port": Int(min=1, max=65535),
    "nodes": Str("'all' to start the service on every node.", enum=("all",)),
    "properties": DictField(AnyValue()),
}
SERVICES = DictField(Tagged({
    "jupyter_lab": Map(dict(SERVICE_BASE), "JupyterLab on the node."),
    "vs_code": Map(dict(SERVICE_BASE), "VS Code on the node."),
    "tensor_board": Map(dict(SERVICE_BASE, log_dir=Str("Folder TensorBoard reads.")), "TensorBoard."),
    "ssh": Map(dict(SERVICE_BASE, ssh_public_keys=Str("Public key(s) allowed to log in.")), "SSH to the node."),
}, "An interactive service on the job's nodes.",
    # Azure accepts other service types (e.g. custom) with the base fields only.
    fallback=Map(dict(SERVICE_BASE, type=Str("Service type.")), "A service of another type.")),
    "Interactive services, by name.")

# The SDK folds identity types with camel_to_snake, not lower(): AMLToken (the REST spelling),
# amlToken and AML_TOKEN are aml_token; UserIdentity is user_identity; ManagedIdentity is managed_identity.
_ID = dict(casing=camel_to_snake)
_MANAGED = Map({"type": Str(enum=("managed", "managed_identity"), **_ID), "client_id": Str(),
                "object_id": Str()}, "Run as a managed identity.")
IDENTITY = Tagged({
    "user_identity": Map({"type": Str(enum=("user_identity",), **_ID)}, "Run as the submitting user."),
    "managed": _MANAGED,
    "managed_identity": _MANAGED,
    "aml_token": Map({"type": Str(enum=("aml_token",), **_ID)}, "Run with the workspace's AML token."),
}, "Identity the job accesses data with (AMLToken, UserIdentity and Managed, the REST spellings, too).", **_ID)

NAME_FIELD = Str("Job name, unique in the workspace; generated when absent.", pattern=JOB_NAME_PATTERN,
                 pattern_hint=JOB_NAME_HINT)

COMMAND_JOB = Map({
    "$schema": Str("JSON Schema URL, for editors."),
    # Case-sensitive, as load_job's job-type lookup is ("Command" is an unsupported job type there).
    "type": Str("Job type; only command jobs are dtrain's.", enum=("command",)),
    "name": NAME_FIELD,
    "display_name": Str("Name shown in Studio."),
    "experiment_name": Str("Experiment the job is grouped under.", pattern=r"[A-Za-z0-9][A-Za-z0-9_.-]{0,255}",
                           pattern_hint="use letters, digits, '-', '_' and '.', starting with a letter or digit"),
    "description": Str(),
    "tags": DictField(Str(allow_null=True), "Free-form tags (strings: quote numbers and booleans)."),
    "properties": DictField(Str(allow_null=True), "Free-form properties (strings: quote numbers and booleans)."),
    "command": Str("Command run on each process; ${{inputs.x}} and ${{outputs.y}} are substituted."),
    "code": Str("Local folder or file uploaded as the code snapshot, or an azureml: code asset."),
    "environment": UnionField(Str("azureml:name:version, azureml:name@latest, azureml://registries/... or "
                             "file:path/to/environment.yml.", pattern=ENV_REF_PATTERN, pattern_hint=ENV_REF_HINT),
                         ENVIRONMENT,
                         doc="Where the command runs."),
    "environment_variables": DictField(EnvValue(), "Environment variables of every process (strings)."),
    "distribution": DISTRIBUTION,
    "compute": Str("Cluster name, azureml:name, an ARM id, or 'local'."),
    "resources": RESOURCES,
    "limits": Map({"timeout": Int("Maximum run time in seconds; the job is canceled after it.", min=1)},
                  "Job limits."),
    "queue_settings": Map({
        "job_tier": Str("Serverless tier.", enum=("null", "spot", "basic", "standard", "premium"), ci=True),
        "priority": Str("Priority in the queue.", enum=("low", "medium", "high"), ci=True),
    }, "Queueing of serverless jobs."),
    "services": SERVICES,
    "identity": IDENTITY,
    "inputs": DictField(InputField(), "Inputs by name: literals or assets.", key_pattern=r"[A-Za-z_][A-Za-z0-9_]*",
                   key_hint="input names are identifiers: letters, digits and '_'"),
    "outputs": DictField(OutputField(), "Outputs by name.", key_pattern=r"[A-Za-z_][A-Za-z0-9_]*",
                    key_hint="output names are identifiers: letters, digits and '_'"),
    "parent_job_name": Str("Parent job (pipelines)."),
}, "An Azure ML command job.", required=("command", "environment"), renamed={
    "process_count": "processes per node are `distribution.process_count_per_instance`",
    "instance_count": "the number of nodes is `resources.instance_count`",
    "instance_type": "the VM size is `resources.instance_type`",
    "timeout": "write `limits: {timeout: SECONDS}`",
    "environment_vars": "write `environment_variables:`",
    "env": "write `environment_variables:` for variables or `environment:` for the image",
})


# dtrain's own id: this schema is dtrain's reading of the command job, not Azure's published schema.
JSON_SCHEMA_ID = "urn:dtrain:schema:command-job"


def json_schema() -> dict:
    """JSON Schema draft-07 (what VS Code's YAML extension reads) of what `dtrain validate` accepts.
    An editor aid: validate stays the authority (it also checks references, paths and VM sizes)."""
    s = {"$schema": "http://json-schema.org/draft-07/schema#", "$id": JSON_SCHEMA_ID,
         "title": "Azure ML command job (as read by dtrain)"}
    s.update(COMMAND_JOB.json())
    return s


def field_rows(field=None, path: str = ""):
    """(dotted path, type, required, description) for every field: the docs' reference table."""
    field = COMMAND_JOB if field is None else field
    seen: set = set()
    out = []

    def walk(f, p):
        if isinstance(f, Map):
            for k, sub in f.fields.items():
                q = f"{p}.{k}" if p else k
                if q not in seen:
                    seen.add(q)
                    out.append((q, sub.describe(), k in f.required, sub.doc))
                walk(sub, q)
        elif isinstance(f, Tagged):
            for m in f.variants.values():
                walk(m, p)
        elif isinstance(f, DictField):
            walk(f.values, p + ".<name>")
        elif isinstance(f, UnionField):
            for a in f.alts:
                walk(a, p)

    walk(field, path)
    return out
