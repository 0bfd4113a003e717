"""PyTorch DistributedDataParallel (DDP), launched the way Azure ML launches it.

What it shows
  * env:// rendezvous from the variables Azure ML sets for
    `distribution: {type: pytorch}` (the same ones torchrun sets):
    MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK (NODE_RANK is
    informational).
  * backend chosen automatically: NCCL when CUDA is available, else gloo.
  * one GPU per LOCAL_RANK (torch.cuda.set_device), bf16 autocast + TF32,
    pinned-memory DataLoader; on CPU torch threads = cpu_count // local procs.
  * DistributedSampler with set_epoch() every epoch (resumable mid-epoch).
  * linear scaling rule: lr = --lr x global_batch / --ref-batch-size
    (= --lr x WORLD_SIZE by default) with linear warm-up.
  * rank 0 writes atomic checkpoints every --checkpoint-every steps into
    --output-dir; every rank loads the latest one at start and resumes.
  * metrics (loss, lr, samples/s of the job) printed by rank 0 and, with
    samples/s per rank, logged to MLflow when MLFLOW_TRACKING_URI is set.

How to run
  torchrun --nproc-per-node 2 training_scripts/pytorch_ddp.py --output-dir /tmp/ckpt
  dtrain / Azure ML job:
    command: python pytorch_ddp.py --output-dir ${{outputs.checkpoints}}
    distribution: {type: pytorch, process_count_per_instance: 2}

Environment (required): MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK.
  Optional: LOCAL_WORLD_SIZE (CPU thread split; default: all ranks on this
  host), MLFLOW_TRACKING_URI.  Without them it exits with code 2.

Output (rank 0): "first_loss=<x> step=<n>" and, last, "final_loss=<x> step=<n>";
every rank prints "rank=<r> samples_per_s=<x> ...".
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

REQUIRED = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="PyTorch DDP training (Azure ML distribution: pytorch)")
    common.add_common_args(p)
    common.add_torch_args(p)  # torch flags, defined without importing torch
    p.add_argument("--timeout-s", type=int, default=600, help="rendezvous/collective timeout")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    missing = [v for v in REQUIRED if not os.environ.get(v)]
    if missing:
        common.fail(__file__, f"{'/'.join(missing)} not set; launch it with dtrain "
                              "(distribution: pytorch) or torchrun")
    try:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ["LOCAL_RANK"])
        int(os.environ["MASTER_PORT"])
    except ValueError as exc:
        common.fail(__file__, f"bad distributed environment: {exc}")
    if not 0 <= rank < world_size:
        common.fail(__file__, f"RANK={rank} is outside WORLD_SIZE={world_size}")
    local_world_size = common.env_int("LOCAL_WORLD_SIZE", world_size)

    import torch
    import torch.distributed as dist

    import torch_common as tc

    device = tc.pick_device(local_rank, __file__)
    tc.setup_process(local_world_size, device, tf32=not args.fp32)
    backend = "nccl" if device.type == "cuda" else "gloo"
    # init_method="env://" reads MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE.
    dist.init_process_group(backend=backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=args.timeout_s),
                            device_id=device if device.type == "cuda" else None)
    comm = tc.TorchComm(rank=rank, world_size=world_size, local_rank=local_rank,
                        local_world_size=local_world_size, device=device)
    if comm.is_main:
        print(f"pytorch_ddp.py: MASTER={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} "
              f"NODE_RANK={os.environ.get('NODE_RANK', '?')} torch={torch.__version__}", flush=True)
    try:
        tc.train(args, comm, __file__)
    finally:
        comm.close()
    return 0


if __name__ == "__main__":
    common.leave(main())  # not sys.exit: see common.leave
