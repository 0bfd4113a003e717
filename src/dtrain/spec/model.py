"""A validated job spec as typed values. Built only from data the validator has accepted."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


LOCAL_COMPUTE = "local"


def compute_name(ref) -> str | None:
    """The compute's name in any of the ways a job names it: "azureml:gpu-cluster", "gpu-cluster", or its ARM
    id (".../computes/gpu-cluster", as the service writes computeId)."""
    return str(ref).rstrip("/").rsplit("/", 1)[-1].removeprefix("azureml:") if ref else None


@dataclass(frozen=True)
class Distribution:
    """How Azure ML starts processes on the job's nodes. The one place that counts them: validation,
    the local plan and the job's shape all ask here."""

    type: str                                   # "pytorch" | "tensorflow" | "mpi" | "ray"
    process_count_per_instance: int | None = None
    worker_count: int | None = None
    parameter_server_count: int = 0

    def workers(self, nodes: int) -> int:
        """TensorFlow workers: worker_count, one per node by default."""
        return self.worker_count or nodes

    def process_count(self, nodes: int) -> int:
        """Processes (ranks, or TensorFlow tasks: workers + parameter servers) in the whole job."""
        if self.type in ("pytorch", "mpi"):
            return nodes * (self.process_count_per_instance or 1)
        if self.type == "tensorflow":
            return self.workers(nodes) + (self.parameter_server_count or 0)
        return nodes

    def processes_per_node(self, nodes: int) -> int:
        """Processes on each node. TensorFlow tasks are spread evenly over the nodes, so a node holds
        ceil(tasks / nodes) of them (task k sits on node k // that)."""
        if self.type in ("pytorch", "mpi"):
            return self.process_count_per_instance or 1
        if self.type == "tensorflow":
            return max(1, -(-self.process_count(nodes) // max(1, nodes)))
        return 1


@dataclass(frozen=True)
class RankSlot:
    """Where one process of a job sits: its global rank, node, rank on that node, and role."""

    rank: int
    node: int
    local_rank: int
    role: str        # "process" (pytorch, none), "rank" (mpi), "worker" or "ps" (tensorflow)


def layout(distribution: Distribution | None, nodes: int) -> list[RankSlot]:
    """Every process of a job, in rank order, for every distribution type: the one place that lays out
    ranks (the local plan starts them there; Azure ML starts them the same way)."""
    kind = distribution.type if distribution else "none"
    if kind in ("pytorch", "mpi"):
        assert distribution is not None
        ppn = distribution.processes_per_node(nodes)
        role = "process" if kind == "pytorch" else "rank"
        return [RankSlot(n * ppn + lr, n, lr, role) for n in range(nodes) for lr in range(ppn)]
    if kind == "tensorflow":
        assert distribution is not None
        workers, total = distribution.workers(nodes), distribution.process_count(nodes)
        ppn = distribution.processes_per_node(nodes)
        return [RankSlot(i, i // ppn, i % ppn, "worker" if i < workers else "ps") for i in range(total)]
    return [RankSlot(n, n, 0, "process") for n in range(nodes)]   # a plain command runs once per node


@dataclass(frozen=True)
class InputSpec:
    name: str
    type: str                     # "literal" or an asset type (uri_folder, uri_file, mltable, *_model)
    value: object = None          # the literal value (literal inputs)
    path: str | None = None       # asset path as written (local path, azureml:..., URL)
    mode: str | None = None

    @property
    def is_literal(self) -> bool:
        return self.type == "literal"


@dataclass(frozen=True)
class OutputSpec:
    name: str
    type: str = "uri_folder"
    mode: str | None = None
    path: str | None = None


@dataclass(frozen=True)
class JobSpec:
    """What to run. Backends decide where; nothing here knows about them."""

    data: dict                    # the Azure fields exactly as validated (after --set overrides)
    base_dir: Path                # folder the spec's relative paths are resolved against
    source: Path | None = None    # the spec file, when read from one
    locations: dict = field(default_factory=dict, compare=False, repr=False)

    # --- typed views -------------------------------------------------------------------------
    @property
    def name(self) -> str | None:
        return self.data.get("name")

    @property
    def command(self) -> str:
        return self.data["command"]

    @property
    def code(self) -> str | None:
        return self.data.get("code")

    @property
    def compute(self) -> str | None:
        return self.data.get("compute")

    @property
    def is_local_compute(self) -> bool:
        return (self.compute or "").lower() == LOCAL_COMPUTE

    @property
    def environment(self):
        return self.data.get("environment")

    @property
    def environment_label(self) -> str:
        """The environment as a sentence names it: "the inline environment (image X)", "registry environment
        azureml://registries/...", "environment azureml:env@latest"."""
        env = self.environment
        if isinstance(env, dict):
            image = env.get("image")
            return "the inline environment" + (f" (image {image})" if image else "")
        if str(env).lower().startswith("azureml://registries/"):
            return f"registry environment {env}"
        return f"environment {env}"

    @property
    def environment_variables(self) -> dict:
        return {str(k): "" if v is None else _literal_str(v)
                for k, v in (self.data.get("environment_variables") or {}).items()}

    @property
    def resources(self) -> dict:
        return self.data.get("resources") or {}

    @property
    def instance_count(self) -> int:
        return int(self.resources.get("instance_count") or 1)

    @property
    def instance_type(self) -> str | None:
        return self.resources.get("instance_type")

    @property
    def timeout(self) -> int | None:
        return (self.data.get("limits") or {}).get("timeout")

    @property
    def distribution(self) -> Distribution | None:
        d = self.data.get("distribution")
        if not d:
            return None
        kind = str(d["type"]).lower()
        return Distribution(
            type=kind,
            process_count_per_instance=d.get("process_count_per_instance"),
            worker_count=d.get("worker_count"),
            parameter_server_count=d.get("parameter_server_count") or 0,
        )

    @property
    def processes_per_node(self) -> int:
        """Processes Azure ML starts on each node."""
        d = self.distribution
        return d.processes_per_node(self.instance_count) if d else 1

    @property
    def process_count(self) -> int:
        """Processes Azure ML starts in all (without a distribution: the command once on every node)."""
        d = self.distribution
        return d.process_count(self.instance_count) if d else self.instance_count

    @property
    def inputs(self) -> dict[str, InputSpec]:
        out = {}
        for k, v in (self.data.get("inputs") or {}).items():
            if isinstance(v, dict) and ("type" in v or "path" in v):
                out[k] = InputSpec(k, str(v.get("type", "uri_folder")).lower(), path=v.get("path"),
                                   mode=(str(v["mode"]).lower() if v.get("mode") else None))
            elif isinstance(v, dict):
                out[k] = InputSpec(k, "literal", value=v.get("value"))
            else:
                out[k] = InputSpec(k, "literal", value=v)
        return out

    @property
    def outputs(self) -> dict[str, OutputSpec]:
        out = {}
        for k, v in (self.data.get("outputs") or {}).items():
            v = v or {}
            out[k] = OutputSpec(k, str(v.get("type", "uri_folder")).lower(),
                                mode=(str(v["mode"]).lower() if v.get("mode") else None), path=v.get("path"))
        return out

    def environment_file(self) -> Path | None:
        """The environment YAML named by `environment: file:PATH`, resolved against the spec's folder."""
        env = self.environment
        if isinstance(env, str) and env.startswith("file:"):
            return (self.base_dir / env[len("file:"):]).resolve()
        return None

    def code_path(self) -> Path | None:
        """The local code folder or file, when `code` names one."""
        c = self.code
        if not c or is_remote_ref(c):
            return None
        c = c[len("file:"):] if c.startswith("file:") else c
        return (self.base_dir / c).resolve()


def is_remote_ref(path: str) -> bool:
    """True for paths only Azure can resolve: assets, datastores, URLs, git."""
    p = path.lower()
    return p.startswith(("azureml:", "http://", "https://", "wasb://", "wasbs://", "abfs://", "abfss://",
                         "adl://", "git+", "git://"))


def _literal_str(v) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"   # as Azure's Python-side str() of the literal
    return str(v)
