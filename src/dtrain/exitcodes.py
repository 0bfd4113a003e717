"""The exit-code contract every dtrain command follows (documented in docs/exit-codes.md)."""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0              # success / job Completed
    JOB_FAILED = 1      # the job ran and Failed
    INVALID = 2         # invalid input or usage; nothing was submitted
    CANCELED = 3        # the job was Canceled
    TIMEOUT = 4         # waiting timed out, or the job hit limits.timeout
    INFRA = 5           # NotResponding, Paused, preempted or lost nodes
    CONFIG = 6          # authentication, workspace or configuration error
    LOST = 7            # lost track of a job (status unreadable after retries)
    INTERNAL = 70       # internal error: a dtrain bug (EX_SOFTWARE in sysexits.h)
    INTERRUPTED = 130   # Ctrl-C while waiting; the job keeps running


HELP_TEXT = """Exit codes: 0 success/Completed, 1 job Failed, 2 invalid input (nothing submitted),
3 Canceled, 4 timed out, 5 infrastructure (NotResponding, Paused, lost nodes),
6 authentication/workspace/configuration, 7 lost track of a job,
70 internal error (a dtrain bug), 130 interrupted (the job keeps running)."""
