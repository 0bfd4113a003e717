"""Causes read from the job rather than its ranks' logs: preemption and lost nodes (its status and the
message the service or the local supervisor gave), and whether NCCL's TCP-socket lines matter (its
node count and VM size).

A job's facts come from its JobInfo (`JobFacts.of`) or, for a folder of logs, from what the user says
(`dtrain why DIR --instance-type SIZE`); every field may be unknown, and an unknown fact reports nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..spec.vmsizes import lookup
from .causes import BY_KIND, Cause

JOB_SOURCE = "job status"       # the evidence's file for a line that is the job's status, not a log's
NOT_RESPONDING = "NotResponding"


@dataclass(frozen=True)
class JobFacts:
    status: str | None = None
    message: str | None = None          # the failure message (Azure's error, the supervisor's words)
    nodes: int | None = None
    instance_type: str | None = None

    @classmethod
    def of(cls, info) -> "JobFacts":
        """From a JobInfo."""
        return cls(status=str(info.status), message=info.failure.message if info.failure else None,
                   nodes=info.nodes, instance_type=info.instance_type)


def _said(kind: str, text: str | None) -> bool:
    return bool(text) and any(p.search(text or "") for p in BY_KIND[kind].patterns)


def job_causes(job: JobFacts) -> list:
    """Preempted (the message says so, whatever the status: Azure has reported preemption as Failed), else
    lost_node (NotResponding: the node or the local supervisor stopped answering)."""
    msg = (job.message or "").strip()
    evidence = [(JOB_SOURCE, 0, f"{job.status}: {msg}" if msg else str(job.status))]
    if _said("preempted", msg):
        return [Cause("preempted", [], [], evidence, BY_KIND["preempted"].hint,
                      f"the job was preempted ({job.status}): {msg[:200]}")]
    if job.status == NOT_RESPONDING or _said("lost_node", msg):
        return [Cause("lost_node", [], [], evidence, BY_KIND["lost_node"].hint,
                      f"a node stopped answering ({job.status})" + (f": {msg[:200]}" if msg else ""))]
    return []


def nccl_socket(job: JobFacts, ranks: list, nodes: list, evidence: list) -> Cause | None:
    """NCCL on TCP sockets is a cause only on a multi-node job (or one whose node count is unknown) whose VM
    size has InfiniBand; on one node, or a size without it, sockets are what NCCL should use."""
    size = lookup(job.instance_type) if job.instance_type else None
    if size is None or not size.infiniband or (job.nodes is not None and job.nodes < 2 and len(nodes) < 2):
        return None
    return Cause("nccl_socket", ranks, nodes, evidence, BY_KIND["nccl_socket"].hint,
                 f"NCCL used TCP sockets between nodes on {size.name}, which has InfiniBand ({size.interconnect or 'IB'})")
