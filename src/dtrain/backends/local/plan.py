"""LocalPlan: what `submit --local` runs, as a value.

Building a plan is pure: no file is written, no socket opened, no process started, so `render --local`
prints the same plan every time. What only submit can choose is left as a placeholder that reads as
such: each port (`<port i, chosen at submit>`, see env.py) and a name Azure-style generated when neither
the spec nor --name gives one (NAME_PLACEHOLDER). `LocalBackend.submit` names the plan, checks the
tools it needs (Open MPI's mpirun), picks free ports and fills them in (`named`, `bind`); the plan.json
it writes is the plan the supervisor runs, ports included.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...spec.model import JobSpec, RankSlot, is_remote_ref, layout
from ..base import SubmitOptions
from . import env as _env
from . import interpreter, jobenv
from .mlflowstore import mlflow_env
from .store import datastore_path, dtrain_home, jobs_root, valid_name

# The job name in a plan built without one; submit generates the name (as Azure does) and fills it in.
NAME_PLACEHOLDER = "<name, generated at submit>"

# The most processes one local job may start, whatever the machine (see process_cap()).
MAX_LOCAL_PROCESSES = 4096
PID_MAX_FILE = "/proc/sys/kernel/pid_max"

MPI_INSTALL_HINT = "install Open MPI: `apt-get install -y openmpi-bin` (Debian/Ubuntu) or `dnf install openmpi`"

_REF = re.compile(r"\$\{\{\s*(inputs|outputs)\.([A-Za-z_][\w-]*)\s*\}\}")
_OPTIONAL = re.compile(r"\$\[\[(.*?)\]\]", re.S)


@dataclass
class LocalProcess:
    """One OS process the supervisor starts."""

    argv: list
    env: dict                  # added on top of the submitting shell's environment (ports as placeholders
                               # until submit fills them in)
    cwd: str
    log: str                   # relative to the job folder
    rank: int | None = None    # global rank; None for the mpirun launcher
    node: int | None = None
    local_rank: int | None = None
    role: str = "process"      # process | worker | ps | launcher

    def to_dict(self) -> dict:
        return {"rank": self.rank, "node": self.node, "local_rank": self.local_rank, "role": self.role,
                "argv": list(self.argv), "cwd": self.cwd, "log": self.log, "env": dict(self.env)}

    @classmethod
    def from_dict(cls, p: dict) -> "LocalProcess":
        return cls(argv=list(p["argv"]), env=dict(p["env"]), cwd=p["cwd"], log=p["log"], rank=p.get("rank"),
                   node=p.get("node"), local_rank=p.get("local_rank"), role=p.get("role", "process"))


@dataclass
class LocalPlan:
    name: str
    job_dir: str
    framework: str             # pytorch | tensorflow | mpi | none
    nodes: int
    processes_per_node: int
    command: str               # after ${{inputs.*}} / ${{outputs.*}} substitution
    processes: list            # [LocalProcess]
    ranks: list                # [{"rank", "node", "local_rank", "role", "log"}]: one per rank (log source)
    n_ports: int = 0
    ports: list = field(default_factory=list)     # empty until submit picks them (bind): then the ports the
                                                  # processes got, already filled into their env
    code: str | None = None    # the local code folder/file copied into snapshot/
    inputs: dict = field(default_factory=dict)    # name -> literal or absolute local path
    outputs: dict = field(default_factory=dict)   # name -> absolute path in the job folder
    output_dirs: list = field(default_factory=list)
    timeout: int | None = None
    experiment_name: str | None = None
    display_name: str | None = None
    tags: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    spec_source: str | None = None
    python_link: str | None = None   # --python: the interpreter job_dir/bin/python links to (made at submit)
    job_env: dict | None = None      # the job's own environment (jobenv.JobEnv), built at submit when missing
    backend: str = "local"
    instance_type: str | None = None       # resources.instance_type, as Azure ML would run it (dtrain why)
    preempt_after_s: float | None = None   # --preempt-after: the eviction drill (eviction.py)

    def to_dict(self) -> dict:
        """The plan as JSON: what `render --local` prints (placeholders and all) and, once submit has
        filled them in, the job's plan.json."""
        return {
            "backend": self.backend, "name": self.name, "job_dir": self.job_dir, "framework": self.framework,
            "nodes": self.nodes, "processes_per_node": self.processes_per_node, "command": self.command,
            "processes": [p.to_dict() for p in self.processes],
            "ranks": copy.deepcopy(self.ranks), "n_ports": self.n_ports, "ports": list(self.ports),
            "code": self.code, "inputs": dict(self.inputs), "outputs": dict(self.outputs),
            "output_dirs": list(self.output_dirs), "timeout": self.timeout,
            "experiment_name": self.experiment_name, "display_name": self.display_name,
            "tags": dict(self.tags), "notes": list(self.notes), "spec_source": self.spec_source,
            "python_link": self.python_link, "job_env": copy.deepcopy(self.job_env),
            # only when set: the plan hash (and so resubmits) of every job without them stays as it was
            **{k: v for k, v in (("instance_type", self.instance_type), ("preempt_after_s", self.preempt_after_s))
               if v is not None},
        }

    def plan_hash(self) -> str:
        """Identity of the job for idempotent resubmits: everything but the notes, of the named plan
        before its ports are picked (so it does not change with the ports a submit happened to get)."""
        d = self.to_dict()
        for k in ("ports", "notes"):
            d.pop(k, None)
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()

    @property
    def is_named(self) -> bool:
        return self.name != NAME_PLACEHOLDER

    def port_names(self) -> list[str]:
        """What each port is for, in port order: MASTER_PORT (pytorch), AZ_BATCH_MASTER_NODE (mpi), or
        the TensorFlow task whose TF_CONFIG address it is (`worker i`, `ps i`; workers first)."""
        if self.framework == "pytorch":
            names = ["MASTER_PORT"]
        elif self.framework == "mpi":
            names = ["AZ_BATCH_MASTER_NODE"]
        elif self.framework == "tensorflow":
            workers = sum(1 for r in self.ranks if r.get("role") == "worker")
            names = [f"worker {i}" if i < workers else f"ps {i - workers}" for i in range(len(self.ranks))]
        else:
            names = []
        return (names + [f"port {i}" for i in range(len(names), self.n_ports)])[:self.n_ports]

    def named(self, name: str) -> "LocalPlan":
        """This plan under `name` (a plan built without a name has NAME_PLACEHOLDER everywhere it goes)."""
        if not valid_name(name):
            raise UsageError(f"job name '{name}' is not valid",
                             hint="use letters, digits, '_' and '-' (starting with a letter or digit), at most 255")
        if self.is_named:
            if name != self.name:
                raise ValueError(f"plan '{self.name}' is already named")
            return self
        d = _map_strings(self.to_dict(), lambda s: s.replace(NAME_PLACEHOLDER, name))
        return LocalPlan.from_dict(d)

    def bind(self, ports: list, mpirun: str | None = None) -> "LocalPlan":
        """The plan as it runs: `ports` filled into every process (argv and env), and mpirun (the
        launcher's argv[0]) as the path submit checked. Nothing else changes."""
        if len(ports) != self.n_ports:
            raise ValueError(f"the plan needs {self.n_ports} ports, not {len(ports)}")
        d = self.to_dict()
        d["processes"] = _map_strings(d["processes"], lambda s: _env.render_ports(s, ports))
        if mpirun:
            for p in d["processes"]:
                if p["role"] == "launcher":
                    p["argv"][0] = mpirun
        d["ports"] = list(ports)
        return LocalPlan.from_dict(d)

    @property
    def bound(self) -> bool:
        """Whether every port is filled in (a plan from plan.json written by submit is)."""
        return len(self.ports) == self.n_ports

    @classmethod
    def from_dict(cls, d: dict) -> "LocalPlan":
        procs = [LocalProcess.from_dict(p) for p in d["processes"]]
        kw: dict[str, Any] = {k: d.get(k) for k in ("name", "job_dir", "framework", "nodes", "processes_per_node", "command",
                                    "ranks", "n_ports", "ports", "code", "inputs", "outputs", "output_dirs",
                                    "timeout", "experiment_name", "display_name", "tags", "notes", "spec_source",
                                    "python_link", "instance_type", "preempt_after_s", "job_env")}
        for k in ("inputs", "outputs", "tags"):
            kw[k] = kw[k] or {}
        for k in ("ports", "notes", "output_dirs"):
            kw[k] = kw[k] or []
        return cls(processes=procs, **kw)


def _map_strings(obj, fn):
    """obj (JSON-like) with fn applied to every string in it, keys included."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {_map_strings(k, fn): _map_strings(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_strings(v, fn) for v in obj]
    return obj


def _literal(v) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    return "" if v is None else str(v)


def _resolve_inputs(spec: JobSpec, options: SubmitOptions, home: Path | None = None) -> dict:
    inputs = spec.inputs
    mapped = dict(options.input_paths or {})
    unknown = sorted(set(mapped) - set(inputs))
    if unknown:
        raise UsageError(f"--input {unknown[0]}=...: the spec has no input named '{unknown[0]}'",
                         hint=("inputs are: " + ", ".join(sorted(inputs))) if inputs else "the spec has no inputs")
    out = {}
    for name, inp in inputs.items():
        if name in mapped:
            p = Path(str(mapped[name])).expanduser()
            p = (Path.cwd() / p).resolve() if not p.is_absolute() else p.resolve()
            if not p.exists():
                raise UsageError(f"--input {name}={mapped[name]}: no such file or folder")
            out[name] = str(p)
            continue
        if inp.is_literal:
            out[name] = _literal(inp.value)
            continue
        path = inp.path
        if not path:
            raise UsageError(f"input '{name}' has no path", hint=f"give one locally with --input {name}=PATH")
        ds = datastore_path(path, home)
        if ds is not None and ds.exists():  # written by an earlier local job
            out[name] = str(ds)
            continue
        if is_remote_ref(path) or path.lower().startswith(("azureml", "wasb", "abfs", "adl:", "s3:", "gs:")):
            hint = f"map it to a local copy: dtrain submit ... --local --input {name}=/path/to/local/data"
            if ds is not None:
                hint += f", or let a local job write it first (it is kept at {ds})"
            raise UsageError(
                f"input '{name}' ({path}) can only be resolved by Azure ML; the local backend cannot read it",
                hint=hint)
        local = path[len("file:"):] if path.startswith("file:") else path
        if local.startswith("//"):
            local = local[1:]
        p = (spec.base_dir / local).resolve()
        if not p.exists():
            raise UsageError(f"input '{name}': local path '{path}' does not exist (resolved to {p})",
                             hint=f"fix the path, or map it with --input {name}=PATH")
        out[name] = str(p)
    return out


def _substitute(text: str, inputs: dict, outputs: dict) -> str:
    def opt(m):
        refs = _REF.findall(m.group(1))
        present = all((kind == "inputs" and n in inputs) or (kind == "outputs" and n in outputs) for kind, n in refs)
        return m.group(1) if present else ""

    text = _OPTIONAL.sub(opt, text)

    def one(m):
        kind, n = m.group(1), m.group(2)
        table = inputs if kind == "inputs" else outputs
        if n not in table:
            raise UsageError(f"`${{{{{kind}.{n}}}}}` names no {kind[:-1]} of this job")
        return table[n]

    return _REF.sub(one, text)


def check_mpirun() -> str:
    """The path of Open MPI's mpirun, or a UsageError (exit 2). Runs `mpirun --version`: submit calls it,
    before anything is written or started; building a plan never does."""
    exe = shutil.which("mpirun")
    if not exe:
        raise UsageError("distribution type mpi runs under mpirun, and mpirun is not installed here",
                         hint=MPI_INSTALL_HINT)
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"mpirun ({exe}) does not run: {exc}", hint=MPI_INSTALL_HINT) from None
    if "Open MPI" not in out and "OpenRTE" not in out:
        first = (out.strip().splitlines() or ["unknown"])[0]
        raise UsageError(f"the local MPI backend needs Open MPI's mpirun; {exe} is '{first}'",
                         hint=MPI_INSTALL_HINT)
    return exe


def process_cap() -> tuple[int, str]:
    """How many processes a local job may start here, and what sets that number: MAX_LOCAL_PROCESSES, or
    half of the kernel's pid_max or of this user's process limit (RLIMIT_NPROC) when that is lower, so a
    job never exhausts the pids the rest of the machine needs."""
    caps = [(MAX_LOCAL_PROCESSES, "dtrain's limit for one local job")]
    try:
        pid_max = int(Path(PID_MAX_FILE).read_text().split()[0])
        caps.append((pid_max // 2, f"half of this machine's pid_max ({pid_max})"))
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            caps.append((soft // 2, f"half of this user's process limit (ulimit -u: {soft})"))
    except (ImportError, OSError, ValueError):
        pass
    return min(caps)


def check_process_count(spec: JobSpec) -> None:
    """Refuse (exit 2), before laying anything out, a job with more processes than this machine can hold."""
    d = spec.distribution
    if d is not None and d.type == "ray":
        return
    n = spec.process_count
    cap, why = process_cap()
    if n > cap:
        raise UsageError(f"this job would start {n} processes on this machine; a local job may start at most "
                         f"{cap} ({why})",
                         hint="lower resources.instance_count or the processes per instance for a local run, "
                              "or run it on Azure ML (drop --local / compute: local)")


def build_plan(spec: JobSpec, options: SubmitOptions, home: Path | None = None) -> LocalPlan:
    """The local plan of `spec`: pure (see the module's docstring), and every error bad input can cause
    (names, process cap, ray, remote inputs or code) is raised here, so `render --local` reports it."""
    name = _job_name(spec, options)
    job_dir = jobs_root(home) / name
    d = spec.distribution
    kind = d.type if d else "none"
    nodes = spec.instance_count
    check_process_count(spec)

    inputs = _resolve_inputs(spec, options, home)
    outputs, output_dirs = _resolve_outputs(spec, name, job_dir, home)
    command = _substitute(spec.command, inputs, outputs)
    experiment = options.experiment_name or spec.data.get("experiment_name")
    env = _process_env(spec, name, str(job_dir), experiment, inputs, outputs)
    job_env = _job_env(spec, options, home)
    python = interpreter.choose(str(job_dir), options.python, env.get("PATH"), job_env.bin if job_env else None)
    if python.path is not None:
        env["PATH"] = python.path
    if job_env is not None:
        env["VIRTUAL_ENV"] = job_env.path

    slots = layout(d, nodes)   # rank, node, local rank and role of every process (spec/model.py)
    ppn = d.processes_per_node(nodes) if d else 1
    procs = _Processes(env=env, cwd=str(job_dir / "snapshot"), command=command)
    n_ports = _lay_out(procs, kind, d, slots, nodes, ppn, job_dir)

    notes = [job_env.note()] if job_env else _environment_notes(spec, python)
    code = _local_code(spec)

    return LocalPlan(
        name=name, job_dir=str(job_dir), framework=kind, nodes=nodes,
        processes_per_node=ppn,
        command=command, processes=procs.processes, ranks=procs.ranks, n_ports=n_ports, ports=[],
        code=code, inputs=inputs, outputs=outputs,
        output_dirs=sorted(set(output_dirs)), timeout=spec.timeout,
        experiment_name=experiment,
        display_name=spec.data.get("display_name"),
        tags={**(spec.data.get("tags") or {}), **(options.tags or {})}, notes=notes,
        spec_source=str(spec.source) if spec.source else None, python_link=python.link,
        instance_type=spec.instance_type, preempt_after_s=options.preempt_after_s,
        job_env=job_env.to_dict() if job_env else None,
    )


def _job_env(spec: JobSpec, options: SubmitOptions, home: Path | None):
    """The job's own environment (from its conda file), unless an interpreter was chosen: --python,
    DTRAIN_LOCAL_PYTHON, or --host-python (the host's, as before environments were built)."""
    if options.host_python or options.python or interpreter.chosen_by_setting():
        return None
    return jobenv.describe(spec, (home or dtrain_home()) / "envs")


def _job_name(spec: JobSpec, options: SubmitOptions) -> str:
    """--name, else the spec's name, else NAME_PLACEHOLDER (submit generates one, as Azure does). A bad
    name is refused here, so `render --local` reports it too."""
    name = options.name or spec.name
    if name is not None and not valid_name(name):
        raise UsageError(f"job name '{name}' is not valid",
                         hint="use letters, digits, '_' and '-' (starting with a letter or digit), at most 255")
    return name or NAME_PLACEHOLDER


def _resolve_outputs(spec: JobSpec, name: str, job_dir: Path, home: Path | None) -> tuple[dict, list]:
    """Where each output is written (name -> path), and the folders the supervisor creates for them. A
    fixed datastore path is shared across local jobs, as on Azure (a later job can read it); any other
    output lives in the job's own folder."""
    outputs, output_dirs = {}, []
    for oname, o in spec.outputs.items():
        ds = datastore_path(o.path, home, name) if o.path else None
        if ds is not None:
            outputs[oname] = str(ds)
            output_dirs.append(str(ds if o.type != "uri_file" else ds.parent))
        elif o.type == "uri_file":
            outputs[oname] = str(job_dir / "outputs" / oname)
            output_dirs.append(str(job_dir / "outputs"))
        else:
            outputs[oname] = str(job_dir / "outputs" / oname)
            output_dirs.append(outputs[oname])
    return outputs, output_dirs


def _process_env(spec: JobSpec, name: str, job_dir: str, experiment: str | None, inputs: dict,
                 outputs: dict) -> dict:
    """The variables every process gets: Azure ML's (run id, node count, MLflow, one per input and
    output), then the spec's environment_variables (refs resolved), which win. Python's output is
    unbuffered unless the spec or the submitting shell says otherwise, so logs show lines as they come."""
    common = {"AZUREML_RUN_ID": name, "AZUREML_NODE_COUNT": str(spec.instance_count)}
    # Azure ML's MLflow variables, pointing at the job's own store (mlflowstore.py): metrics logged
    # with mlflow in any rank land in the job's one run, as on Azure
    common.update(mlflow_env(job_dir, name, experiment))
    for k, v in inputs.items():
        common[f"AZURE_ML_INPUT_{k}"] = v
    for k, v in outputs.items():
        common[f"AZURE_ML_OUTPUT_{k}"] = v
    user_env = {k: _substitute(v, inputs, outputs) for k, v in spec.environment_variables.items()}
    if "PYTHONUNBUFFERED" not in user_env and "PYTHONUNBUFFERED" not in os.environ:
        common["PYTHONUNBUFFERED"] = "1"
    return {**common, **user_env}


@dataclass
class _Processes:
    """What laying out a plan collects: the processes the supervisor starts, and one record per rank
    (where it sits and logs; under mpirun the ranks are not processes of the plan, but still logged)."""

    env: dict                  # what every process gets (_process_env)
    cwd: str
    command: str
    processes: list = field(default_factory=list)
    ranks: list = field(default_factory=list)

    def add_rank(self, s: RankSlot, extra: dict) -> None:
        """A rank the supervisor starts itself: `bash -c command`, with its slot's variables (`extra`)."""
        env = {**self.env, "AZ_BATCHAI_TASK_INDEX": str(s.node), **extra}
        self.processes.append(LocalProcess(argv=["bash", "-c", self.command], env=env, cwd=self.cwd,
                                           log=_env.log_name(s.rank), rank=s.rank, node=s.node,
                                           local_rank=s.local_rank, role=s.role))
        self.record_rank(s)

    def record_rank(self, s: RankSlot) -> None:
        """Where rank `s` sits and which file holds its output (what `logs` and failures read)."""
        self.ranks.append({"rank": s.rank, "node": s.node, "local_rank": s.local_rank, "role": s.role,
                           "log": _env.log_name(s.rank)})


def _lay_out(procs: _Processes, kind: str, d, slots: list, nodes: int, ppn: int, job_dir: Path) -> int:
    """Add every process of the job to `procs`, with the variables its framework expects; returns how
    many ports they need (filled in at submit)."""
    if kind == "pytorch":
        for s in slots:
            procs.add_rank(s, _env.pytorch_env(rank=s.rank, node=s.node, local_rank=s.local_rank, nodes=nodes,
                                               ppn=ppn))
        return 1
    if kind == "tensorflow":
        workers = d.workers(nodes)
        for s in slots:
            index = s.rank if s.role == "worker" else s.rank - workers
            procs.add_rank(s, {"TF_CONFIG": _env.tf_config(workers=workers, ps=len(slots) - workers, role=s.role,
                                                           index=index)})
        return len(slots)
    if kind == "mpi":
        _lay_out_mpi(procs, slots, ppn, job_dir)
        return 1
    if kind == "ray":
        raise UsageError("distribution type ray is not supported by the local backend",
                         hint="run it on Azure ML (drop --local / compute: local), or start ray yourself in `command`")
    for s in slots:       # Azure runs a non-distributed command once on every node
        procs.add_rank(s, {})
    return 0


def _lay_out_mpi(procs: _Processes, slots: list, ppn: int, job_dir: Path) -> None:
    """One process, mpirun, which starts the ranks itself (each wrapped to log to its own file); the
    plan still records where each rank sits and logs."""
    argv = ["mpirun"]               # submit checks it is Open MPI's and puts its path here
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += ["--oversubscribe", "--bind-to", "none", "-np", str(len(slots)),
             "bash", "-c", _env.MPI_RANK_WRAPPER, "dtrain-rank", str(ppn), str(job_dir / "user_logs"), procs.command]
    env = {**procs.env, **_env.mpi_launcher_env()}
    procs.processes.append(LocalProcess(argv=argv, env=env, cwd=procs.cwd, log="system_logs/launcher.txt",
                                        role="launcher"))
    for s in slots:
        procs.record_rank(s)


def _environment_notes(spec: JobSpec, python: "interpreter.Interpreter") -> list:
    """What the user should know runs differently here: the spec's environment is not used (no Docker), and
    which python the command's `python` is."""
    return [interpreter.note(spec.environment_label if spec.environment else None, python)]


def _local_code(spec: JobSpec) -> str | None:
    """The local code folder/file to snapshot, or None without one; remote code is an error here, since
    a local job cannot fetch it."""
    code_src = spec.code_path()
    if spec.code and code_src is None:
        raise UsageError(f"code '{spec.code}' is remote; the local backend needs a local code folder",
                         hint="point `code:` at a local folder")
    return str(code_src) if code_src else None
