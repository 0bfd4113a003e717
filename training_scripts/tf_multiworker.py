"""TensorFlow multi-worker training from TF_CONFIG (Azure ML `distribution: tensorflow`).

What it shows
  Azure ML sets TF_CONFIG in every process of a `distribution: {type:
  tensorflow, worker_count: N}` job:
      {"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": i}}
  * no "ps" in the cluster -> synchronous data parallelism with
    tf.distribute.MultiWorkerMirroredStrategy (collective all-reduce of the
    gradients; worker 0 is the chief).
  * "ps" in the cluster (parameter_server_count > 0) -> this script hands
    over to tf_parameter_server.py (asynchronous ParameterServerStrategy),
    see that file for how Azure ML's worker+ps cluster is mapped onto TF's
    chief/worker/ps model.
  Each worker reads its own shard of a per-epoch permutation of the data
  (identical on all workers, so no data is exchanged), the step is a custom
  training loop (strategy.run + explicit all-reduce + momentum SGD with the
  linear scaling rule and warm-up), metrics are printed and logged to MLflow
  by the chief.  Checkpoints: tf.train.CheckpointManager every
  --checkpoint-every steps.  Every worker must take part in a save (the
  variables are read collectively): the chief writes into --output-dir, the
  other workers into a temporary directory that is deleted right away (the
  pattern TensorFlow documents).  TF writes the data files first and the
  small "checkpoint" index last via an atomic rename, so a crash never leaves
  a half-written checkpoint selected.  Every worker restores the latest
  checkpoint from --output-dir at start and continues at that step and
  position in the epoch.

How to run (one process per worker, each with its own TF_CONFIG):
  TF_CONFIG='{"cluster":{"worker":["localhost:12345","localhost:12346"]},"task":{"type":"worker","index":0}}' \
      python training_scripts/tf_multiworker.py --output-dir /tmp/ckpt &
  TF_CONFIG='{"cluster":{"worker":["localhost:12345","localhost:12346"]},"task":{"type":"worker","index":1}}' \
      python training_scripts/tf_multiworker.py --output-dir /tmp/ckpt
  Azure ML / dtrain:
    command: python tf_multiworker.py --output-dir ${{outputs.checkpoints}}
    distribution: {type: tensorflow, worker_count: 2}            # this file
    distribution: {type: tensorflow, worker_count: 3, parameter_server_count: 1}
                                                                  # -> tf_parameter_server.py

Environment (required): TF_CONFIG.  Without it it exits with code 2.
Output (chief): "first_loss=<x> step=<n>" and, last, "final_loss=<x> step=<n>".
Runs on CPU (tensorflow-cpu); on GPUs each worker uses the GPUs it sees.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tf_common  # noqa: E402  (first: exits 2 naming what to add when TensorFlow is missing)
import common  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="TensorFlow MultiWorkerMirroredStrategy training from TF_CONFIG")
    common.add_common_args(p)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = tf_common.read_tf_config(__file__)
    if cfg["cluster"].get("ps"):
        import tf_parameter_server

        return tf_parameter_server.main(argv)

    import numpy as np
    import tensorflow as tf

    tf_common.configure_threads(tf_common.threads_for_cluster(cfg))
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    workers = len(cfg["cluster"]["worker"])
    task_type, task_id = resolver.task_type, resolver.task_id
    # The chief is the "chief" task if there is one, else worker 0.
    is_chief = task_type == "chief" or (task_type == "worker" and task_id == 0 and "chief" not in cfg["cluster"])
    n_tasks = sum(len(v) for v in cfg["cluster"].values())
    my_index = (1 if "chief" in cfg["cluster"] and task_type == "worker" else 0) + task_id
    logger = common.MetricLogger(enabled=is_chief, rank=my_index)

    # ---- data: the same per-epoch permutation everywhere, one shard per worker ----
    x, y = common.get_data(args)
    args.in_dim, args.out_dim = x.shape[1], y.shape[1]
    per_worker = len(x) // n_tasks
    # --batch-size is per replica; a worker with several GPUs has several replicas.
    local_replicas = max(1, strategy.num_replicas_in_sync // n_tasks)
    steps_per_epoch = per_worker // (args.batch_size * local_replicas)
    if steps_per_epoch == 0:
        common.fail(__file__, f"{len(x)} samples are not enough for {n_tasks} workers x batch {args.batch_size}",
                    code=1)
    total_steps = common.plan_steps(args, steps_per_epoch)
    global_batch = args.batch_size * strategy.num_replicas_in_sync
    lr = args.lr * global_batch / (args.ref_batch_size or args.batch_size)
    warmup = args.warmup_steps if args.warmup_steps is not None else \
        max(1, min(100, args.epochs * steps_per_epoch // 10))

    def epoch_dataset(epoch: int, skip_batches: int):
        perm = np.random.default_rng(args.seed + epoch).permutation(len(x))
        mine = perm[my_index * per_worker:(my_index + 1) * per_worker]

        def dataset_fn(ctx: tf.distribute.InputContext):
            batch = ctx.get_per_replica_batch_size(global_batch)
            ds = tf.data.Dataset.from_tensor_slices((x[mine], y[mine]))
            return ds.batch(batch, drop_remainder=True).skip(skip_batches * local_replicas).prefetch(2)

        options = tf.distribute.InputOptions(experimental_fetch_to_device=True)
        return strategy.distribute_datasets_from_function(dataset_fn, options)

    # ---- model + optimizer state, replicated on every worker ----
    with strategy.scope():
        # ONLY_FIRST_REPLICA: the update uses all-reduced gradients, so every
        # replica computes the same new value; one copy is written everywhere.
        agg = tf.VariableAggregation.ONLY_FIRST_REPLICA
        model = tf_common.MLP(args.in_dim, args.hidden, args.layers, args.out_dim, args.seed, aggregation=agg)
        step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="step", aggregation=agg)

    @tf.function
    def train_step(iterator):
        def replica_fn(xb, yb):
            with tf.GradientTape() as tape:
                pred = model(xb)
                per_example = tf.reduce_mean(tf.square(pred - yb), axis=-1)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.variables)
            grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)
            factor = tf.minimum(1.0, tf.cast(step_var + 1, tf.float32) / float(warmup))
            tf_common.sgd_update(model, grads, lr * factor)
            step_var.assign_add(1)
            return loss

        xb, yb = next(iterator)
        per_replica = strategy.run(replica_fn, args=(xb, yb))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    # ---- checkpoints: chief -> --output-dir, other workers -> a temp dir ----
    out_dir = common.output_dir(args)
    ckpt = tf.train.Checkpoint(step=step_var, **model.checkpoint_items())
    write_dir = out_dir if is_chief else tempfile.mkdtemp(prefix=f"tf-ckpt-worker{task_id}-")
    manager = tf.train.CheckpointManager(ckpt, write_dir, max_to_keep=args.keep_checkpoints,
                                         checkpoint_name="ckpt")
    latest = tf.train.latest_checkpoint(out_dir)
    if latest:
        ckpt.restore(latest).assert_existing_objects_matched()
        if is_chief:
            print(f"resumed from step {int(step_var.numpy())} ({latest})", flush=True)
    step = int(step_var.numpy())

    def save(step: int) -> None:
        path = manager.save(checkpoint_number=step)  # collective: every worker saves
        if is_chief:
            print(f"saved checkpoint step={step} path={path}", flush=True)
        else:
            shutil.rmtree(write_dir, ignore_errors=True)

    if is_chief:
        print(f"tf_multiworker.py: MultiWorkerMirroredStrategy workers={workers} "
              f"replicas={strategy.num_replicas_in_sync} global_batch={global_batch} lr={lr:g} warmup={warmup} "
              f"steps_per_epoch={steps_per_epoch} total_steps={total_steps} start_step={step}", flush=True)

    start_step, last_saved = step, step
    final_loss = float("nan")
    win_loss, win_steps, win_start, run_start = 0.0, 0, time.perf_counter(), time.perf_counter()
    while step < total_steps:
        epoch, offset = divmod(step, steps_per_epoch)
        iterator = iter(epoch_dataset(epoch, offset))
        for _ in range(offset, steps_per_epoch):
            win_loss += float(train_step(iterator))
            step += 1
            win_steps += 1
            if step == start_step + 1 or step % args.log_every == 0 or step == total_steps:
                final_loss = win_loss / win_steps
                rate = win_steps * global_batch / max(time.perf_counter() - win_start, 1e-9)
                logger.log({"loss": final_loss, "samples_per_s": rate, "epoch": epoch}, step)
                logger.log_rank(rate / max(workers, 1), step)   # this worker's share of the global batch
                if step == start_step + 1 and is_chief:
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
    samples = (step - start_step) * args.batch_size * local_replicas
    print(f"worker={task_id} samples_per_s={samples / max(elapsed, 1e-9):.1f} time_s={elapsed:.2f}", flush=True)
    if is_chief:
        print(f"final_loss={final_loss:.6f} step={step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
