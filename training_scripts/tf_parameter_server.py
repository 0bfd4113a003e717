"""TensorFlow asynchronous parameter-server training (ParameterServerStrategy).

What it shows
  TensorFlow 2's parameter-server model has three roles:
    ps          -- hold the variables                (run tf.distribute.Server)
    worker      -- run the training steps they are sent (tf.distribute.Server)
    coordinator -- the "chief" task: creates the variables on the ps tasks,
                   builds a per-worker dataset, *schedules* training steps on
                   whichever worker is free (ClusterCoordinator.schedule) and
                   writes the checkpoints.
  Workers read and update the variables on the ps tasks independently
  (asynchronous training: no all-reduce, no waiting for slow workers).

  Azure ML's `distribution: {type: tensorflow, worker_count: W,
  parameter_server_count: P}` gives a TF_CONFIG with "worker" and "ps" jobs
  only -- there is no "chief", and ParameterServerStrategy needs one task
  to be the coordinator.  This script rewrites TF_CONFIG, identically in
  every process, before the cluster resolver reads it:
      Azure ML                        TensorFlow
      worker 0                   ->   chief 0  (the coordinator)
      worker i (i >= 1)          ->   worker i-1
      ps j                       ->   ps j
  so W >= 2 is required (W-1 workers compute).  A TF_CONFIG that already has
  a "chief" job is used unchanged.  The coordinator's address is worker 0's
  address, so every port Azure ML allocated is used exactly once.
  TF servers never return on their own, so ps and worker tasks watch the
  coordinator's port and exit 0 once it has been up and is gone (the job
  ends when the coordinator has saved the final checkpoint).

  Checkpoints: only the coordinator saves (tf.train.CheckpointManager in
  --output-dir, TF writes the index last via an atomic rename) after
  ClusterCoordinator.join(), i.e. with no step in flight; a restart restores
  the variables onto the ps tasks and continues at the saved step.  The data
  stream is not resumed (workers read independent shuffled, repeated
  streams), which is inherent to asynchronous training.  No linear LR scaling
  either: each update is one worker's batch.  Linear warm-up is kept.

How to run (one process per task; each gets the same cluster, its own task):
  C='"cluster":{"worker":["localhost:2222","localhost:2223"],"ps":["localhost:2224"]}'
  TF_CONFIG="{$C,\"task\":{\"type\":\"ps\",\"index\":0}}"     python training_scripts/tf_parameter_server.py &
  TF_CONFIG="{$C,\"task\":{\"type\":\"worker\",\"index\":1}}" python training_scripts/tf_parameter_server.py &
  TF_CONFIG="{$C,\"task\":{\"type\":\"worker\",\"index\":0}}" python training_scripts/tf_parameter_server.py --output-dir /tmp/ckpt
  Azure ML / dtrain: command: python tf_multiworker.py (or this file) ...
    distribution: {type: tensorflow, worker_count: 2, parameter_server_count: 1}

Environment (required): TF_CONFIG with at least one "ps" task.  Without it
  the script exits with code 2.
Output (coordinator): "first_loss=<x> step=<n>" and, last, "final_loss=<x> step=<n>".
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import socket
import sys
import time
from typing import Any, Dict, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tf_common  # noqa: E402  (first: exits 2 naming what to add when TensorFlow is missing)
import common  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="TensorFlow ParameterServerStrategy training from TF_CONFIG")
    common.add_common_args(p, lr=0.05, epochs=4)
    p.add_argument("--server-timeout-s", type=int, default=600,
                   help="ps/worker tasks give up when the coordinator has not come up within this time")
    return p.parse_args(argv)


def map_azure_cluster(cfg: Dict[str, Any]) -> Tuple[Dict[str, Any], str]:
    """TF_CONFIG for ParameterServerStrategy: worker 0 becomes the chief (coordinator)."""
    cluster, task = cfg["cluster"], cfg["task"]
    if "chief" in cluster:
        return cfg, "TF_CONFIG has a chief: used unchanged"
    workers = list(cluster.get("worker", []))
    if len(workers) < 2:
        raise ValueError(f"parameter-server training needs at least 2 workers (worker 0 becomes the "
                         f"coordinator), TF_CONFIG has {len(workers)}")
    new = copy.deepcopy(cfg)
    new["cluster"] = {k: list(v) for k, v in cluster.items() if k != "worker"}
    new["cluster"]["chief"] = [workers[0]]
    new["cluster"]["worker"] = workers[1:]
    kind, index = task["type"], int(task["index"])
    if kind == "worker":
        new["task"] = {"type": "chief", "index": 0} if index == 0 else {"type": "worker", "index": index - 1}
    note = f"Azure ML {kind} {index} -> TF {new['task']['type']} {new['task']['index']}"
    return new, note


def serve_until_coordinator_exits(cfg: Dict[str, Any], args: argparse.Namespace) -> int:
    """Run this task's tf.distribute.Server until the coordinator has come and gone."""
    import tensorflow as tf

    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    task = cfg["task"]
    n = tf_common.threads_for_cluster(cfg)
    # inter-op threads stay at TF's default: a worker blocks threads on Recv
    # from the ps tasks, and a too-small inter-op pool deadlocks.
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=n)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    tf.distribute.Server(resolver.cluster_spec(), job_name=task["type"], task_index=int(task["index"]),
                         protocol=resolver.rpc_layer or "grpc", config=config, start=True)
    print(f"{task['type']} {task['index']}: server started, waiting for the coordinator", flush=True)
    host, port = cfg["cluster"]["chief"][0].rsplit(":", 1)
    seen, misses, start = False, 0, time.monotonic()
    while True:
        time.sleep(0.5)
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            seen, misses = True, 0
        except OSError:
            if seen:
                misses += 1
                if misses >= 3:
                    break
            elif time.monotonic() - start > args.server_timeout_s:
                print(f"tf_parameter_server.py: coordinator {host}:{port} never came up within "
                      f"{args.server_timeout_s}s", file=sys.stderr, flush=True)
                return 1
    print(f"{task['type']} {task['index']}: coordinator finished, shutting down", flush=True)
    return 0


def coordinate(cfg: Dict[str, Any], args: argparse.Namespace) -> int:
    import tensorflow as tf

    tf_common.configure_threads(tf_common.threads_for_cluster(cfg))
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    n_workers, n_ps = len(cfg["cluster"]["worker"]), len(cfg["cluster"]["ps"])
    logger = common.MetricLogger()

    x, y = common.get_data(args)
    args.in_dim, args.out_dim = x.shape[1], y.shape[1]
    steps_per_epoch = len(x) // args.batch_size
    total_steps = common.plan_steps(args, steps_per_epoch)
    warmup = args.warmup_steps if args.warmup_steps is not None else \
        max(1, min(100, args.epochs * steps_per_epoch // 10))

    with strategy.scope():  # variables are created on the ps tasks (round-robin)
        model = tf_common.MLP(args.in_dim, args.hidden, args.layers, args.out_dim, args.seed)
        step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")

    def dataset_fn():  # runs on every worker: an endless, independently shuffled stream
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), reshuffle_each_iteration=True)
        return ds.repeat().batch(args.batch_size, drop_remainder=True).prefetch(2)

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def worker_fn(iterator, lr):
        def replica_fn(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(xb) - yb))
            grads = tape.gradient(loss, model.variables)
            tf_common.sgd_update(model, grads, lr)  # read-modify-write on the ps tasks
            return loss

        xb, yb = next(iterator)
        losses = strategy.run(replica_fn, args=(xb, yb))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    out_dir = common.output_dir(args)
    ckpt = tf.train.Checkpoint(step=step_var, **model.checkpoint_items())
    manager = tf.train.CheckpointManager(ckpt, out_dir, max_to_keep=args.keep_checkpoints, checkpoint_name="ckpt")
    if manager.latest_checkpoint:
        ckpt.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        print(f"resumed from step {int(step_var.numpy())} ({manager.latest_checkpoint})", flush=True)
    step = int(step_var.numpy())

    def save(step: int) -> None:
        step_var.assign(step)
        path = manager.save(checkpoint_number=step)
        print(f"saved checkpoint step={step} path={path}", flush=True)

    print(f"tf_parameter_server.py: ParameterServerStrategy coordinator, workers={n_workers} ps={n_ps} "
          f"batch={args.batch_size} lr={args.lr:g} warmup={warmup} total_steps={total_steps} "
          f"start_step={step}", flush=True)
    start_step, last_saved = step, step
    final_loss = float("nan")
    pending, win_start, run_start = [], time.perf_counter(), time.perf_counter()
    while step < total_steps:
        lr = args.lr * common.lr_factor(step, warmup)
        pending.append(coordinator.schedule(worker_fn, args=(per_worker_iterator, tf.constant(lr, tf.float32))))
        step += 1
        boundary = step % args.log_every == 0 or step == total_steps or step == start_step + 1
        saving = bool(args.checkpoint_every) and step % args.checkpoint_every == 0
        if boundary or saving:
            coordinator.join()  # wait until every scheduled step has finished
            final_loss = sum(float(rv.fetch()) for rv in pending) / len(pending)
            rate = len(pending) * args.batch_size / max(time.perf_counter() - win_start, 1e-9)
            logger.log({"loss": final_loss, "lr": lr, "samples_per_s": rate}, step)
            if step == start_step + 1:
                print(f"first_loss={final_loss:.6f} step={step}", flush=True)
            pending, win_start = [], time.perf_counter()
        if saving:
            save(step)
            last_saved = step
    coordinator.join()
    if last_saved != step:
        save(step)
    elapsed = time.perf_counter() - run_start
    print(f"coordinator samples_per_s={(step - start_step) * args.batch_size / max(elapsed, 1e-9):.1f} "
          f"time_s={elapsed:.2f}", flush=True)
    print(f"final_loss={final_loss:.6f} step={step}", flush=True)
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = tf_common.read_tf_config(__file__)
    if not cfg["cluster"].get("ps"):
        common.fail(__file__, "TF_CONFIG has no ps tasks; use tf_multiworker.py (MultiWorkerMirroredStrategy) "
                              "or set parameter_server_count in the job")
    try:
        cfg, note = map_azure_cluster(cfg)
    except ValueError as exc:
        common.fail(__file__, str(exc))
    os.environ["TF_CONFIG"] = json.dumps(cfg)  # what TFConfigClusterResolver reads
    print(f"tf_parameter_server.py: {note}", flush=True)
    if cfg["task"]["type"] in ("ps", "worker"):
        code = serve_until_coordinator_exits(cfg, args)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # skip TF's server teardown, which can block
    return coordinate(cfg, args)


if __name__ == "__main__":
    sys.exit(main())
