"""main(): the entry point and the one error boundary. dtrain's errors carry an exit code and a hint and
print as one message on stderr; anything else is a dtrain bug, said briefly (--debug: the traceback)."""
from __future__ import annotations

import os
import sys

import typer

from ..errors import DtrainError
from ..exitcodes import ExitCode
from .app import app


def _click_exceptions():
    """Typer >= 0.26 vendors click as typer._click; older releases use click itself."""
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click import exceptions  # type: ignore[no-redef]
    return exceptions


def _silence_closed_pipes() -> None:
    """`dtrain logs X | head`: the reader is gone, which is not an error (exit 0, as documented). Point
    stdout and stderr at /dev/null so the interpreter's final flush does not complain either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):  # not a real file (e.g. captured in a test)
            pass
    os.close(devnull)


def _traceback(exc: BaseException) -> None:
    """--debug: the traceback, with whatever secret it holds (a token in a request's repr) redacted."""
    from ..output import err
    from ..untrusted import redact_traceback

    err(redact_traceback(exc).rstrip("\n"))


def _dtrain_error(exc: DtrainError, debug: bool) -> int:
    if debug:
        _traceback(exc)
    from ..errors import SpecError
    from ..output import error, print_diagnostics, summary_line

    if isinstance(exc, SpecError):
        print_diagnostics(exc.diagnostics)
        error(f"{exc.message} ({summary_line(exc.diagnostics)}); nothing was submitted")
    else:
        error(exc.message, exc.hint)
    return int(exc.exit_code)


def _click_error(exc) -> int:
    from ..output import err, error

    if type(exc).__name__ == "NoArgsIsHelpError":  # bare `dtrain`: the help, not an error
        err(exc.format_message())
        return int(ExitCode.INVALID)
    error(exc.format_message(), "run `dtrain --help` or `dtrain COMMAND --help`")
    return int(ExitCode.INVALID)


def main(argv=None) -> int:
    """Entry point and the one error boundary: our errors print one message (and hint) on stderr."""
    from ..output import PipeClosed, error

    click = _click_exceptions()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        rv = app(args=argv, prog_name="dtrain", standalone_mode=False)
        return int(rv or 0)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except DtrainError as exc:
        return _dtrain_error(exc, debug)
    except (typer.Abort, KeyboardInterrupt):
        error("interrupted")
        return int(ExitCode.INTERRUPTED)
    except click.ClickException as exc:
        return _click_error(exc)
    except PipeClosed:
        _silence_closed_pipes()
        return int(ExitCode.OK)
    except Exception as exc:  # a dtrain bug: say so, briefly
        if debug:
            raise                     # the bug itself, with its traceback (redacted by run()'s hook)
        error(f"internal error: {type(exc).__name__}: {exc}",
              "this is a dtrain bug; rerun with --debug for the traceback and report it")
        return int(ExitCode.INTERNAL)


def _redacted_excepthook(kind, exc, tb) -> None:
    from ..untrusted import redact_traceback

    sys.stderr.write(redact_traceback(exc.with_traceback(tb)))


def run() -> None:
    sys.excepthook = _redacted_excepthook     # --debug lets a bug through: its traceback is redacted too
    sys.exit(main())
