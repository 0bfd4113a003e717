"""Job statuses, typed: Azure ML's (JobStatus in the REST spec; the local backend uses the same words)
and dtrain's own, kept apart, with what each one means for the exit-code contract.

A status is a str enum, so it compares equal to the text a service or a state file holds and prints as
that text in JSON; `JobStatus.parse` maps any text to a member (an unknown one to Unknown, never an
error: a newer service may add statuses).
"""
from __future__ import annotations

from enum import StrEnum

from .exitcodes import ExitCode


class JobStatus(StrEnum):
    # Azure ML's, in the order a job moves through them (REST spec, JobStatus)
    NOT_STARTED = "NotStarted"
    STARTING = "Starting"
    PROVISIONING = "Provisioning"
    PREPARING = "Preparing"
    QUEUED = "Queued"
    RUNNING = "Running"
    FINALIZING = "Finalizing"
    CANCEL_REQUESTED = "CancelRequested"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELED = "Canceled"
    NOT_RESPONDING = "NotResponding"
    PAUSED = "Paused"
    UNKNOWN = "Unknown"
    # dtrain's own: a retry chain between attempts, and a local job whose state file cannot be read
    RETRYING = "Retrying"
    UNREADABLE = "Unreadable"

    @classmethod
    def parse(cls, text) -> "JobStatus":
        try:
            return cls(str(text))
        except ValueError:
            return cls.UNKNOWN

    @property
    def terminal(self) -> bool:
        return self in _EXIT

    @property
    def dtrain_own(self) -> bool:
        """A status dtrain gives, not one the service (or a local job's supervisor) reports."""
        return self in (JobStatus.RETRYING, JobStatus.UNREADABLE)

    @property
    def exit_code(self) -> ExitCode:
        """What an ended job with this status exits with; a status that does not end a job: lost track."""
        return _EXIT.get(self, ExitCode.LOST)


_EXIT = {
    JobStatus.COMPLETED: ExitCode.OK,
    JobStatus.FAILED: ExitCode.JOB_FAILED,
    JobStatus.CANCELED: ExitCode.CANCELED,
    JobStatus.NOT_RESPONDING: ExitCode.INFRA,
    JobStatus.PAUSED: ExitCode.INFRA,
    JobStatus.UNREADABLE: ExitCode.LOST,
}

TERMINAL = frozenset(_EXIT)

# Worst last: `dtrain wait A B` exits with the worst outcome of all.
_SEVERITY = [ExitCode.OK, ExitCode.CANCELED, ExitCode.JOB_FAILED, ExitCode.TIMEOUT, ExitCode.INFRA,
             ExitCode.LOST]


def is_terminal(status) -> bool:
    return JobStatus.parse(status).terminal


def exit_code(info) -> ExitCode:
    """The exit code one ended job (a JobInfo) stands for: limits.timeout first, then its status."""
    if info.timed_out:
        return ExitCode.TIMEOUT
    return JobStatus.parse(info.status).exit_code


def worst(codes) -> ExitCode:
    codes = list(codes) or [ExitCode.OK]
    return max(codes, key=lambda c: _SEVERITY.index(c) if c in _SEVERITY else len(_SEVERITY))
