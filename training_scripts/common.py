"""Framework-free helpers shared by the training scripts (stdlib + numpy only).

Every script in this folder does ``sys.path.insert(0, <this folder>)`` and then
``import common``, so a script keeps working when it is copied together with
this file into any code folder and launched from any working directory.

What lives here:
  * ``fail``            -- print a one-line error and exit with code 2
  * ``env_int``         -- read an integer environment variable
  * ``make_dataset``    -- the synthetic, learnable regression data (or --data-dir)
  * ``add_common_args`` -- the arguments all scripts share
  * ``atomic_write``    -- temp file in the same dir + fsync + os.replace
  * ``list_checkpoints``-- find checkpoint files by step number
  * ``MetricLogger``    -- print metrics and log them to MLflow when configured
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from typing import Callable, Dict, List, NoReturn, Optional, Tuple

import numpy as np

EXIT_ENV = 2  # exit code when the launch environment is missing or wrong


def fail(script: str, message: str, code: int = EXIT_ENV) -> NoReturn:
    """Print ``<script>: <message>`` on one line to stderr and exit."""
    print(f"{os.path.basename(script)}: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def leave(code: int) -> NoReturn:
    """Exit a torch.distributed script once its work is done and saved.

    Python's exit handlers run (MLflow ends its run there) and output is flushed, then the process
    leaves without C++ static destructors: gloo's and the TCPStore's can abort a rank at interpreter
    exit when a peer has already gone ("terminate called without an active exception", SIGABRT),
    failing a run whose checkpoints are all written.
    """
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def env_int(name: str, default: Optional[int] = None) -> Optional[int]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return int(value)


def cpu_threads(local_world_size: int) -> int:
    """CPU threads per process so that N local processes do not oversubscribe."""
    return max(1, (os.cpu_count() or 1) // max(1, local_world_size))


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------

def make_dataset(samples: int, in_dim: int, out_dim: int, seed: int,
                 noise: float = 0.01) -> Tuple[np.ndarray, np.ndarray]:
    """Synthetic regression data from a fixed, seeded random *teacher* network.

    x ~ N(0, 1)^in_dim, y = tanh(x @ W1) @ W2 + noise.  The teacher is a
    function of ``seed`` only, so every rank (and every restart) builds exactly
    the same dataset without any communication, and a student MLP can learn it:
    the loss goes from ~1 to close to the noise floor.
    """
    rng = np.random.default_rng(seed)
    teacher_hidden = 32
    w1 = rng.standard_normal((in_dim, teacher_hidden)) / np.sqrt(in_dim)
    w2 = rng.standard_normal((teacher_hidden, out_dim)) / np.sqrt(teacher_hidden)
    x = rng.standard_normal((samples, in_dim))
    y = np.tanh(x @ w1 * 1.5) @ w2
    y = y / (y.std() + 1e-8)  # unit variance target: initial MSE is ~1
    y = y + noise * rng.standard_normal(y.shape)
    return x.astype(np.float32), y.astype(np.float32)


def load_data_dir(path: str) -> Tuple[np.ndarray, np.ndarray]:
    """Load a real dataset: ``<path>/x.npy`` (float, [N, D_in]) and
    ``<path>/y.npy`` (float, [N, D_out] or [N]).  Names are case-insensitive
    (``X.npy`` works too).  Returns float32 arrays, y always 2-D."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"--data-dir {path!r} is not a directory")
    files = {name.lower(): os.path.join(path, name) for name in os.listdir(path)}
    missing = [n for n in ("x.npy", "y.npy") if n not in files]
    if missing:
        raise FileNotFoundError(
            f"--data-dir {path!r} must contain x.npy and y.npy (missing: {', '.join(missing)})")
    x = np.load(files["x.npy"]).astype(np.float32)
    y = np.load(files["y.npy"]).astype(np.float32)
    if x.ndim != 2:
        x = x.reshape(len(x), -1)
    if y.ndim == 1:
        y = y[:, None]
    if len(x) != len(y):
        raise ValueError(f"x.npy has {len(x)} rows but y.npy has {len(y)}")
    return x, y


def get_data(args: argparse.Namespace) -> Tuple[np.ndarray, np.ndarray]:
    """The dataset for ``args``: ``--data-dir`` when given, else synthetic."""
    if args.data_dir:
        return load_data_dir(args.data_dir)
    return make_dataset(args.samples, args.in_dim, args.out_dim, args.seed)


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------

def add_common_args(p: argparse.ArgumentParser, *, batch_size: int = 32, lr: float = 0.1,
                    epochs: int = 4, samples: int = 2048, hidden: int = 64,
                    checkpoint_every: int = 50) -> argparse.ArgumentParser:
    p.add_argument("--epochs", type=int, default=epochs, help="passes over the data (default %(default)s)")
    p.add_argument("--steps", type=int, default=0,
                   help="stop at this global optimizer step (total, counting resumed steps); 0 = no cap")
    p.add_argument("--batch-size", type=int, default=batch_size, help="per-process batch size (default %(default)s)")
    p.add_argument("--lr", type=float, default=lr, help="base learning rate for --ref-batch-size samples")
    p.add_argument("--ref-batch-size", type=int, default=None,
                   help="batch size --lr was tuned for; the LR is scaled by global_batch/ref "
                        "(linear scaling rule). Default: --batch-size, i.e. lr x world_size")
    p.add_argument("--warmup-steps", type=int, default=None,
                   help="linear LR warm-up steps (default: 10%% of the planned steps)")
    p.add_argument("--hidden", "--model-size", dest="hidden", type=int, default=hidden,
                   help="hidden width of the MLP (default %(default)s)")
    p.add_argument("--layers", type=int, default=2, help="hidden layers of the MLP (default %(default)s)")
    p.add_argument("--samples", type=int, default=samples, help="synthetic samples (default %(default)s)")
    p.add_argument("--in-dim", type=int, default=16, help="synthetic input features")
    p.add_argument("--out-dim", type=int, default=4, help="synthetic outputs")
    p.add_argument("--data-dir", default=None, help="folder with x.npy and y.npy instead of synthetic data")
    p.add_argument("--output-dir", default=None,
                   help="checkpoint folder (Azure: ${{outputs.checkpoints}}); default ./outputs/checkpoints")
    p.add_argument("--checkpoint-every", type=int, default=checkpoint_every,
                   help="save a checkpoint every N steps (and at the end); 0 = only at the end")
    p.add_argument("--keep-checkpoints", type=int, default=3, help="how many checkpoints to keep")
    p.add_argument("--log-every", type=int, default=10, help="print metrics every N steps")
    p.add_argument("--seed", type=int, default=0)
    return p


def output_dir(args: argparse.Namespace) -> str:
    path = args.output_dir or os.path.join(os.getcwd(), "outputs", "checkpoints")
    os.makedirs(path, exist_ok=True)
    return path


# --------------------------------------------------------------------------
# Checkpoint files
# --------------------------------------------------------------------------

def atomic_write(path: str, write: Callable[[object], None]) -> None:
    """Write a file so that readers only ever see a complete file.

    ``write(fileobj)`` writes into a temp file in the *same directory* (so the
    final rename never crosses a filesystem), which is flushed and fsync'ed,
    then renamed over ``path`` with ``os.replace`` (atomic on POSIX), and the
    directory entry is fsync'ed too.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o644)  # mkstemp creates 0600; checkpoints are ordinary files
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # persist the rename itself; not supported on every filesystem (e.g. blobfuse)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def list_checkpoints(directory: str, prefix: str, suffix: str) -> Dict[int, str]:
    """``{step: path}`` for files named ``<prefix><step><suffix>`` (temp files ignored)."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)" + re.escape(suffix) + r"$")
    found: Dict[int, str] = {}
    if not os.path.isdir(directory):
        return found
    for name in os.listdir(directory):
        m = pattern.match(name)
        if m:
            found[int(m.group(1))] = os.path.join(directory, name)
    return found


def prune_checkpoints(directory: str, prefix: str, suffix: str, keep: int) -> None:
    found = list_checkpoints(directory, prefix, suffix)
    for step in sorted(found)[:-keep] if keep > 0 else []:
        try:
            os.unlink(found[step])
        except FileNotFoundError:
            pass


# --------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------

class MetricLogger:
    """Prints metrics and logs them to MLflow.

    MLflow is used only when ``MLFLOW_TRACKING_URI`` is set (Azure ML sets it in
    every job, dtrain in every local job) and ``import mlflow`` works; any MLflow
    error is reported once and then ignored -- metrics must never fail a training run.

    The main rank (``enabled``) prints and logs the job's metrics, under the names
    dtrain shows (``lr`` is logged as ``learning_rate``); with ``rank``, every
    rank logs its own throughput as ``samples_per_s_rank<R>`` (``log_rank``).
    Per-rank throughput is never printed per step: each rank prints its own once, at the end.
    """

    MLFLOW_NAMES = {"lr": "learning_rate"}

    def __init__(self, enabled: bool = True, rank: Optional[int] = None):
        self.enabled = enabled
        self.rank = rank
        self._mlflow = None
        if (enabled or rank is not None) and os.environ.get("MLFLOW_TRACKING_URI"):
            try:
                import mlflow  # type: ignore

                self._mlflow = mlflow
            except Exception:  # not installed or broken: print only
                self._mlflow = None

    def log(self, metrics: Dict[str, float], step: int, prefix: str = "",
            unprinted: Optional[Dict[str, float]] = None) -> None:
        """Prints ``metrics`` and logs them to MLflow; ``unprinted`` goes to MLflow only
        (per-rank throughput: 16 ranks would make a ~500-character step line)."""
        if not self.enabled:
            return
        text = " ".join(f"{k}={_fmt(v)}" for k, v in metrics.items())
        print(f"{prefix}step={step} {text}", flush=True)
        sent = {**metrics, **(unprinted or {})}
        self._send({self.MLFLOW_NAMES.get(k, k): float(v) for k, v in sent.items()}, step)

    def log_rank(self, samples_per_s: float, step: int) -> None:
        """This rank's own throughput, to MLflow only (every rank calls it)."""
        if self.rank is not None:
            self._send({f"samples_per_s_rank{self.rank}": float(samples_per_s)}, step)

    def _send(self, metrics: Dict[str, float], step: int) -> None:
        if self._mlflow is not None:
            try:
                self._mlflow.log_metrics(metrics, step=step)
            except Exception as exc:  # noqa: BLE001
                print(f"mlflow logging disabled: {exc}", file=sys.stderr, flush=True)
                self._mlflow = None


def _fmt(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    if abs(v) >= 100:
        return f"{v:.1f}"
    return f"{v:.4f}" if abs(v) >= 1e-3 or v == 0 else f"{v:.3e}"


def plan_steps(args: argparse.Namespace, steps_per_epoch: int) -> int:
    """Total optimizer steps: --epochs worth of steps, capped by --steps."""
    total = args.epochs * steps_per_epoch
    if args.steps and args.steps > 0:
        total = min(total, args.steps) if args.epochs > 0 else args.steps
    return total


def lr_factor(step: int, warmup: int) -> float:
    """Linear warm-up from 1/warmup to 1 over ``warmup`` steps, then constant."""
    if warmup <= 0:
        return 1.0
    return min(1.0, (step + 1) / warmup)


__all__: List[str] = [
    "EXIT_ENV", "fail", "env_int", "cpu_threads", "make_dataset", "load_data_dir", "get_data",
    "add_common_args", "output_dir", "atomic_write", "list_checkpoints", "prune_checkpoints",
    "MetricLogger", "plan_steps", "lr_factor", "add_torch_args",
]


def add_torch_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--no-bf16", action="store_true", help="disable bf16 autocast on GPU")
    p.add_argument("--fp32", action="store_true",
                   help="plain fp32 on GPU: no bf16 autocast and no TF32 (the baseline for benchmarks)")
    return p
