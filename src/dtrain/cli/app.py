"""The Typer application every command module registers on, and its root options."""
from __future__ import annotations

import typer

from .. import __version__
from ..exitcodes import HELP_TEXT

app = typer.Typer(
    name="dtrain",
    help="Validate, render and run Azure ML command jobs (PyTorch, TensorFlow, MPI), locally or on "
         "Azure ML.\n\n" + HELP_TEXT,
    no_args_is_help=True,
    add_completion=True,     # --install-completion / --show-completion (bash, zsh, fish), typer's protocol
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool):
    if value:
        print(f"dtrain {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
):
    pass  # --debug is read by main(), the error boundary, from argv
