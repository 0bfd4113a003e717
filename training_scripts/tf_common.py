"""TensorFlow helpers shared by tf_multiworker.py and tf_parameter_server.py.

  * ``read_tf_config``  -- parse and sanity-check TF_CONFIG (exit 2 if absent)
  * ``MLP``             -- the student model as plain tf.Variables (tf.Module)
  * ``sgd_update``      -- Nesterov momentum SGD written out by hand

The model and optimizer are plain tf.Variables instead of Keras objects on
purpose: they behave the same under MultiWorkerMirroredStrategy and
ParameterServerStrategy, whatever Keras version is installed, and the update
rule stays visible.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Any, Dict, List

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported

# The Quickstart install (dtrain[torch]) has no TensorFlow: say what to add, in one line, before
# anything else is imported (numpy arrives with TensorFlow too).
TF_MISSING = ("TensorFlow is not installed; add it with pip install 'dtrain[tensorflow]' "
              "(tensorflow-cpu), or put tensorflow in the job's environment")
if importlib.util.find_spec("tensorflow") is None:
    print(f"{os.path.basename(sys.argv[0] or 'tf_common.py')}: {TF_MISSING}", file=sys.stderr, flush=True)
    sys.exit(2)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def read_tf_config(script: str) -> Dict[str, Any]:
    """TF_CONFIG as a dict; exits with code 2 when missing or malformed."""
    raw = os.environ.get("TF_CONFIG", "").strip()
    if not raw:
        common.fail(script, "TF_CONFIG not set; launch it with dtrain (distribution: tensorflow) "
                            "or set TF_CONFIG per process")
    try:
        cfg = json.loads(raw)
        cluster, task = cfg["cluster"], cfg["task"]
        kind, index = task["type"], int(task["index"])
        hosts: List[str] = cluster[kind]
        hosts[index]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        common.fail(script, f"TF_CONFIG is malformed ({type(exc).__name__}: {exc}); expected "
                            '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": 0}}')
    return cfg


def threads_for_cluster(cfg: Dict[str, Any]) -> int:
    """Intra-op threads: CPU cores split between the tasks on this host (all
    tasks whose address starts with this task's host)."""
    task = cfg["task"]
    my_host = cfg["cluster"][task["type"]][int(task["index"])].rsplit(":", 1)[0]
    local = sum(1 for hosts in cfg["cluster"].values() for h in hosts if h.rsplit(":", 1)[0] == my_host)
    return common.cpu_threads(local)


def configure_threads(n: int) -> None:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(n)


class MLP:
    """``layers`` x (Dense + GELU) followed by a linear output layer.

    Weights are initialised from numpy with ``seed`` so every worker builds
    the same initial model (and a restart without checkpoint is reproducible).
    Create it inside ``strategy.scope()``.
    """

    def __init__(self, in_dim: int, hidden: int, layers: int, out_dim: int, seed: int,
                 aggregation=None):
        import tensorflow as tf

        rng = np.random.default_rng(seed + 12345)
        agg = aggregation or tf.VariableAggregation.NONE
        self.variables: List[Any] = []
        width = in_dim
        for i in range(max(1, layers) + 1):
            out = out_dim if i == max(1, layers) else hidden
            w = rng.uniform(-1, 1, (width, out)) / np.sqrt(width)
            self.variables.append(tf.Variable(w.astype(np.float32), name=f"w{i}", aggregation=agg))
            self.variables.append(tf.Variable(np.zeros(out, np.float32), name=f"b{i}", aggregation=agg))
            width = out
        self.momentum = [tf.Variable(np.zeros(v.shape, np.float32), trainable=False, name=f"m{i}",
                                     aggregation=agg) for i, v in enumerate(self.variables)]

    def __call__(self, x):
        import tensorflow as tf

        h = x
        n = len(self.variables) // 2
        for i in range(n):
            h = tf.matmul(h, self.variables[2 * i]) + self.variables[2 * i + 1]
            if i < n - 1:
                h = tf.nn.gelu(h)
        return h

    def checkpoint_items(self) -> Dict[str, Any]:
        items = {f"v{i}": v for i, v in enumerate(self.variables)}
        items.update({f"m{i}": m for i, m in enumerate(self.momentum)})
        return items


def sgd_update(model: MLP, grads, lr, momentum: float = 0.9) -> None:
    """Nesterov momentum SGD (the same rule as torch.optim.SGD(nesterov=True))."""
    for v, m, g in zip(model.variables, model.momentum, grads):
        m_new = momentum * m + g
        m.assign(m_new)
        v.assign_sub(lr * (g + momentum * m_new))
