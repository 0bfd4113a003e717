"""The local backend: runs a job on this machine as Azure ML would run it on a cluster.

N emulated nodes x P processes, each with the environment Azure ML gives it, detached under a supervisor
(supervisor.py), with state and logs under $DTRAIN_HOME/jobs/<name>/ (store.py). LocalBackend (backend.py) is
the Backend; plan.py builds what it runs.
"""
from .backend import LocalBackend
from .plan import LocalPlan, LocalProcess

__all__ = ["LocalBackend", "LocalPlan", "LocalProcess"]
