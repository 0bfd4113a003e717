"""Distributed failures reproduced on CPU for `dtrain why` (tests/test_why_local.py), one per mode:

  gloo_lag   every rank joins a gloo process group with a 3 s timeout and all-reduces once; then rank
             LAG (default: the last) sleeps past the timeout while the others all-reduce again: they
             report gloo's `Timed out waiting 3000ms for recv operation`, and it is the lagging rank.
  no_join    rank 0 starts the process group (its TCPStore waits 3 s for the others); the other ranks
             never call init_process_group.
  killed     rank 1 SIGKILLs itself (what the kernel's OOM killer does: no traceback).
  missing    rank 1 imports a package that is not there.
  no_space   rank 1 writes to /dev/full.

Ranks that are not the failing one wait to be stopped by dtrain (the first failure stops the rest). torch is
imported only by the modes that need it. A rank that reports a timeout waits 2 s before it exits, so
that each waiting rank's own report is in its log before dtrain stops the others (in a real job each rank's
watchdog reports on its own; here they all time out within milliseconds of one another).
"""
import os
import signal
import sys
import time

mode = sys.argv[1]
rank = int(os.environ.get("RANK", "0"))
world = int(os.environ.get("WORLD_SIZE", "1"))
lag = int(os.environ.get("LAG_RANK", world - 1))


def gloo_lag() -> None:
    import traceback
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=3))
    t = torch.ones(1)
    dist.all_reduce(t)
    print(f"rank {rank}: first all_reduce done", flush=True)
    if rank == lag:
        time.sleep(60)                       # a hang: a slow data loader, a deadlock, ...
    try:
        dist.all_reduce(t)
    except RuntimeError:
        traceback.print_exc()
        sys.stderr.flush()
        time.sleep(2.0)
        sys.exit(1)


def no_join() -> None:
    if rank != 0:
        time.sleep(60)                       # crashed or hung before init_process_group
        return
    from datetime import timedelta

    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=timedelta(seconds=3))


def killed() -> None:
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)


def missing() -> None:
    if rank == 1:
        import not_a_package  # noqa: F401
    time.sleep(60)


def no_space() -> None:
    if rank == 1:
        with open("/dev/full", "w") as f:
            f.write("checkpoint")
    time.sleep(60)


{"gloo_lag": gloo_lag, "no_join": no_join, "killed": killed, "missing": missing, "no_space": no_space}[mode]()
