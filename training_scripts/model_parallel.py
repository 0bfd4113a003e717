"""Pipeline model parallelism (GPipe-style) with torch.distributed send/recv.

What it shows
  A model too large for one device is cut into WORLD_SIZE pipeline stages:
  rank r builds *only* its own slice of the layers (each layer is seeded by
  its index, so the full model is never materialised anywhere).  Every
  optimizer step splits the mini-batch into --micro-batches micro-batches:
    forward : stage r receives activations from r-1, runs its layers, sends
              the result to r+1 (the last stage computes the loss);
    backward: in reverse micro-batch order the last stage back-propagates and
              sends d(loss)/d(input) to r-1, which continues the chain.
  Gradients of all micro-batches accumulate, then every stage steps its own
  optimizer (synchronous GPipe schedule: identical result to training the
  unsplit model on the whole mini-batch).  Sends are non-blocking (isend) so
  a stage computes the next micro-batch while the previous one is in flight.
  Works on CPU over gloo and on GPU over NCCL (one GPU per LOCAL_RANK, TF32;
  activations stay fp32, no autocast, to keep the send/recv buffers simple).
  Each stage writes its own atomic checkpoint shard
  (stageNN_stepXXXXXXXX.pt); on restart the ranks agree on the newest step
  that *every* stage has saved and resume from it.

How to run
  torchrun --nproc-per-node 2 training_scripts/model_parallel.py --output-dir /tmp/ckpt
  Azure ML / dtrain: distribution: {type: pytorch, process_count_per_instance: 2}
  Scale up with --layers (total hidden layers, >= WORLD_SIZE) and --hidden.

Environment (required): MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK
  (as for pytorch_ddp.py).  Without them it exits with code 2.

Output (rank 0, the loss is broadcast from the last stage):
  "first_loss=<x> step=<n>" and, last, "final_loss=<x> step=<n>".
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

REQUIRED = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="GPipe-style pipeline parallel training")
    common.add_common_args(p, batch_size=64, lr=3e-3, epochs=6, hidden=64)
    p.set_defaults(layers=4)
    common.add_torch_args(p)  # torch flags, defined without importing torch
    p.add_argument("--micro-batches", type=int, default=4, help="micro-batches per mini-batch")
    p.add_argument("--timeout-s", type=int, default=600, help="rendezvous/collective timeout")
    return p.parse_args(argv)


def build_stage(args, rank: int, world: int):
    """The layers of pipeline stage ``rank``: hidden layers split evenly, the
    input layer on stage 0 and the output layer on the last stage."""
    import torch
    from torch import nn

    n = args.layers
    first = rank * n // world
    last = (rank + 1) * n // world
    mods = []
    for i in range(first, last):
        torch.manual_seed(args.seed * 1000 + i)  # init independent of the split
        mods += [nn.Linear(args.in_dim if i == 0 else args.hidden, args.hidden), nn.GELU()]
    if rank == world - 1:
        torch.manual_seed(args.seed * 1000 + n)
        mods.append(nn.Linear(args.hidden, args.out_dim))
    return nn.Sequential(*mods), (first, last)


def main(argv=None) -> int:
    args = parse_args(argv)
    missing = [v for v in REQUIRED if not os.environ.get(v)]
    if missing:
        common.fail(__file__, f"{'/'.join(missing)} not set; launch it with dtrain "
                              "(distribution: pytorch) or torchrun")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    if args.layers < world:
        common.fail(__file__, f"--layers {args.layers} < WORLD_SIZE {world}: every stage needs a layer")
    if args.batch_size % args.micro_batches:
        common.fail(__file__, f"--batch-size {args.batch_size} is not divisible by "
                              f"--micro-batches {args.micro_batches}", code=1)

    import torch
    import torch.distributed as dist
    from torch import nn

    import torch_common as tc

    device = tc.pick_device(local_rank, __file__)
    tc.setup_process(common.env_int("LOCAL_WORLD_SIZE", world), device, tf32=not args.fp32)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=args.timeout_s),
                            device_id=device if device.type == "cuda" else None)
    is_first, is_last = rank == 0, rank == world - 1
    out_dir = common.output_dir(args)
    logger = common.MetricLogger(enabled=rank == 0, rank=rank)

    x_all, y_all = tc.load_tensors(args)
    args.in_dim, args.out_dim = x_all.shape[1], y_all.shape[1]
    steps_per_epoch = len(x_all) // args.batch_size
    if steps_per_epoch == 0:
        common.fail(__file__, f"{len(x_all)} samples < --batch-size {args.batch_size}", code=1)
    total_steps = common.plan_steps(args, steps_per_epoch)
    warmup = args.warmup_steps if args.warmup_steps is not None else \
        max(1, min(100, args.epochs * steps_per_epoch // 10))

    stage, (l0, l1) = build_stage(args, rank, world)
    stage = stage.to(device)
    n_params = sum(p.numel() for p in stage.parameters())
    print(f"stage {rank}/{world}: hidden layers [{l0}, {l1}){' + output layer' if is_last else ''}, "
          f"{n_params} parameters on {device}", flush=True)
    # No data parallelism here (one pipeline), so no LR scaling: --lr as given.
    optimizer = torch.optim.AdamW(stage.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: common.lr_factor(s, warmup))

    # ---- resume from the newest step that every stage has on disk ----
    prefix, suffix = f"stage{rank:02d}_step", ".pt"
    mine = common.list_checkpoints(out_dir, prefix, suffix)
    everyone = [None] * world
    dist.all_gather_object(everyone, sorted(mine))
    shared = set(everyone[0]).intersection(*map(set, everyone[1:]))
    step = max(shared) if shared else 0
    if step:
        ckpt = torch.load(mine[step], map_location="cpu", weights_only=False)
        if ckpt["world_size"] != world or ckpt["layers"] != args.layers:
            common.fail(__file__, f"checkpoint {mine[step]} was written by {ckpt['world_size']} stages "
                                  f"and {ckpt['layers']} layers; this run has {world} and {args.layers}", code=1)
        stage.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        tc.set_rng_state(ckpt["rng"], device)
        if rank == 0:
            print(f"resumed from step {step} (all {world} stages)", flush=True)

    def save(step: int) -> None:
        state = {"step": step, "model": stage.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "rng": tc.rng_state(device),
                 "world_size": world, "layers": args.layers, "stage_layers": (l0, l1)}
        path = os.path.join(out_dir, f"{prefix}{step:08d}{suffix}")
        common.atomic_write(path, lambda f: torch.save(state, f))
        common.prune_checkpoints(out_dir, prefix, suffix, args.keep_checkpoints)
        if rank == 0:
            print(f"saved checkpoint step={step} (one shard per stage) dir={out_dir}", flush=True)

    if rank == 0:
        print(f"model_parallel.py: stages={world} backend={dist.get_backend()} batch={args.batch_size} "
              f"micro_batches={args.micro_batches} lr={args.lr:g} warmup={warmup} "
              f"total_steps={total_steps} start_step={step}", flush=True)

    mb = args.batch_size // args.micro_batches
    act_shape = (mb, args.hidden)
    loss_fn = nn.MSELoss()

    def train_step(xb, yb) -> float:
        """One GPipe step: all forwards, then all backwards, then optimizer."""
        inputs, outputs, losses, pending = [], [], [], []
        xs = xb.chunk(args.micro_batches) if is_first else [None] * args.micro_batches
        ys = yb.chunk(args.micro_batches) if is_last else [None] * args.micro_batches
        for m in range(args.micro_batches):
            if is_first:
                inp = xs[m].to(device, non_blocking=True)
            else:
                inp = torch.empty(act_shape, device=device)
                dist.recv(inp, src=rank - 1)
                inp.requires_grad_()
            out = stage(inp)
            inputs.append(inp)
            outputs.append(out)
            if is_last:
                losses.append(loss_fn(out, ys[m].to(device, non_blocking=True)) / args.micro_batches)
            else:
                pending.append(dist.isend(out.detach().contiguous(), dst=rank + 1))
        optimizer.zero_grad(set_to_none=True)
        for m in reversed(range(args.micro_batches)):
            if is_last:
                losses[m].backward()
            else:
                grad = torch.empty(act_shape, device=device)
                dist.recv(grad, src=rank + 1)
                outputs[m].backward(grad)
            if not is_first:
                pending.append(dist.isend(inputs[m].grad.contiguous(), dst=rank - 1))
        optimizer.step()
        scheduler.step()
        for work in pending:
            work.wait()
        return float(sum(l.item() for l in losses)) if is_last else 0.0

    start_step, last_saved = step, step
    final_loss = float("nan")
    win_loss, win_steps, win_start, run_start = 0.0, 0, time.perf_counter(), time.perf_counter()
    while step < total_steps:
        epoch, offset = divmod(step, steps_per_epoch)
        # Same permutation on every stage: stage 0 needs x, the last stage y.
        perm = torch.randperm(len(x_all), generator=torch.Generator().manual_seed(args.seed + epoch))
        for b in range(offset, steps_per_epoch):
            idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
            win_loss += train_step(x_all[idx], y_all[idx])
            step += 1
            win_steps += 1
            if step == start_step + 1 or step % args.log_every == 0 or step == total_steps:
                t = torch.tensor([win_loss / win_steps], dtype=torch.float32, device=device)
                dist.broadcast(t, src=world - 1)  # the loss lives on the last stage
                final_loss = t.item()
                rate = win_steps * args.batch_size / max(time.perf_counter() - win_start, 1e-9)
                logger.log({"loss": final_loss, "lr": scheduler.get_last_lr()[0], "samples_per_s": rate,
                            "epoch": epoch}, step)
                logger.log_rank(rate, step)
                if step == start_step + 1 and rank == 0:
                    print(f"first_loss={final_loss:.6f} step={step}", flush=True)
                win_loss, win_steps, win_start = 0.0, 0, time.perf_counter()
            if args.checkpoint_every and step % args.checkpoint_every == 0:
                save(step)
                last_saved = step
            if step >= total_steps:
                break
    if last_saved != step:
        save(step)
    elapsed = time.perf_counter() - run_start
    print(f"rank={rank} stage_time_s={elapsed:.2f} steps={step - start_step}", flush=True)
    if rank == 0:
        print(f"final_loss={final_loss:.6f} step={step}", flush=True)
    tc.shutdown_process_group()
    return 0


if __name__ == "__main__":
    common.leave(main())  # not sys.exit: see common.leave
