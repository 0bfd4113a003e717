"""PyTorch helpers shared by single_node.py, pytorch_ddp.py and mpi_allreduce.py.

The scripts differ only in how processes find each other (nothing, env://
rendezvous, MPI/Horovod); the training loop is the same and lives here:

  * ``Comm`` / ``TorchComm``   -- the few collectives the loop needs
  * ``make_mlp``               -- the student model
  * ``ResumableSampler``       -- DistributedSampler that can start mid-epoch
  * ``train``                  -- data, LR scaling + warm-up, bf16/TF32 on GPU,
                                  metrics, atomic checkpoints and resume
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Any, List, Optional, Tuple

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

CKPT_PREFIX, CKPT_SUFFIX = "ckpt_step", ".pt"


# --------------------------------------------------------------------------
# Communication facade
# --------------------------------------------------------------------------

class Comm:
    """Single process: every collective is the identity."""

    backend = "none"

    def __init__(self, rank: int = 0, world_size: int = 1, local_rank: int = 0,
                 local_world_size: int = 1, device: Optional[torch.device] = None):
        self.rank, self.world_size = rank, world_size
        self.local_rank, self.local_world_size = local_rank, local_world_size
        self.device = device or torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def all_sum(self, values: List[float]) -> List[float]:
        return list(values)

    def all_gather_object(self, obj: Any) -> List[Any]:
        return [obj]

    def wrap(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> Tuple[nn.Module, torch.optim.Optimizer]:
        """Return the (model, optimizer) to train with (DDP / Horovod wrappers)."""
        return model, optimizer

    def after_resume(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Hook after a checkpoint was (maybe) loaded on every rank."""

    def close(self) -> None:
        pass


class TorchComm(Comm):
    """torch.distributed process group (already initialised) + DDP."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.backend = dist.get_backend()

    def all_sum(self, values: List[float]) -> List[float]:
        t = torch.tensor(values, dtype=torch.float64 if self.device.type == "cpu" else torch.float32,
                         device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()

    def all_gather_object(self, obj: Any) -> List[Any]:
        out: List[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def wrap(self, model, optimizer):
        from torch.nn.parallel import DistributedDataParallel as DDP

        if self.device.type == "cuda":
            ddp = DDP(model, device_ids=[self.device.index], output_device=self.device.index)
        else:
            ddp = DDP(model)
        return ddp, optimizer

    def close(self) -> None:
        shutdown_process_group()


def shutdown_process_group(timeout_s: float = 60.0) -> None:
    """Leave the process group in an order that cannot race.

    A barrier first, so nobody leaves while rank 0 still writes the final
    checkpoint.  Then rank 0 -- which hosts the TCPStore and is every other
    rank's peer -- leaves *last*: the others destroy their group and check in
    on the store; rank 0 waits for all of them.  Without this ordering gloo
    occasionally aborts a rank whose peer exits mid-teardown ("terminate
    called without an active exception").
    """
    if not dist.is_initialized():
        return
    dist.barrier()
    try:
        store = dist.distributed_c10d._get_default_store()  # kept alive past destroy
    except Exception:  # noqa: BLE001 - private API; fall back to a plain teardown
        store = None
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.destroy_process_group()
    if store is None or world == 1:
        return
    try:
        if rank != 0:
            store.add("dtrain_left", 1)
        else:
            deadline = time.monotonic() + timeout_s
            while store.add("dtrain_left", 0) < world - 1 and time.monotonic() < deadline:
                time.sleep(0.01)
    except Exception:  # noqa: BLE001 - a peer already gone is fine at this point
        pass


def pick_device(local_rank: int, script: str) -> torch.device:
    """One GPU per LOCAL_RANK when CUDA is available, else the CPU."""
    if torch.cuda.is_available():
        if local_rank >= torch.cuda.device_count():
            common.fail(script, f"LOCAL_RANK={local_rank} but only {torch.cuda.device_count()} GPU(s) visible; "
                                "use one process per GPU")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def setup_process(local_world_size: int, device: torch.device, tf32: bool = True) -> None:
    """CPU threads against oversubscription; TF32 matmuls/convs on GPU (unless --fp32)."""
    torch.set_num_threads(common.cpu_threads(local_world_size))
    if device.type == "cuda" and tf32:
        if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # torch >= 2.9
            torch.backends.cuda.matmul.fp32_precision = "tf32"
            torch.backends.cudnn.conv.fp32_precision = "tf32"
        else:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True


# --------------------------------------------------------------------------
# Model and data
# --------------------------------------------------------------------------

def make_mlp(in_dim: int, hidden: int, layers: int, out_dim: int) -> nn.Sequential:
    mods: List[nn.Module] = []
    width = in_dim
    for _ in range(max(1, layers)):
        mods += [nn.Linear(width, hidden), nn.GELU()]
        width = hidden
    mods.append(nn.Linear(width, out_dim))
    return nn.Sequential(*mods)


class ResumableSampler(DistributedSampler):
    """DistributedSampler whose ``set_epoch`` can skip the samples this rank
    already consumed in that epoch, so a resumed run sees exactly the batches
    an uninterrupted run would have seen."""

    def set_epoch(self, epoch: int, skip: int = 0) -> None:  # type: ignore[override]
        super().set_epoch(epoch)
        self.skip = skip

    def __iter__(self):
        indices = list(super().__iter__())
        return iter(indices[getattr(self, "skip", 0):])

    def __len__(self) -> int:
        return self.num_samples - getattr(self, "skip", 0)


def load_tensors(args: argparse.Namespace) -> Tuple[torch.Tensor, torch.Tensor]:
    """--data-dir with data.pt ({"x": Tensor, "y": Tensor}) or x.npy/y.npy; else synthetic."""
    if args.data_dir and os.path.isfile(os.path.join(args.data_dir, "data.pt")):
        blob = torch.load(os.path.join(args.data_dir, "data.pt"), map_location="cpu", weights_only=True)
        x, y = blob["x"].float(), blob["y"].float()
        x = x.reshape(len(x), -1)
        return x, (y[:, None] if y.ndim == 1 else y)
    x, y = common.get_data(args)
    return torch.from_numpy(x), torch.from_numpy(y)


# --------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------

def save_checkpoint(directory: str, state: dict, keep: int) -> str:
    path = os.path.join(directory, f"{CKPT_PREFIX}{state['step']:08d}{CKPT_SUFFIX}")
    common.atomic_write(path, lambda f: torch.save(state, f))
    common.prune_checkpoints(directory, CKPT_PREFIX, CKPT_SUFFIX, keep)
    return path


def rng_state(device: torch.device) -> dict:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


# --------------------------------------------------------------------------
# The training loop
# --------------------------------------------------------------------------

def train(args: argparse.Namespace, comm: Comm, script: str) -> float:
    """Train the MLP; returns the final (global mean) loss."""
    device = comm.device
    torch.manual_seed(args.seed)
    np.random.seed(args.seed + comm.rank)
    out_dir = common.output_dir(args)
    # with several ranks, rank 0 logs every rank's throughput (gathered below); alone, its own
    logger = common.MetricLogger(enabled=comm.is_main, rank=0 if comm.world_size == 1 else None)

    # ---- data: every rank builds the same dataset, the sampler shards it ----
    x, y = load_tensors(args)
    args.in_dim, args.out_dim = x.shape[1], y.shape[1]
    dataset = TensorDataset(x, y)
    sampler = ResumableSampler(dataset, num_replicas=comm.world_size, rank=comm.rank,
                               shuffle=True, seed=args.seed, drop_last=True)
    # Batched indexing: the loader asks the dataset for a whole batch at once.
    loader = DataLoader(dataset, sampler=BatchSampler(sampler, args.batch_size, drop_last=True),
                        batch_size=None, num_workers=args.num_workers,
                        pin_memory=device.type == "cuda",
                        persistent_workers=args.num_workers > 0)
    steps_per_epoch = len(loader)
    if steps_per_epoch == 0:
        common.fail(script, f"{len(dataset)} samples are not enough for {comm.world_size} ranks x "
                            f"batch {args.batch_size}", code=1)
    total_steps = common.plan_steps(args, steps_per_epoch)

    # ---- model, optimizer, LR: linear scaling rule + linear warm-up ----
    model = make_mlp(args.in_dim, args.hidden, args.layers, args.out_dim).to(device)
    global_batch = args.batch_size * comm.world_size
    ref_batch = args.ref_batch_size or args.batch_size
    lr = args.lr * global_batch / ref_batch
    warmup = args.warmup_steps if args.warmup_steps is not None else \
        max(1, min(100, args.epochs * steps_per_epoch // 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True)
    train_model, optimizer = comm.wrap(model, optimizer)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: common.lr_factor(s, warmup))

    # ---- resume: every rank loads the latest checkpoint ----
    step = 0
    found = common.list_checkpoints(out_dir, CKPT_PREFIX, CKPT_SUFFIX)
    latest = max(found) if found else 0
    seen = comm.all_gather_object(latest)
    if len(set(seen)) != 1:
        common.fail(script, f"ranks see different latest checkpoints {seen} in {out_dir}; "
                            "--output-dir must be storage shared by all nodes", code=1)
    if latest:
        ckpt = torch.load(found[latest], map_location="cpu", weights_only=False)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        set_rng_state(ckpt["rng"], device)
        step = ckpt["step"]
        if comm.is_main:
            note = ""
            if ckpt.get("world_size") != comm.world_size:
                note = f" (saved with world_size={ckpt.get('world_size')}, data order changes)"
            print(f"resumed from step {step} epoch {ckpt['epoch']} ({found[latest]}){note}", flush=True)
    comm.after_resume(model, optimizer)

    use_bf16 = (device.type == "cuda" and torch.cuda.is_bf16_supported() and not args.no_bf16
                and not getattr(args, "fp32", False))
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if use_bf16 else contextlib.nullcontext
    if comm.is_main:
        print(f"{os.path.basename(script)}: world_size={comm.world_size} backend={comm.backend} "
              f"device={device.type} bf16={use_bf16} samples={len(dataset)} global_batch={global_batch} "
              f"lr={lr:g} (base {args.lr:g} x {global_batch}/{ref_batch}) warmup={warmup} "
              f"steps_per_epoch={steps_per_epoch} total_steps={total_steps} start_step={step}", flush=True)

    def checkpoint(step: int, epoch: int) -> None:
        if comm.is_main:
            state = {"step": step, "epoch": epoch, "model": model.state_dict(),
                     "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                     "rng": rng_state(device), "world_size": comm.world_size, "args": vars(args)}
            path = save_checkpoint(out_dir, state, args.keep_checkpoints)
            print(f"saved checkpoint step={step} path={path}", flush=True)

    # ---- loop ----
    loss_fn = nn.MSELoss()
    start_step = step
    final_loss = float("nan")
    run_samples, run_start = 0, time.perf_counter()
    win_loss = torch.zeros((), device=device)
    win_steps, win_start = 0, time.perf_counter()
    epoch = step // steps_per_epoch
    last_saved = step
    train_model.train()
    while step < total_steps:
        sampler.set_epoch(epoch, skip=(step - epoch * steps_per_epoch) * args.batch_size)
        for xb, yb in loader:
            xb = xb.to(device, non_blocking=True)
            yb = yb.to(device, non_blocking=True)
            with autocast():
                pred = train_model(xb)
            loss = loss_fn(pred.float(), yb)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1
            win_loss += loss.detach()
            win_steps += 1
            run_samples += xb.shape[0]

            if step == start_step + 1 or step % args.log_every == 0 or step == total_steps:
                elapsed = time.perf_counter() - win_start
                rate = win_steps * args.batch_size / max(elapsed, 1e-9)
                per_rank = [0.0] * comm.world_size
                per_rank[comm.rank] = rate
                summed = comm.all_sum([win_loss.item() / win_steps] + per_rank)
                final_loss = summed[0] / comm.world_size
                rates = summed[1:]
                metrics = {"loss": final_loss, "lr": scheduler.get_last_lr()[0],
                           "samples_per_s": sum(rates), "epoch": epoch}
                # each rank's own, to MLflow only; every rank prints its total once, at the end
                rank_rates = {f"samples_per_s_rank{r}": v for r, v in enumerate(rates)}
                logger.log(metrics, step, unprinted=rank_rates if comm.world_size > 1 else None)
                logger.log_rank(rate, step)
                if step == start_step + 1 and comm.is_main:
                    print(f"first_loss={final_loss:.6f} step={step}", flush=True)
                win_loss.zero_()
                win_steps, win_start = 0, time.perf_counter()

            if args.checkpoint_every and step % args.checkpoint_every == 0:
                checkpoint(step, epoch)
                last_saved = step
            if step >= total_steps:
                break
        else:
            epoch += 1
            continue
        break

    if last_saved != step:
        checkpoint(step, epoch)
    total_time = time.perf_counter() - run_start
    my_rate = run_samples / max(total_time, 1e-9)
    print(f"rank={comm.rank} samples_per_s={my_rate:.1f} steps={step - start_step} time_s={total_time:.2f}",
          flush=True)
    if comm.is_main:
        print(f"final_loss={final_loss:.6f} step={step}", flush=True)
    return final_loss
