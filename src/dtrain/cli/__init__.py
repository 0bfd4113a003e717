"""The dtrain command line: one module per command (or group of commands), each turning its options
into one call of the runner (dtrain.runner) and its events into output (dtrain.output). main() is the
one error boundary."""
from __future__ import annotations

# In the order `dtrain --help` lists them.
from . import spec_cmds, template_cmds, submit, cost, scale, jobs, listing, manage, download, clean, logs_metrics, wait_watch, why, top, config  # noqa: F401,I001  (register)
from .app import app
from .boundary import main, run

__all__ = ["app", "main", "run"]
