"""The table of causes `dtrain why` knows: each with the lines that show it (as the framework prints
them), what to call it and what to change. docs/troubleshooting.md is checked against this table
(tests/test_why.py): every kind has its section there.

Patterns are matched against one log line at a time, after the `[rank3]:` prefix torchrun-style
launchers put in front of every line is taken off; a cause read from the job's status instead (`source`
"job": preemption, a lost node) has its patterns matched against the message the service or the local
supervisor gave. Named groups are the details a summary quotes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Cause:
    """One cause found: what `dtrain why` prints and `--output json` gives."""

    kind: str
    ranks: list
    nodes: list
    evidence: list                  # [(file, line, text)]; line 0: not a file's line (the job's status)
    hint: str
    summary: str

    def to_dict(self) -> dict:
        return {"kind": self.kind, "ranks": self.ranks, "nodes": self.nodes, "summary": self.summary,
                "evidence": [{"file": f, "line": n, "text": t} for f, n, t in self.evidence], "hint": self.hint}


@dataclass(frozen=True)
class CauseKind:
    kind: str
    title: str
    patterns: tuple          # compiled regexes; any one matching a line is evidence
    hint: str
    source: str = "log"      # "log": the ranks' lines; "job": the job's status and its message (diagnose/job.py)


def _re(*texts: str) -> tuple:
    return tuple(re.compile(t) for t in texts)


# In the order a job's top cause is picked: what starts a failure before what follows from it (an out
# of memory rank makes its peers' collectives time out; a dead peer makes NCCL report a remote error).
CAUSES: tuple = (
    # Azure ML's message (Azure/MachineLearningNotebooks#1242, microsoft/MLOpsPython#346) and the local
    # eviction drill's (submit --local --preempt-after): the node was taken away; nothing in the job is wrong.
    CauseKind("preempted", "preempted (a low-priority node taken back)", _re(
        r"PreemptionError",
        r"[Nn]odes? of this job got pre-?empted",
        r"pre-?emption warning signal",
        r"\bpreempted\b"),
        "the node was taken back by Azure (low priority / spot): the job is not at fault; retry it "
        "(`dtrain submit --retries N`) and checkpoint often so that the next attempt resumes; a dedicated "
        "cluster is never preempted", source="job"),
    # NotResponding (the REST spec: the run stopped updating run history) with no preemption said: the
    # node, or the local supervisor, is gone.
    CauseKind("lost_node", "a node stopped answering (lost)", _re(
        r"the local (?:supervisor|supervisor's watchdog)(?: \(pid \d+\))? is gone"),
        "infrastructure, not the job: retry it (`dtrain submit --retries N`, exit 5 is retried); locally, "
        "the supervisor was killed or the machine restarted (its system_logs/supervisor.txt says more)",
        source="job"),
    CauseKind("gpu_oom", "GPU out of memory", _re(
        r"CUDA out of memory\. Tried to allocate (?P<size>[\d.]+ [KMGT]?i?B)",
        r"OOM when allocating tensor with shape(?P<shape>\[[^\]]*\])",
        r"ResourceExhaustedError: .*OOM"),
        "lower the per-process batch size, or use activation checkpointing / mixed precision; set "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when the message says memory is reserved but unallocated"),
    CauseKind("killed", "killed by the kernel (host memory)", _re(
        r"process rank (?P<rank>\d+) with PID \d+ on node (?P<host>\S+) exited on signal 9",
        r"^Killed$"),
        "the process got SIGKILL without a traceback: most often the node ran out of host memory; use fewer "
        "data loader workers or processes per node, or a VM size with more memory"),
    CauseKind("too_many_processes", "more processes than GPUs", _re(
        r"Duplicate GPU detected",
        r"CUDA error: invalid device ordinal"),
        "distribution.process_count_per_instance is above the GPUs of the VM size; make it the GPU count "
        "(`dtrain validate` checks it), and select the device with LOCAL_RANK"),
    CauseKind("missing_module", "missing package", _re(
        r"^ModuleNotFoundError: No module named '(?P<module>[^']+)'",
        r"^ImportError: (?:cannot import name '(?P<name>[^']+)'|No module named '?(?P<module>[\w.]+))"),
        "add the package to the job's environment (its conda file or image); locally, to the python the job "
        "runs (`dtrain submit --python`)"),
    CauseKind("no_space", "no space left on device", _re(
        r"No space left on device(?:: '(?P<path>[^']+)')?"),
        "write checkpoints and outputs to an output (${{outputs.x}}) or a datastore, not the node's disk; "
        "clear the folder named, or pick a VM size with a larger temporary disk"),
    CauseKind("rendezvous", "a rank never joined (rendezvous / TCPStore / MPI start-up)", _re(
        r"RendezvousTimeoutError",
        r"RendezvousConnectionError",
        r"client socket has timed out after \S+ while trying to connect to \((?P<addr>[^)]+)\)",
        r"Timed out after \d+ seconds waiting for clients\. (?P<joined>\d+/\d+) clients joined",
        r"DistStoreError: .*(?:[Tt]imeout|[Tt]imed out)",
        r"Timed out initializing process group in store based barrier",
        r"ORTE was unable to reliably start one or more daemons",
        r"mpirun was unable to launch the specified application",
        r"An error occurred in MPI_Init|MPI_INIT failed"),
        "every rank must call init_process_group with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE; a "
        "rank that never joined crashed or hung before it (its log says which), or cannot reach the master"),
    CauseKind("nccl_error", "NCCL error", _re(
        r"NCCL error.*(?P<what>unhandled system error|unhandled cuda error|internal error|invalid usage)",
        r"ncclRemoteError|remote process exited or there was a network error",
        r"ncclSystemError|ncclInternalError"),
        "rerun with NCCL_DEBUG=INFO (environment_variables) to see which call failed and on which interface; "
        "a remote error usually means another rank died first: look at its log"),
    CauseKind("collective_timeout", "a collective timed out", _re(
        r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)",
        r"gloo/transport/tcp/\S+\] Timed out waiting (?P<ms>\d+)ms for (?P<op>\w+) operation",
        r"Rank (?P<lag>\d+) failed to pass monitoredBarrier",
        r"stall_inspector\.cc:\d+\] One or more tensors were submitted"),
        "the lagging ranks are the ones to read: they never reached the collective (a hang, a slow data "
        "loader, an uneven number of batches, or a crash); NCCL_DEBUG=INFO and TORCH_NCCL_TRACE_BUFFER_SIZE "
        "tell more; raise the timeout only when the wait is expected"),
    CauseKind("python_error", "a Python exception", (),
              "the first traceback in time: fix what its last frame says"),
    # A speed hint, not a failure: NCCL fell back to TCP sockets on a multi-node job whose VM size has
    # InfiniBand (spec/vmsizes.py). Reported only where the VM size is known (a job, or `why DIR
    # --instance-type`). NCCL_DEBUG=INFO prints these lines (NCCL's init.cc / net.cc).
    CauseKind("nccl_socket", "NCCL used TCP sockets on a VM size with InfiniBand", _re(
        r"NCCL INFO NET/Socket : Using",
        r"NCCL INFO Using network Socket"),
        "NCCL did not find the InfiniBand devices: use an environment with the IB drivers and NCCL's "
        "RDMA support (the curated AzureML-ACPT images), do not set NCCL_IB_DISABLE=1, and check that "
        "`NET/IB : No device found` is not in the log; sockets are several times slower across nodes"),
)

BY_KIND = {c.kind: c for c in CAUSES}
FROM_LOGS = tuple(c for c in CAUSES if c.source == "log")
HINTS = ("nccl_socket",)        # kinds that say how to go faster, not why a job failed
ORDER = {c.kind: i for i, c in enumerate(CAUSES)}
RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")
