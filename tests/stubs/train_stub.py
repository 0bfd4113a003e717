"""A stand-in for the shipped training scripts, for tests about what dtrain does around training
(where a job's checkpoint folder is, that a later job or attempt finds it), not about training.

It takes the templates' command line (--epochs, --steps, --samples, --batch-size, --checkpoint-every,
--output-dir; the rest is ignored), counts optimizer steps as the real scripts do (--steps, or
epochs x ceil(samples / batch size)), saves `ckpt_step<N>` in --output-dir every --checkpoint-every steps and at
the end (rank 0 only, written atomically), resumes from the newest one, and prints the real scripts' lines:
`resumed from step N`, `first_loss=<x> step=<n>`, `final_loss=<x> step=<n>`. No torch; a few seconds.
The real scripts' learning and exact resumption: tests/test_training_scripts.py.
"""
import argparse
import math
import os
import re
import time

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--steps", type=int, default=0)
p.add_argument("--samples", type=int, default=2048)
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--checkpoint-every", type=int, default=20)
p.add_argument("--output-dir", required=True)
p.add_argument("--step-s", type=float, default=float(os.environ.get("STUB_STEP_S", "0.02")))
args, _ = p.parse_known_args()

rank = int(os.environ.get("RANK", "0"))
total = args.steps or args.epochs * math.ceil(args.samples / args.batch_size)
os.makedirs(args.output_dir, exist_ok=True)
saved = [int(m.group(1)) for f in os.listdir(args.output_dir) if (m := re.fullmatch(r"ckpt_step(\d+)", f))]
step = max(saved, default=0)
if step:
    print(f"resumed from step {step}", flush=True)


def loss(s: int) -> float:
    return 1.0 / (1 + s)


while step < total:
    time.sleep(args.step_s)
    step += 1
    if step == 1 or (saved and step == max(saved) + 1):
        print(f"first_loss={loss(step):.6f} step={step}", flush=True)
    if rank == 0 and ((args.checkpoint_every and step % args.checkpoint_every == 0) or step == total):
        tmp = os.path.join(args.output_dir, f".ckpt_step{step}.tmp")
        with open(tmp, "w") as f:
            f.write(str(step))
        os.replace(tmp, os.path.join(args.output_dir, f"ckpt_step{step}"))
print(f"final_loss={loss(step):.6f} step={step}", flush=True)
