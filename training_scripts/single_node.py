"""Plain single-process PyTorch training (no distribution).

What it shows
  The baseline every distributed script in this folder builds on: a small MLP
  learning a fixed random "teacher" network (synthetic, seeded, nothing is
  downloaded), SGD with linear warm-up, metrics printed and logged to MLflow
  (only when MLFLOW_TRACKING_URI is set, as in every Azure ML job), and
  atomic checkpoints in --output-dir that a re-run resumes from.  On a GPU it
  uses bf16 autocast, TF32 and a pinned-memory DataLoader.

How to run
  python training_scripts/single_node.py --output-dir /tmp/ckpt
  python training_scripts/single_node.py --steps 200 --hidden 256 --data-dir /data

  Azure ML (no `distribution:` section):
    command: python single_node.py --output-dir ${{outputs.checkpoints}}

Environment
  None required.  It refuses to run (exit 2) when it finds itself inside a
  multi-process launch (WORLD_SIZE > 1 or OMPI_COMM_WORLD_SIZE > 1), where
  every process would train its own copy and race on the checkpoint folder.

Output
  "first_loss=<x> step=<n>" after the first step and, last,
  "final_loss=<x> step=<n>".
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_common_args(p)
    common.add_torch_args(p)  # torch flags, defined without importing torch
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    for var in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if (common.env_int(var, 1) or 1) > 1:
            common.fail(__file__, f"{var}={os.environ[var]} but this script trains in one process; "
                                  "use pytorch_ddp.py or mpi_allreduce.py for distributed jobs")

    import torch_common as tc  # imports torch; after the cheap checks

    device = tc.pick_device(0, __file__)
    tc.setup_process(1, device, tf32=not args.fp32)
    tc.train(args, tc.Comm(device=device), __file__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
