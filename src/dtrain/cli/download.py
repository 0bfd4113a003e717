"""dtrain download: a job's output files and logs into a folder (`az ml job download`), resumable."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import UsageError
from .app import app
from .options import JobName, Local, Output, ResourceGroup, Subscription, WorkspaceName, check_output, emit, runner, \
    workspace


@app.command()
def download(
    name: JobName,
    output_name: Optional[str] = typer.Option(None, "--output-name", metavar="N", help="Only this output."),
    all_: bool = typer.Option(False, "--all", help="Every output and every log."),
    logs: bool = typer.Option(False, "--logs", help="The logs (alone, or with --output-name's output)."),
    path: Optional[Path] = typer.Option(None, "--path", "--download-path", "-p", metavar="DIR",
                                        help="Where to put them (default ./NAME)."),
    output: Output = "text",
    local: Local = False,
    subscription: Subscription = None,
    resource_group: ResourceGroup = None,
    workspace_: WorkspaceName = None,
):
    """Download a job's outputs (named-outputs/OUTPUT/...) and logs (logs/...), byte for byte: without options
    every output, --output-name one, --logs the logs, --all both. Run it again to resume: complete files are
    not fetched again, and a different file already in the folder is never overwritten (exit 2)."""
    check_output(output, ("text", "json"))
    if output_name and all_:
        raise UsageError("--output-name and --all exclude each other", hint="--all already downloads every output")
    outputs = [output_name] if output_name else (None if all_ or not logs else [])
    ws = workspace(subscription, resource_group, workspace_, local)
    bar = _Bar() if sys.stderr.isatty() and output == "text" else None
    try:
        report = runner(ws).download(name, path, outputs=outputs, logs=logs or all_, local=local, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    if output != "text":
        return emit(report.to_dict(), output)
    from ..output import err, out

    err(f"{len(report.fetched)} file(s) downloaded ({report.bytes} bytes), {len(report.skipped)} already complete")
    out(report.folder)


class _Bar:
    """A one-line byte count on a terminal, rewritten in place (never on a pipe)."""

    def __call__(self, total: int):
        self.total, self.done = max(total, 1), 0
        return self.advance

    def advance(self, n: int) -> None:
        from ..output import _write

        self.done += n
        pct = 100 * self.done // self.total
        _write(sys.stderr, f"\r\033[Kdownloading [{'#' * (pct // 5):<20}] {pct:3d}% {self.done}/{self.total} bytes")

    def close(self) -> None:
        from ..output import _write

        if getattr(self, "done", None) is not None:
            _write(sys.stderr, "\r\033[K")
