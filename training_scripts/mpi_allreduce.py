"""MPI-launched data-parallel training: Horovod when available, else
torch.distributed bootstrapped from the Open MPI environment.

What it shows
  Azure ML's `distribution: {type: mpi}` starts the processes with mpirun; the
  script then has to find its rank and the rendezvous address itself.  This is
  the pattern Azure ML documents for DeepSpeed and similar launchers:
    * `import horovod.torch` works -> Horovod: hvd.init(), one GPU per
      hvd.local_rank(), hvd.DistributedOptimizer, broadcast_parameters and
      broadcast_optimizer_state from rank 0.
    * otherwise -> torch.distributed (NCCL on GPU, gloo on CPU) + DDP with
        RANK        = OMPI_COMM_WORLD_RANK
        WORLD_SIZE  = OMPI_COMM_WORLD_SIZE
        LOCAL_RANK  = OMPI_COMM_WORLD_LOCAL_RANK
        MASTER_ADDR / MASTER_PORT, first match wins:
          1. AZ_BATCH_MASTER_NODE   "host:port" (Azure ML multi-node MPI jobs)
                                    or "host" (port then from 2.-4.)
          2. AZ_BATCHAI_MPI_MASTER_NODE  "host" (Azure ML single-node jobs)
          3. MASTER_ADDR / MASTER_PORT
          4. 127.0.0.1 and port 29510 (single node only)
  The training loop (LR scaling, warm-up, checkpoints, resume, metrics) is the
  one in torch_common.py, shared with pytorch_ddp.py.

How to run
  AZ_BATCH_MASTER_NODE=127.0.0.1:29510 mpirun -np 2 \
      python training_scripts/mpi_allreduce.py --output-dir /tmp/ckpt
  (as root add --allow-run-as-root; on a small machine --oversubscribe)
  Azure ML / dtrain:
    command: python mpi_allreduce.py --output-dir ${{outputs.checkpoints}}
    distribution: {type: mpi, process_count_per_instance: 2}
  --backend horovod|torch forces one path (default: auto).

Environment (required): OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (set by
  Open MPI's mpirun) -- or HOROVOD_RANK/HOROVOD_SIZE under horovodrun.
  Without them it exits with code 2.

Output (rank 0): "first_loss=<x> step=<n>" and, last, "final_loss=<x> step=<n>".
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from typing import Mapping, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

DEFAULT_PORT = 29510


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="MPI/Horovod data-parallel training (Azure ML distribution: mpi)")
    common.add_common_args(p)
    common.add_torch_args(p)  # torch flags, defined without importing torch
    p.add_argument("--backend", choices=("auto", "horovod", "torch"), default="auto",
                   help="auto: Horovod when importable, else torch.distributed")
    p.add_argument("--timeout-s", type=int, default=600, help="rendezvous/collective timeout")
    return p.parse_args(argv)


def master_address(env: Mapping[str, str], single_node: bool) -> Tuple[str, int, str]:
    """(addr, port, source) for the torch.distributed rendezvous, see the docstring."""
    port: Optional[int] = int(env["MASTER_PORT"]) if env.get("MASTER_PORT") else None
    node = env.get("AZ_BATCH_MASTER_NODE", "").strip()
    if node:
        host, sep, p = node.rpartition(":") if ":" in node else (node, "", "")
        if sep and p.isdigit():
            return host.strip("[]"), int(p), "AZ_BATCH_MASTER_NODE"
        return node, port or DEFAULT_PORT, "AZ_BATCH_MASTER_NODE"
    if env.get("AZ_BATCHAI_MPI_MASTER_NODE"):
        return env["AZ_BATCHAI_MPI_MASTER_NODE"].strip(), port or DEFAULT_PORT, "AZ_BATCHAI_MPI_MASTER_NODE"
    if env.get("MASTER_ADDR"):
        return env["MASTER_ADDR"], port or DEFAULT_PORT, "MASTER_ADDR"
    if not single_node:
        raise ValueError("multi-node MPI job but none of AZ_BATCH_MASTER_NODE, AZ_BATCHAI_MPI_MASTER_NODE, "
                         "MASTER_ADDR is set")
    return "127.0.0.1", port or DEFAULT_PORT, "default"


def horovod_comm(tc):
    """A torch_common.Comm implemented with Horovod collectives."""
    import horovod.torch as hvd
    import torch

    hvd.init()
    device = tc.pick_device(hvd.local_rank(), __file__)

    class HorovodComm(tc.Comm):
        backend = "horovod"

        def all_sum(self, values):
            t = torch.tensor(values, dtype=torch.float32)
            return hvd.allreduce(t, op=hvd.Sum, name="metrics").tolist()

        def all_gather_object(self, obj):
            return hvd.allgather_object(obj)

        def wrap(self, model, optimizer):
            # Gradients are averaged by allreduce inside optimizer.step().
            return model, hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

        def after_resume(self, model, optimizer):
            # Same start on every rank (a fresh init or the loaded checkpoint).
            hvd.broadcast_parameters(model.state_dict(), root_rank=0)
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)

        def close(self):
            hvd.shutdown()

    return HorovodComm(rank=hvd.rank(), world_size=hvd.size(), local_rank=hvd.local_rank(),
                       local_world_size=hvd.local_size(), device=device)


def torch_comm(tc, args):
    """torch.distributed initialised from the Open MPI environment."""
    import torch.distributed as dist

    env = os.environ
    rank, world_size = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
    local_rank = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", rank))
    local_size = int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", world_size))
    try:
        addr, port, source = master_address(env, single_node=local_size == world_size)
    except ValueError as exc:
        common.fail(__file__, str(exc))
    device = tc.pick_device(local_rank, __file__)
    if rank == 0:
        print(f"mpi_allreduce.py: torch.distributed rendezvous tcp://{addr}:{port} (from {source})", flush=True)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo",
                            init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    return tc.TorchComm(rank=rank, world_size=world_size, local_rank=local_rank,
                        local_world_size=local_size, device=device)


def main(argv=None) -> int:
    args = parse_args(argv)
    under_mpi = bool(os.environ.get("OMPI_COMM_WORLD_RANK") and os.environ.get("OMPI_COMM_WORLD_SIZE"))
    under_horovodrun = bool(os.environ.get("HOROVOD_RANK") and os.environ.get("HOROVOD_SIZE"))
    if not (under_mpi or under_horovodrun):
        common.fail(__file__, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE not set; launch it with dtrain "
                              "(distribution: mpi) or mpirun")

    use_horovod = args.backend == "horovod"
    if args.backend == "auto":
        try:
            import horovod.torch  # noqa: F401
            use_horovod = True
        except ImportError:
            use_horovod = False
    if not use_horovod and not under_mpi:
        common.fail(__file__, "the torch backend needs Open MPI's OMPI_COMM_WORLD_* variables; "
                              "launch it with mpirun")

    import torch_common as tc

    if use_horovod:
        try:
            comm = horovod_comm(tc)
        except ImportError as exc:
            common.fail(__file__, f"--backend horovod but horovod.torch cannot be imported ({exc})")
    else:
        comm = torch_comm(tc, args)
    tc.setup_process(comm.local_world_size, comm.device, tf32=not args.fp32)
    try:
        tc.train(args, comm, __file__)
    finally:
        comm.close()
    return 0


if __name__ == "__main__":
    common.leave(main())  # not sys.exit: see common.leave
