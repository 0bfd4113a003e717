"""The Azure ML environment of each process, emulated on one host.

The plan (plan.py) lays out the processes Azure ML would start (rank, node, local rank) and the
variables each one gets. Ports are written as placeholders (PORT_TEMPLATE.format(i), which reads
`<port i, chosen at submit>`), so that building a plan opens no socket and a plan is a stable value:
`render --local` prints the same plan every time. `submit` picks free ports (`free_ports`) and fills
them in (`render_ports`); the plan.json it writes holds the ports the processes got.

What each framework gets is documented in docs/local-backend.md; keep the two in step.
"""
from __future__ import annotations

import contextlib
import json
import random
import re
import socket

LOCALHOST = "127.0.0.1"
PORTS_FROM = 20000       # the local ranks' rendezvous ports are picked from here up to the ephemeral range
PORT_TEMPLATE = "<port {}, chosen at submit>"
_PORT_RE = re.compile(r"<port (\d+), chosen at submit>")

# Bash run by mpirun for every rank: the emulated node layout, then one log file per rank (Azure's
# layout), then the user's command through a shell, as Azure runs it.
#   $1 = processes per emulated node, $2 = user_logs folder, $3 = the command
MPI_RANK_WRAPPER = r'''r=${OMPI_COMM_WORLD_RANK:?not started by mpirun}
export OMPI_COMM_WORLD_LOCAL_RANK=$((r % $1)) OMPI_COMM_WORLD_LOCAL_SIZE=$1 OMPI_COMM_WORLD_NODE_RANK=$((r / $1)) AZ_BATCHAI_TASK_INDEX=$((r / $1))
exec >>"$(printf '%s/std_log_process_%02d.txt' "$2" "$r")" 2>&1
exec bash -c "$3"'''


def log_name(rank: int) -> str:
    return f"user_logs/std_log_process_{rank:02d}.txt"


def free_ports(n: int) -> list[int]:
    """n distinct ports free right now. Picked below the kernel's ephemeral range where there is room (the
    range every outgoing connection takes its port from, so a port picked there can be taken by one before
    the rank binds it), else as the kernel gives them (bound to port 0); all held at once so they differ.
    Called by submit only: a plan never opens a socket."""
    socks: list[socket.socket] = []
    ports: list[int] = []
    low = _ephemeral_low()
    pool = random.sample(range(PORTS_FROM, low), min(200, low - PORTS_FROM)) if low - PORTS_FROM >= 100 else []
    try:
        for want in pool + [0] * n:
            if len(ports) == n:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((LOCALHOST, want))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
    return ports


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux: /proc/sys/net/ipv4/ip_local_port_range), or
    PORTS_FROM where it cannot be read (then the kernel picks)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return PORTS_FROM


def render_ports(value: str, ports: list[int]) -> str:
    return _PORT_RE.sub(lambda m: str(ports[int(m.group(1))]), value)


def render_env(env: dict, ports: list[int]) -> dict:
    return {k: render_ports(v, ports) for k, v in env.items()}


def pytorch_env(*, rank: int, node: int, local_rank: int, nodes: int, ppn: int) -> dict:
    return {
        "MASTER_ADDR": LOCALHOST,
        "MASTER_PORT": PORT_TEMPLATE.format(0),
        "WORLD_SIZE": str(nodes * ppn),
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank),
        "NODE_RANK": str(node),
    }


def tf_config(*, workers: int, ps: int, role: str, index: int) -> str:
    cluster = {"worker": [f"{LOCALHOST}:{PORT_TEMPLATE.format(i)}" for i in range(workers)]}
    if ps:
        cluster["ps"] = [f"{LOCALHOST}:{PORT_TEMPLATE.format(workers + i)}" for i in range(ps)]
    return json.dumps({"cluster": cluster, "task": {"type": role, "index": index}, "environment": "cloud"},
                      separators=(",", ":"))


def mpi_launcher_env() -> dict:
    return {
        "AZ_BATCH_MASTER_NODE": f"{LOCALHOST}:{PORT_TEMPLATE.format(0)}",
        "AZ_BATCHAI_MPI_MASTER_NODE": LOCALHOST,
    }
