"""dtrain's own errors. Each carries an exit code and a hint; cli.main() is the one place that prints them."""
from __future__ import annotations

from .exitcodes import ExitCode


class DtrainError(Exception):
    exit_code: ExitCode = ExitCode.INVALID

    def __init__(self, message: str, *, hint: str | None = None, exit_code: ExitCode | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(DtrainError):
    """Bad command-line input: exit 2."""


class LogsUnavailable(UsageError):
    """A job's logs cannot be read where they are kept (storage refuses the listing): `logs` exits 2; a
    follower (submit --wait, wait) says so once and goes on following the job's status."""


class SpecError(DtrainError):
    """A spec that cannot be loaded or is invalid. Carries every diagnostic found, not only the first."""

    def __init__(self, diagnostics, message: str | None = None):
        self.diagnostics = list(diagnostics)
        n = sum(1 for d in self.diagnostics if d.severity == "error")
        super().__init__(message or f"{n} error{'s' if n != 1 else ''} in the job spec")


class ConfigError(DtrainError):
    """Workspace, credential or configuration problems: exit 6."""

    exit_code = ExitCode.CONFIG


class JobNotFound(DtrainError):
    exit_code = ExitCode.INVALID


class LostTrack(DtrainError):
    exit_code = ExitCode.LOST


class BackendError(DtrainError):
    """A backend could not do what was asked (infrastructure side)."""

    exit_code = ExitCode.INFRA
