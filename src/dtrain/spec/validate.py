"""The one place a job spec is validated. Every problem is collected, each with file:line and a hint;
callers get a JobSpec only when there is no error.

Beyond Azure's schema this catches what Azure only reports after nodes are paid for: processes vs GPUs
of the VM size, InfiniBand for multi-node, references to inputs that do not exist, launchers that
multiply processes.
"""
from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

from ..errors import SpecError, UsageError
from . import overrides as _overrides
from .diagnostics import Collector
from .fields import did_you_mean
from .model import Distribution, JobSpec, is_remote_ref
from .schema import COMMAND_JOB, ENVIRONMENT
from .secrets import looks_secret
from .yamlload import load_text

# Other Azure ML YAML kinds, recognised by `type:` or by `$schema`, to say plainly what they are.
_OTHER_KINDS = {
    "pipeline": "a pipeline job", "sweep": "a sweep job", "spark": "a Spark job", "parallel": "a parallel job",
    "automl": "an AutoML job", "import": "an import job", "data_transfer": "a data-transfer job",
    "classification": "an AutoML job", "regression": "an AutoML job", "forecasting": "an AutoML job",
}
_SCHEMA_KINDS = {
    "pipelinejob": "a pipeline job", "sweepjob": "a sweep job", "sparkjob": "a Spark job",
    "commandcomponent": "a command component", "parallelcomponent": "a parallel component",
    "pipelinecomponent": "a pipeline component", "sparkcomponent": "a Spark component",
    "environment": "an environment", "data": "a data asset", "model": "a model", "compute": "a compute",
    "amlcompute": "a compute", "autoMLJob".lower(): "an AutoML job",
}

_REF = re.compile(r"\$\{\{\s*([A-Za-z_][\w.-]*)\s*\}\}")
_TORCH_LAUNCHERS = re.compile(r"(^|[\s;&|(])(torchrun|python[\d.]*\s+-m\s+torch\.distributed\.(launch|run))(\s|$)")
_MPI_LAUNCHERS = re.compile(r"(^|[\s;&|(])(mpirun|mpiexec)(\s|$)")


# Rules a user may waive for one job (--allow CODE): each guards against a job that runs badly or
# not at all although the body is one the service accepts. Schema, type, unknown-key, reference and
# path rules are not waivable: waiving them would send a body the SDK or the service refuses.
WAIVABLE = {
    "gpu-oversubscribed": "more processes per node than the VM size has GPUs",
    "double-launch": "torchrun / mpirun inside a job Azure ML already launches",
    "duplicate-key": "a key twice in one mapping with different values (YAML keeps the last)",
}


def check_allow(allow) -> frozenset:
    """The codes of --allow, checked: a UsageError (exit 2) naming the waivable codes for any other."""
    codes = frozenset(allow or ())
    bad = sorted(codes - WAIVABLE.keys())
    if bad:
        raise UsageError(f"--allow {', '.join(bad)}: not a rule that can be waived",
                         hint="waivable: " + ", ".join(sorted(WAIVABLE)) + " (schema, type and unknown-key "
                              "errors cannot be: the service would refuse the job)")
    return codes


def load_spec(path: str | os.PathLike, sets: list[str] | None = None, allow=None) -> tuple[JobSpec, list]:
    """Read, override, validate. Returns (spec, warnings+notes); raises SpecError with every diagnostic.

    allow: codes of WAIVABLE rules whose errors become warnings saying they were waived."""
    allowed = check_allow(allow)
    p = Path(path)
    c = Collector(file=str(path))
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file", hint="give the path of a job YAML, e.g. job.yml") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a job YAML", hint="give the path of a job YAML") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    return validate_text(raw, c, base_dir=p.resolve().parent, source=p, sets=sets, allow=allowed)


def validate_text(raw, c: Collector, *, base_dir: Path, source: Path | None = None, sets=None, allow=()):
    loaded = load_text(raw, c)
    if loaded is None:
        raise SpecError(c.sorted())
    c.locations.update(loaded.locations)
    data = loaded.data  # freshly built by the loader: ours to override and normalise in place
    _overrides.apply(data, sets or [], c.locations, c)
    if not _check_kind(data, c):
        raise SpecError(c.sorted())
    _check_preview_shapes(data, c)
    COMMAND_JOB.check(data, (), c)
    _apply_coercions(data, c.coercions)
    # Semantic checks run even when the schema found errors, so every problem is reported at once;
    # they read values through _dict/_int and skip what has the wrong shape (already reported).
    _check_semantics(data, c, base_dir)
    _waive(c, check_allow(allow))
    if c.errors:
        raise SpecError(c.sorted())
    spec = JobSpec(data=data, base_dir=base_dir, source=source, locations=dict(c.locations))
    return spec, c.sorted()


def _waive(c: Collector, allow: frozenset) -> None:
    """Errors of waived rules become warnings that say so (and name the flag that waived them)."""
    if not allow:
        return
    c.items = [replace(d, severity="warning", message=f"{d.message} (waived by --allow {d.code})")
               if d.severity == "error" and d.code in allow else d for d in c.items]


def _apply_coercions(data: dict, coercions) -> None:
    for path, value in coercions:
        node = data
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value


def _check_kind(data: dict, c: Collector) -> bool:
    schema = str(data.get("$schema", ""))
    m = re.search(r"/([A-Za-z]+)\.schema\.json", schema)
    kind = _SCHEMA_KINDS.get(m.group(1).lower()) if m else None
    t = data.get("type")
    if kind is None and isinstance(t, str) and t.lower() in _OTHER_KINDS:
        kind = _OTHER_KINDS[t.lower()]
    if kind is None and "jobs" in data and isinstance(data.get("jobs"), dict):
        kind = "a pipeline job"
    if kind is None and "dependencies" in data and "command" not in data:
        kind = "a conda environment file"
    if kind:
        c.error(("type",) if "type" in data else (), f"this is {kind}, not a command job",
                hint="dtrain validates, renders and runs Azure ML command jobs (type: command); "
                     "use `az ml` for other kinds", code="not-command-job")
        return False
    return True


def _check_preview_shapes(data: dict, c: Collector) -> None:
    comp = data.get("compute")
    if isinstance(comp, dict):
        keys = ", ".join(map(str, comp))
        c.error(("compute",), f"`compute` is a name now, not a block ({keys})",
                hint="write `compute: azureml:<cluster>` and move instance_count to `resources: {instance_count: N}`",
                code="renamed-key")
        data.pop("compute")
        if "instance_count" in comp and "resources" not in data:
            data["resources"] = {"instance_count": comp["instance_count"]}


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _int(v, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _check_semantics(data: dict, c: Collector, base_dir: Path) -> None:
    _check_refs(data, c)
    _check_paths(data, c, base_dir)
    _check_launchers(data, c)
    _check_distribution(data, c)
    _check_secrets(data, c)


def _check_refs(data: dict, c: Collector) -> None:
    declared = {"inputs": _dict(data.get("inputs")), "outputs": _dict(data.get("outputs"))}
    add_hint = {"inputs": "add `inputs: {{{name}: ...}}` or fix the name",
                "outputs": "add `outputs: {{{name}: {{type: uri_folder}}}}`"}
    command = data.get("command")
    cmd = command if isinstance(command, str) else ""
    for m in _REF.finditer(cmd):
        ref = m.group(1)
        parts = ref.split(".")
        if parts[0] in declared and len(parts) == 2:
            kind, name = parts
            if name not in declared[kind]:
                dym = did_you_mean(name, declared[kind])
                c.error(("command",), f"`${{{{{kind}.{name}}}}}` names no {kind[:-1]}",
                        hint=(f"did you mean `${{{{{kind}.{dym}}}}}`?" if dym else
                              add_hint[kind].format(name=name)), code="undefined-ref")
        elif parts[0] == "search_space":
            c.error(("command",), f"`${{{{{ref}}}}}` belongs to sweep jobs", code="undefined-ref",
                    hint="a command job has no search space; use an input")
        elif parts[0] not in declared:
            c.error(("command",), f"`${{{{{ref}}}}}` is not a reference Azure ML resolves",
                    hint="write ${{inputs.NAME}} or ${{outputs.NAME}}", code="undefined-ref")


def _check_paths(data: dict, c: Collector, base_dir: Path) -> None:
    _check_code_path(data.get("code"), c, base_dir)
    env = data.get("environment")
    env_dir = base_dir
    if isinstance(env, str) and env.startswith("file:"):
        env, env_dir = _environment_file(env, c, base_dir)
    if isinstance(env, dict):
        _check_environment_paths(env, c, env_dir)
    for name, v in _dict(data.get("inputs")).items():
        if isinstance(v, dict) and isinstance(v.get("path"), str) and not is_remote_ref(v["path"]):
            _check_input_path(name, v, c, base_dir)


def _check_code_path(code, c: Collector, base_dir: Path) -> None:
    if not isinstance(code, str) or is_remote_ref(code):
        return
    local = code[5:] if code.startswith("file:") else code
    if not (base_dir / local).exists():
        c.error(("code",), f"code folder '{code}' does not exist (relative to {base_dir})",
                hint="`code` is resolved against the spec's folder; fix the path or create it",
                code="missing-path")


def _check_environment_paths(env: dict, c: Collector, base_dir: Path) -> None:
    """An inline environment (or one read from file:, whose paths are relative to its own folder)."""
    cf = env.get("conda_file")
    if isinstance(cf, str) and not is_remote_ref(cf) and not (base_dir / cf).is_file():
        c.error(("environment", "conda_file"), f"conda file '{cf}' does not exist", code="missing-path",
                hint="the path is relative to the spec's folder")
    b = env.get("build") or {}
    bp = b.get("path") if isinstance(b, dict) else None
    if isinstance(bp, str) and not is_remote_ref(bp) and not (base_dir / bp).exists():
        c.error(("environment", "build", "path"), f"build context '{bp}' does not exist",
                code="missing-path", hint="the path is relative to the spec's folder")
    if not env.get("image") and not env.get("build"):
        c.error(("environment",), "an inline environment needs `image:` or `build:`", code="required",
                hint="e.g. image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04")


def _check_input_path(name: str, v: dict, c: Collector, base_dir: Path) -> None:
    p = v["path"]
    local = p[5:] if p.startswith("file:") else p
    if not (base_dir / local).exists():
        # A warning, not an error: Azure's SDK accepts the spec and fails only at upload.
        c.warning(("inputs", name, "path"), f"input '{name}': local path '{p}' does not exist; "
                  "submitting will fail to upload it",
                  hint="fix the path, or use azureml:NAME:VERSION", code="missing-path")
    elif str(v.get("type", "uri_folder")).lower() == "uri_file" and (base_dir / local).is_dir():
        c.error(("inputs", name, "path"), f"input '{name}' is type uri_file but '{p}' is a folder",
                hint="use `type: uri_folder`", code="type")


def _environment_file(ref: str, c: Collector, base_dir: Path):
    """Check an `environment: file:PATH` YAML; returns (its mapping or None, its folder)."""
    path = (base_dir / ref[len("file:"):]).resolve()
    if not path.is_file():
        c.error(("environment",), f"environment file '{ref[5:]}' does not exist", code="missing-path",
                hint="the path is relative to the spec's folder")
        return None, base_dir
    sub = Collector(file=str(path))
    loaded = load_text(path.read_bytes(), sub)
    if loaded is not None:
        sub.locations.update(loaded.locations)
        ENVIRONMENT.check(loaded.data, (), sub)
    for d in sub.items:  # report the environment file's own problems at its own lines
        c.items.append(d)
    return (loaded.data if loaded is not None and not sub.errors else None), path.parent


def _check_launchers(data: dict, c: Collector) -> None:
    d = _dict(data.get("distribution"))
    command = data.get("command")
    cmd = command if isinstance(command, str) else ""
    kind = str(d.get("type", "")).lower()
    ppn = _int(d.get("process_count_per_instance"), 1)
    if kind == "pytorch" and ppn > 1 and _TORCH_LAUNCHERS.search(cmd):
        c.error(("command",), f"the command starts a launcher (torchrun / torch.distributed) and "
                f"process_count_per_instance is {ppn}: each of the {ppn} processes Azure starts would launch "
                f"its own workers", code="double-launch",
                hint="either drop the launcher from `command` (Azure sets RANK/WORLD_SIZE for you), or set "
                     "process_count_per_instance: 1 and let the launcher start one process per GPU")
    if kind == "mpi" and _MPI_LAUNCHERS.search(cmd):
        c.error(("command",), "the command calls mpirun, and Azure ML already runs the command under mpirun",
                hint="remove mpirun from `command`; set distribution.process_count_per_instance instead",
                code="double-launch")


def _check_distribution(data: dict, c: Collector) -> None:
    from . import vmsizes  # stdlib-only table; imported here so a plain schema check stays minimal

    res = _dict(data.get("resources"))
    d = _dict(data.get("distribution"))
    kind = str(d.get("type", "")).lower()
    nodes = _int(res.get("instance_count"), 1)
    if kind == "tensorflow":
        procs = Distribution("tensorflow", worker_count=_int(d.get("worker_count"), nodes),
                             parameter_server_count=_int(d.get("parameter_server_count"), 0)).process_count(nodes)
        if procs < nodes:
            c.warning(("distribution", "worker_count"), f"{procs} worker and parameter-server processes on "
                      f"{nodes} nodes: {nodes - procs} node(s) would run nothing",
                      hint="raise worker_count or lower resources.instance_count", code="idle-nodes")
    size_name = res.get("instance_type")
    if not isinstance(size_name, str) or (str(data.get("compute", "")).lower() == "local"):
        return
    size = vmsizes.lookup(size_name)
    if size is None:
        sugg = vmsizes.suggest(size_name)
        c.note(("resources", "instance_type"), f"'{size_name}' is not a GPU size dtrain knows; "
               "processes vs GPUs not checked",
               hint=(f"did you mean '{sugg[0]}'?" if sugg else "see docs/vm-sizes.md for the sizes dtrain knows"),
               code="unknown-size")
        return
    if kind in ("pytorch", "mpi"):
        ppn = _int(d.get("process_count_per_instance"), 1)
        where = ("distribution", "process_count_per_instance") if "process_count_per_instance" in d else ("distribution",)
        if ppn > size.gpus:
            c.error(where, f"{ppn} processes per node but {size.name} has {size.gpus} GPU"
                    f"{'s' if size.gpus != 1 else ''}: processes would share GPUs or fail to find one",
                    hint=f"set process_count_per_instance: {size.gpus}", code="gpu-oversubscribed")
        elif ppn < size.gpus:
            c.warning(where, f"{ppn} process{'es' if ppn != 1 else ''} per node on {size.name} with "
                      f"{size.gpus} GPUs: {size.gpus - ppn} GPU(s) per node sit idle",
                      hint=f"set process_count_per_instance: {size.gpus} (one per GPU)", code="idle-gpus")
    if nodes > 1 and kind in ("pytorch", "mpi", "tensorflow") and not size.infiniband:
        c.warning(("resources", "instance_count"), f"{nodes} nodes of {size.name}, which has no InfiniBand: "
                  "gradients cross Ethernet and scaling suffers",
                  hint="for multi-node training use an InfiniBand size (the 'r' sizes, e.g. Standard_ND96isr_H100_v5)",
                  code="no-infiniband")


def _check_secrets(data: dict, c: Collector) -> None:
    for k, v in _dict(data.get("environment_variables")).items():
        if isinstance(k, str) and looks_secret(k) and isinstance(v, str) and v and not v.startswith("${{"):
            # Named by key only: the value must not reach a terminal or CI log (redact hides the source line).
            c.warning(("environment_variables", k), f"environment variable '{k}' looks like a secret written "
                      "into the spec: it is stored with the job and shown in Studio",
                      hint="read secrets at run time from Key Vault or a workspace connection", code="secret",
                      redact=True)
