"""The dtrain command line. Commands stay thin: they read specs through dtrain.spec, act through a
backend, and print through dtrain.output. main() is the one error boundary."""
from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from . import __version__
from .completion import local_job_names, template_names
from .errors import DtrainError, UsageError
from .exitcodes import HELP_TEXT, ExitCode

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

SetOpt = typer.Option(None, "--set", metavar="PATH=VALUE",
                      help="Override a spec value, as `az ml job create --set` does (repeatable).")
# Every command takes the same --output values (docs/monitoring.md): text, json (one document),
# jsonl (one compact object per line); `logs` alone streams, so it takes text or jsonl.
OUTPUTS = ("text", "json", "jsonl")
OutputOpt = typer.Option("text", "--output", "-o", help="text, json or jsonl.")
# Azure ML workspace: flags win over DTRAIN_*/AZURE_* variables, which win over config.json.
SubOpt = typer.Option(None, "--subscription", envvar=None, help="Azure subscription id.")
RgOpt = typer.Option(None, "--resource-group", "-g", help="Azure resource group.")
WsOpt = typer.Option(None, "--workspace", "-w", help="Azure ML workspace name.")
ExperimentOpt = typer.Option(None, "--experiment", help="Only jobs of this experiment.")
MatrixOpt = typer.Option(None, "--matrix", metavar="PATH=V1,V2",
                         help="One job per value, applied like --set; several --matrix: one job per combination "
                              "(the cross product). Every combination is validated before the first submit.")
MaxParallelOpt = typer.Option(None, "--max-parallel", metavar="K",
                              help="With --matrix (and scale): at most K jobs not yet ended at a time. Default: "
                                   "local, CPUs / processes per job (at least 1); Azure, no limit.")
TagOpt = typer.Option(None, "--tag", metavar="K=V", help="Only jobs with this tag (K alone: with this tag key).")


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


def _check_timeout(timeout) -> None:
    if timeout is not None and timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {timeout:g}")


def _check_output(value: str, allowed=OUTPUTS, hint: str | None = None) -> str:
    if value not in allowed:
        raise UsageError(f"--output must be one of {', '.join(allowed)}, not '{value}'", hint=hint)
    return value


def _useless(flag: str, given, why: str) -> None:
    """A flag that would do nothing in this combination is a usage error, not silently ignored."""
    if given:
        raise UsageError(f"{flag} {why}", hint="drop it, or see `dtrain COMMAND --help`")


def _local_only(local: bool, subscription, resource_group, workspace) -> None:
    if local:
        flags = [f for f, v in (("--subscription", subscription), ("--resource-group", resource_group),
                                ("--workspace", workspace)) if v]
        _useless(", ".join(flags), flags, "name an Azure ML workspace, and --local looks only at this machine")


def _emit(obj, output: str) -> None:
    """One document (json) or its items one per line (jsonl; a lone object is one line)."""
    from .output import out_json, out_jsonl

    if output == "jsonl":
        for item in (obj if isinstance(obj, list) else [obj]):
            out_jsonl(item)
    else:
        out_json(obj)


# --- spec commands ------------------------------------------------------------------------------

@app.command()
def validate(
    specs: List[str] = typer.Argument(..., metavar="SPEC...", help="Job YAML files."),
    set_: Optional[List[str]] = SetOpt,
    output: str = OutputOpt,
    strict: bool = typer.Option(False, "--strict", help="Treat warnings as errors (exit 2)."),
):
    """Check job specs offline: every problem at once, with file:line and a fix. Exit 2 on errors."""
    from .errors import SpecError
    from .output import err, print_diagnostics, summary_line
    from .spec.diagnostics import Diagnostic
    from .spec.validate import load_spec

    # ci (and the backend types it imports) is loaded only inside a CI, to keep validate's start-up lean
    in_ci = os.environ.get("GITHUB_ACTIONS") == "true" or os.environ.get("TF_BUILD", "").lower() == "true"

    _check_output(output)
    results, failed = [], False
    for path in specs:
        try:
            _, diags = load_spec(path, set_)
            ok = not (strict and any(d.severity == "warning" for d in diags))
        except SpecError as exc:
            diags, ok = exc.diagnostics, False
        except UsageError as exc:       # a missing or unreadable file: that file is invalid, the rest go on
            diags = [Diagnostic("error", exc.message, file=path, hint=exc.hint, code="unreadable-file")]
            ok = False
        failed |= not ok
        if in_ci:  # on the PR's lines in GitHub Actions / Azure Pipelines; stderr
            from .ci import annotate_diagnostics

            annotate_diagnostics(diags)
        results.append({"file": path, "valid": ok, "diagnostics": [d.to_dict() for d in diags]})
        if output == "text":
            print_diagnostics(diags)
            err(f"{path}: {'ok' if ok else 'invalid'} ({summary_line(diags)})")
    if output != "text":
        _emit(results if len(results) > 1 or output == "jsonl" else results[0], output)
    raise typer.Exit(ExitCode.INVALID if failed else ExitCode.OK)


@app.command()
def render(
    spec: str = typer.Argument(..., metavar="SPEC"),
    format: Optional[str] = typer.Option(None, "--format", help="yaml (the default; for az ml job create "
                                         "--file) or rest (the whole JSON body of the job PUT: "
                                         "{\"properties\": {...}})."),
    set_: Optional[List[str]] = SetOpt,
    local: bool = typer.Option(False, "--local", help="Print the local backend's plan instead: every "
                               "process with its command and environment."),
    name: Optional[str] = typer.Option(None, "--name", help="Job name to render with."),
    input_: Optional[List[str]] = typer.Option(None, "--input", metavar="NAME=PATH",
                                               help="Local path for an input (with --local)."),
):
    """Print exactly what would be submitted. No side effects: the same output every time (a local plan
    shows its ports, and a generated name, as placeholders that submit fills in)."""
    if format not in (None, "yaml", "rest"):
        raise UsageError(f"--format must be yaml or rest, not '{format}'")
    _useless("--format", local and format, "does not apply with --local, which prints the local plan as JSON")
    _useless("--input", input_ and not local, "only applies with --local (a local path for an input)")
    _print_rendered(_load(spec, set_), local=local, format=format or "yaml", name=name, inputs=input_)


def _print_rendered(spec_obj, *, local: bool, format: str, name, inputs) -> None:
    """What `render` prints, and `submit --dry-run` too: the local plan as JSON, or the Azure job (YAML
    or the REST body), rendered without loading the Azure SDK."""
    from .output import out, out_json

    session = _session()
    if local:
        out_json(session.plan(spec_obj, _submit_options(name, inputs), local=True).to_dict())
    elif format == "rest":
        out_json(session.render_azure(spec_obj, format="rest", name=name))
    else:
        out(session.render_azure(spec_obj, format="yaml", name=name))


@app.command()
def schema():
    """Print the JSON Schema of the job spec (for editor completion)."""
    from .output import out_json
    from .spec.schema import json_schema

    out_json(json_schema())


@app.command()
def templates(output: str = OutputOpt):
    """List the job templates, one line each."""
    from . import templates as t
    from .output import out

    _check_output(output)
    ts = t.all_templates()
    if output != "text":
        _emit([x.to_dict() for x in ts], output)
        return
    width = max(len(x.name) for x in ts)
    for x in ts:
        shape = f"{x.nodes}x{x.processes_per_node}"
        out(f"{x.name.ljust(width)}  {x.framework:<10} {shape:<5} {x.instance_type or '-':<26} {x.summary}")


@app.command()
def init(
    directory: str = typer.Argument(..., metavar="DIR"),
    template: str = typer.Option(..., "--template", "-t", help="Template name (see `dtrain templates`).",
                                 autocompletion=template_names),
    instance_type: Optional[str] = typer.Option(None, "--instance-type", help="Azure VM size; processes per "
                                                "node follow its GPU count."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="Number of nodes (resources.instance_count)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing job.yml."),
):
    """Write DIR/job.yml (a commented spec) and DIR/src/ (the training script) from a template."""
    from pathlib import Path

    from . import templates as t
    from .output import err, note, out

    written = t.init(Path(directory), template, instance_type, nodes, force)
    for p in written:
        out(str(p))
    size_note = t.size_note(instance_type)
    if size_note:
        note(size_note)
    err(f"next: dtrain validate {written[0]} && dtrain submit {written[0]} --local --wait")


# --- job commands -------------------------------------------------------------------------------

@app.command()
def submit(
    spec: str = typer.Argument(..., metavar="SPEC"),
    local: bool = typer.Option(False, "--local", help="Run on this machine (N nodes x P processes emulated)."),
    wait: bool = typer.Option(False, "--wait", help="Follow the job to the end; exit by its outcome."),
    name: Optional[str] = typer.Option(None, "--name", help="Job name (resubmitting the same spec under the "
                                       "same name follows the existing job)."),
    set_: Optional[List[str]] = SetOpt,
    input_: Optional[List[str]] = typer.Option(None, "--input", metavar="NAME=PATH",
                                               help="Local path for an input only Azure can resolve (local runs)."),
    output: str = OutputOpt,
    timeout: Optional[float] = typer.Option(None, "--timeout", help="With --wait: stop waiting after S seconds "
                                            "(exit 4; the job keeps running)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="With --wait: do not stream logs."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Submit nothing: print what `dtrain render` prints "
                                 "for this spec and flags (the local plan as JSON for a local run, else the "
                                 "Azure job YAML) and exit 0."),
    matrix: Optional[List[str]] = MatrixOpt,
    max_parallel: Optional[int] = MaxParallelOpt,
    retries: Optional[int] = typer.Option(None, "--retries", metavar="N", help="Retry the job up to N more times "
                                          "when an attempt is lost to infrastructure (NotResponding: a lost node, "
                                          "preemption); each attempt resumes from the checkpoints of the last "
                                          "(docs/retries.md). Attempts are named NAME, NAME-r1, ..."),
    retry_on: Optional[str] = typer.Option(None, "--retry-on", metavar="WHAT", help="With --retries: infrastructure "
                                           "(the default) or failed (also retry Failed attempts, for flaky "
                                           "failures). Canceled and timed-out attempts are never retried."),
    subscription: Optional[str] = SubOpt,
    resource_group: Optional[str] = RgOpt,
    workspace: Optional[str] = WsOpt,
):
    """Submit a job. Prints its name (or JSON); with --wait, streams every rank's logs and exits by outcome.
    With --matrix, one job per combination of the values (docs/grids.md); with --retries, a chain of attempts
    followed as one job (docs/retries.md)."""
    from .chain import check_policy
    from .output import note, out

    _check_output(output)
    policy = check_policy(retries, retry_on)
    _useless("--retries", policy and matrix, "does not apply with --matrix (retry a grid's jobs one by one with "
             "--retries and --name)")
    _useless("--retries", policy and dry_run, "does nothing with --dry-run, which submits nothing")
    if matrix:
        return _submit_grid(spec, matrix, local=local, wait=wait, name=name, sets=set_, inputs=input_,
                            output=output, timeout=timeout, quiet=quiet, dry_run=dry_run, max_parallel=max_parallel,
                            flags=(subscription, resource_group, workspace))
    _useless("--max-parallel", max_parallel is not None, "only applies with --matrix (one job has nothing to throttle)")
    if dry_run:
        flags = [f for f, v in (("--wait", wait), ("--output", output != "text"), ("--timeout", timeout is not None),
                                ("--quiet", quiet), ("--subscription", subscription),
                                ("--resource-group", resource_group), ("--workspace", workspace)) if v]
        _useless(", ".join(flags), flags, f"{'does' if len(flags) == 1 else 'do'} nothing with --dry-run, which "
                 "submits nothing and prints what `dtrain render` prints")
    _check_timeout(timeout)  # before anything is submitted
    _useless("--timeout", timeout is not None and not wait, "only applies with --wait")
    _useless("--quiet", quiet and not wait, "only applies with --wait (without it no log is streamed)")
    _useless("--quiet", quiet and output == "json", "does nothing with --output json, which streams no log")
    _local_only(local, subscription, resource_group, workspace)
    spec_obj = _load(spec, set_)
    is_local = local or spec_obj.is_local_compute
    _useless("--input", input_ and not is_local, "only applies to local runs (Azure resolves its own inputs)")
    if dry_run:
        _print_rendered(spec_obj, local=is_local, format="yaml", name=name, inputs=input_)
        return
    session = _session(subscription, resource_group, workspace)
    if policy is not None:
        info = session.submit_chain(spec_obj, _submit_options(name, input_), policy, local=is_local)
        if not wait and output == "text":
            note(f"{info.name}: up to {policy.retries} more attempt{'s' if policy.retries > 1 else ''} "
                 f"({policy.retry_on}); `dtrain wait {info.name}` follows the chain and submits them")
    else:
        plan = session.plan(spec_obj, _submit_options(name, input_), local=is_local)
        for n in getattr(plan, "notes", ()) or ():
            note(n)
        info = session.submit(plan)
    if wait and output == "text":
        note(info.name + (f": {info.url}" if info.url else ""))
    if not wait:
        if output != "text":
            _emit(info.to_dict(), output)
        else:
            out(info.name)
            if info.url:
                note(f"{info.url}")
        return
    _follow(session, [info.name], output=output, timeout=timeout, stream=not quiet, local=is_local, submitted=info)


def _submit_grid(spec: str, matrix, *, local: bool, wait: bool, name, sets, inputs, output: str, timeout,
                 quiet: bool, dry_run: bool, max_parallel, flags) -> None:
    """submit --matrix: validate every combination, then submit them throttled (dtrain.grid); with --wait
    a live table and a final one, exit by the worst outcome."""
    from . import grid
    from .output import note, out, print_diagnostics

    _useless("--quiet", quiet, "does nothing with --matrix, which streams no log (the table shows every job)")
    if dry_run:
        given = [f for f, v in (("--wait", wait), ("--output", output != "text"), ("--timeout", timeout is not None),
                                ("--max-parallel", max_parallel is not None), ("--subscription", flags[0]),
                                ("--resource-group", flags[1]), ("--workspace", flags[2])) if v]
        _useless(", ".join(given), given, f"{'does' if len(given) == 1 else 'do'} nothing with --dry-run, which "
                 "submits nothing")
    _check_timeout(timeout)
    _useless("--timeout", timeout is not None and not wait, "only applies with --wait")
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"--max-parallel must be at least 1, not {max_parallel}")
    _local_only(local, *flags)
    if name is not None:
        _submit_options(name, None)          # the group name is checked as a job name
    g = grid.build_grid(spec, sets, matrix, name)
    print_diagnostics(g.warnings)
    kinds = {local or m.spec.is_local_compute for m in g.members}
    if len(kinds) > 1:
        raise UsageError("--matrix makes some jobs local (compute: local) and others Azure ML jobs",
                         hint="run the local and the Azure combinations as two commands")
    is_local = kinds.pop()
    _useless("--input", inputs and not is_local, "only applies to local runs (Azure resolves its own inputs)")
    if dry_run:
        for m in g.members:
            out(m.name + "\t" + " ".join(f"{p}={v}" for p, v in m.combination.items()))
        note(f"{len(g.members)} jobs in group {g.group}, all valid; nothing was submitted")
        return
    session = _session(*flags)
    k = max_parallel or grid.default_max_parallel(g, is_local)
    n = len(g.members)
    if output == "text":
        note(f"group {g.group}: {n} job{'s' if n != 1 else ''}" + (f", at most {k} at a time" if k and k < n else ""))
    final = _run_grid(session, g, local=is_local, wait=wait, output=output, timeout=timeout, max_parallel=k,
                      inputs=_submit_options(None, inputs).input_paths)
    if wait:
        from . import follow

        raise typer.Exit(follow.worst(follow.outcome(final[m.name]) for m in g.members))


def _run_grid(session, g, *, local: bool, wait: bool, output: str, timeout, max_parallel, inputs,
              metric_key: str | None = "loss", stream_status: bool = True, show_final: bool = True) -> dict:
    """Print what running a grid yields: names (or JSON) as jobs are submitted; with wait, a live table on
    a terminal (else a line per change) on stderr, then the final table (stdout). Returns name -> JobInfo."""
    import time

    from . import ci, follow, grid, grid_view
    from .output import err, note, out, out_json, out_jsonl

    live = None
    if wait and output == "text" and stream_status and sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live

        from .output import PipeSafe

        console = Console(file=PipeSafe(sys.stderr), markup=False, emoji=False, highlight=False)  # type: ignore[arg-type]  # a stream
        live = Live(console=console,
                    refresh_per_second=4, transient=True)
        live.start()
    infos: dict = {}
    metrics: dict = {}
    shown_metric = None
    read_at = 0.0
    try:
        for ev in grid.run_grid(session, g, local=local, max_parallel=max_parallel, wait=wait, input_paths=inputs,
                                timeout=timeout):
            if isinstance(ev, grid.Submitted):
                infos[ev.member.name] = ev.info
                if output == "jsonl":
                    out_jsonl({"event": "submitted", "job": ev.info.name, "status": ev.info.status,
                               "group": g.group, "combination": ev.member.combination})
                elif output == "text" and not wait:
                    out(ev.info.name)
                elif output == "text" and live is None and stream_status:
                    err(f"{ev.info.name}: {ev.info.status} ({', '.join(f'{p}={v}' for p, v in ev.member.combination.items())})")
            elif isinstance(ev, grid.Retrying):
                if output == "jsonl":
                    out_jsonl({"event": "retrying", "job": ev.member.name, "delay_s": ev.delay_s, "reason": ev.reason})
                else:
                    note(f"{ev.member.name}: {ev.reason}; asking again in {ev.delay_s:g} s")
            elif isinstance(ev, grid.StatusChanged):
                infos[ev.info.name] = ev.info
                if output == "jsonl":
                    out_jsonl({"event": "status", "job": ev.info.name, "status": ev.info.status})
                elif output == "text" and live is None and stream_status:
                    err(f"{ev.info.name}: {ev.info.status}")
            elif isinstance(ev, (grid.Polled, grid.Ended)):
                infos.update(ev.infos)
                if metric_key and (isinstance(ev, grid.Ended) or time.monotonic() - read_at > 2.0):
                    read_at = time.monotonic()
                    metrics.update(_latest_metric(session, list(infos.values()), metric_key))
                    shown_metric = metric_key if metrics else None
            if live is not None:
                live.update(grid_view.rich_table(g, infos, shown_metric, metrics))
    except follow.WaitTimeout as exc:
        if live is not None:
            live.stop()
        infos.update(exc.infos)
        err(f"timed out after {timeout:g} s waiting; the jobs keep running")
        note(f"re-attach with the same command and --name {g.group} (it submits nothing twice)")
        raise typer.Exit(ExitCode.TIMEOUT) from None
    except KeyboardInterrupt:
        if live is not None:
            live.stop()
        err("interrupted; the jobs submitted keep running")
        note(f"re-attach (and submit the rest) with the same command and --name {g.group}; "
             f"`dtrain list --tag dtrain.group={g.group}` lists them")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    if live is not None:
        live.stop()
    if not show_final:
        pass
    elif output == "json":
        out_json(grid_view.json_rows(g, infos, shown_metric, metrics))
    elif output == "jsonl" and wait:
        for row in grid_view.json_rows(g, infos, shown_metric, metrics):
            out_jsonl({"event": "end", **row})
    elif output == "text" and wait:
        for line in grid_view.text_lines(g, infos, shown_metric, metrics):
            out(line)
    if wait:
        for m in g.members:
            if infos[m.name].failure and output != "json":
                err(f"{m.name}:")
                _print_failure(infos[m.name])
        ci.report([infos[m.name] for m in g.members], columns=grid_view.markdown_columns(g),
                  metrics={n: {shown_metric: p} for n, p in metrics.items()} if shown_metric else None)
    return infos


def _latest_metric(session, infos, key: str) -> dict:
    """name -> the latest point of metric `key` each job logged, where its backend can read metrics
    (Backend.latest_metrics: one batched read per backend); {} where none can."""
    by_backend: dict = {}
    for i in infos:
        b = session.backend(i.backend)
        by_backend.setdefault(id(b), (b, []))[1].append(i)
    out: dict = {}
    for b, jobs in by_backend.values():
        read = getattr(b, "latest_metrics", None)
        if read is None:
            continue
        try:
            latest = read(jobs)
        except Exception:  # noqa: BLE001 - a metric column is not worth failing the grid for
            continue
        for name, points in (latest or {}).items():
            p = (points or {}).get(key)
            if p is not None:
                out[name] = p
    return out


@app.command()
def scale(
    spec: str = typer.Argument(..., metavar="SPEC"),
    nodes: str = typer.Option(..., "--nodes", metavar="N1,N2,...", help="Node counts to run the spec at, e.g. "
                              "1,2,4 (processes per node unchanged)."),
    metric: str = typer.Option("samples_per_s", "--metric", help="The throughput metric the jobs log (MLflow); "
                               "the shipped training scripts log samples_per_s."),
    local: bool = typer.Option(False, "--local", help="Run here (N nodes x P processes emulated)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Optimizer steps per run: sets the spec's input "
                                        "`steps` (the shipped templates pass it to the script as --steps)."),
    warmup: float = typer.Option(0.2, "--warmup", help="Fraction of each run's logged steps left out as warm-up "
                                 "(the first logged point is always left out)."),
    name: Optional[str] = typer.Option(None, "--name", help="Group name; the same command with the same name "
                                       "reads the runs it already made instead of starting them again."),
    set_: Optional[List[str]] = SetOpt,
    max_parallel: Optional[int] = typer.Option(None, "--max-parallel", metavar="K", help="At most K runs at a "
                                               "time. Default: local, 1 (runs sharing the CPUs would slow each "
                                               "other); Azure, no limit."),
    output: str = typer.Option("text", "--output", "-o", help="text (table and plot) or json."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Stop waiting after S seconds (exit 4; the "
                                            "jobs keep running)."),
    subscription: Optional[str] = SubOpt,
    resource_group: Optional[str] = RgOpt,
    workspace: Optional[str] = WsOpt,
):
    """Measure how the job scales: run it at each node count, read the throughput metric each run logged,
    and report throughput per process and efficiency against the smallest run (docs/scaling.md)."""
    from . import follow, grid
    from . import scale as report
    from .output import err, note, out, out_json, print_diagnostics

    _check_output(output, ("text", "json"))
    _check_timeout(timeout)
    _local_only(local, subscription, resource_group, workspace)
    counts = _node_counts(nodes)
    if steps is not None and steps < 1:
        raise UsageError(f"--steps must be at least 1, not {steps}")
    if not 0 <= warmup < 1:
        raise UsageError(f"--warmup is a fraction of the steps, from 0 to below 1, not {warmup:g}")
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"--max-parallel must be at least 1, not {max_parallel}")
    if name is not None:
        _submit_options(name, None)
    sets = list(set_ or [])
    if steps is not None:
        from .spec.validate import load_spec

        base, _ = load_spec(spec, sets)     # its warnings are shown with the runs' below
        if "steps" not in base.inputs:
            raise UsageError(f"--steps sets the input `steps`, and {spec} declares none",
                             hint="add `steps: 0` to its inputs and pass `--steps ${{inputs.steps}}` to the script "
                                  "(as the shipped templates do), or leave --steps out")
        sets.append(f"inputs.steps={steps}")
    g = grid.build_grid(spec, sets, [f"resources.instance_count={','.join(map(str, counts))}"], name)
    print_diagnostics(g.warnings)
    is_local = local or all(m.spec.is_local_compute for m in g.members)
    session = _session(subscription, resource_group, workspace)
    k = max_parallel or (1 if is_local else None)
    if output == "text":
        note(f"group {g.group}: {len(g.members)} runs ({', '.join(str(c) for c in counts)} nodes x "
             f"{g.members[0].spec.processes_per_node} processes)" + (f", {k} at a time" if k else ""))
    final = _run_grid(session, g, local=is_local, wait=True, output=output, timeout=timeout, max_parallel=k,
                      inputs={}, metric_key=None, stream_status=output == "text", show_final=False)
    runs = []
    for m in g.members:
        info = final[m.name]
        points = session.metrics(m.name, keys=[metric], local=is_local).get(metric, [])
        runs.append((m.spec.instance_count, m.spec.process_count, m.name, info.status, points))
    rs = report.rows(runs, warmup)
    if output == "json":
        out_json({"group": g.group, **report.report(rs, metric, warmup)})
    else:
        for line in report.table(rs, metric) + [""] + report.plot(rs):
            out(line)
        err(report.verdict(rs))
    code = follow.worst(follow.outcome(final[m.name]) for m in g.members)
    missing = [r.job for r in rs if r.throughput is None and r.status == "Completed"]
    if missing and code == ExitCode.OK:
        raise UsageError(f"{', '.join(missing)} logged no '{metric}'",
                         hint="pass --metric NAME, a metric the script logs (`dtrain metrics NAME` lists them)")
    raise typer.Exit(code)


def _node_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--nodes '{text}' is not a list of node counts", hint="write --nodes 1,2,4") from None
    if any(c < 1 for c in counts) or len(set(counts)) != len(counts):
        raise UsageError(f"--nodes '{text}': each count at least 1, each once", hint="write --nodes 1,2,4")
    return sorted(counts)


@app.command()
def status(
    name: str = typer.Argument(..., metavar="NAME", autocompletion=local_job_names),
    output: str = OutputOpt,
    local: bool = typer.Option(False, "--local", help="Look only at local jobs."),
    subscription: Optional[str] = SubOpt,
    resource_group: Optional[str] = RgOpt,
    workspace: Optional[str] = WsOpt,
):
    """Show a job's status. Exit 0 whatever the status; errors only when the job cannot be read."""
    _local_only(local, subscription, resource_group, workspace)
    _check_output(output)
    info = _session(subscription, resource_group, workspace).backend_for(name, local).status(name)
    _print_info(info, output)
    if output == "text":
        _print_attempts(info)
    if output == "text" and info.ports:
        from .output import err

        err("ports: " + ", ".join(f"{k}={v}" for k, v in info.ports.items()))


@app.command()
def logs(
    name: str = typer.Argument(..., metavar="NAME", autocompletion=local_job_names),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends."),
    rank: Optional[int] = typer.Option(None, "--rank", help="Only this rank's lines."),
    output: str = typer.Option("text", "--output", "-o", help="text or jsonl (one object per line)."),
    local: bool = typer.Option(False, "--local", help="Look only at local jobs."),
    subscription: Optional[str] = SubOpt,
    resource_group: Optional[str] = RgOpt,
    workspace: Optional[str] = WsOpt,
):
    """Print every rank's logs, each line prefixed with its node and rank."""
    from .output import log_prefix, out, out_jsonl

    _check_output(output, ("text", "jsonl"),
                  hint="logs stream, so they come as jsonl: one JSON object per line" if output == "json" else None)
    _local_only(local, subscription, resource_group, workspace)
    backend = _session(subscription, resource_group, workspace).backend_for(name, local)
    for line in backend.logs(name, follow=follow, rank=rank):
        if output == "jsonl":
            out_jsonl({"event": "log", "job": name, "rank": line.rank, "node": line.node, "text": line.text})
        else:
            out(log_prefix(line, 5) + line.text)


@app.command()
def metrics(
    name: str = typer.Argument(..., metavar="NAME", autocompletion=local_job_names),
    follow: bool = typer.Option(False, "--follow", "-f", help="Redraw as new points arrive; end when the job ends."),
    key: Optional[List[str]] = typer.Option(None, "--key", "-k", metavar="K", help="Only this metric (repeatable)."),
    output: str = typer.Option("text", "--output", "-o", help="text (a table and a plot per metric), json "
                               "({\"job\", \"metrics\": {key: [{step, value, timestamp}]}}) or csv "
                               "(job,key,step,value,timestamp)."),
    interval: Optional[float] = typer.Option(None, "--interval", help="With --follow: seconds between polls "
                                             "(default 2)."),
    local: bool = typer.Option(False, "--local", help="Look only at local jobs."),
    subscription: Optional[str] = SubOpt,
    resource_group: Optional[str] = RgOpt,
    workspace: Optional[str] = WsOpt,
):
    """Show the metrics a job logged through MLflow (loss, learning rate, samples/s, ...): last, min, max
    and steps per metric and a plot of each, or every point as JSON or CSV. Exit 0 (also with none)."""
    from .metrics_view import csv_text, render_text, to_json
    from .output import err, out, out_json

    _check_output(output, ("text", "json", "csv"))
    _useless("--interval", interval is not None and not follow, "only applies with --follow")
    if interval is not None and interval <= 0:
        raise UsageError(f"--interval must be a positive number of seconds, not {interval:g}")
    _local_only(local, subscription, resource_group, workspace)
    session = _session(subscription, resource_group, workspace)
    keys = list(key) if key else None
    if not follow:
        points = session.metrics(name, keys=keys, local=local)
    else:
        points = _follow_metrics(session, name, keys, local, output, interval or 2.0)
    if not any(points.values()):
        err(f"{name}: no metrics" + (f" named {', '.join(keys)}" if keys else "") + " logged"
            + (" (scripts log them with mlflow.log_metric; docs/monitoring.md)" if not keys else ""))
        if output == "json":
            out_json(to_json(name, {}))
        return
    if output == "json":
        out_json(to_json(name, points))
    elif output == "csv":
        if not follow:                       # --follow has streamed the rows already
            out(csv_text(name, points).rstrip("\n"))
    elif not (follow and sys.stdout.isatty()):   # a live view has drawn the last frame already
        out(render_text(name, points, keys, width=_width()))


def _width() -> int:
    import shutil

    return shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80


def _follow_metrics(session, name, keys, local, output, interval) -> dict:
    """metrics --follow: csv streams each new row; text redraws in place on a terminal; json prints
    once at the end. Returns every point read."""
    from .metrics_view import csv_text, render_text
    from .output import out

    live = None
    if output == "text" and sys.stdout.isatty():
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        live = Live(Text(""), console=Console(markup=False, highlight=False), auto_refresh=False)
        live.start()
    points: dict = {}
    header = True
    try:
        for new, points, _info in session.follow_metrics(name, keys=keys, local=local, interval=interval):
            if output == "csv" and any(new.values()):
                out(csv_text(name, new, header=header).rstrip("\n"))
                header = False
            elif live is not None and any(new.values()):
                from rich.text import Text

                live.update(Text(render_text(name, points, keys, width=_width())), refresh=True)
    except KeyboardInterrupt:
        from .output import err

        err("interrupted; the job keeps running")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    finally:
        if live is not None:
            live.stop()
    return points


@app.command("list")
def list_(
    experiment: Optional[str] = ExperimentOpt,
    tag: Optional[List[str]] = TagOpt,
    limit: int = typer.Option(50, "--limit", help="At most this many jobs, newest first."),
    local: bool = typer.Option(False, "--local", help="Local jobs only."),
    output: str = OutputOpt,
    subscription: Optional[str] = SubOpt,
    resource_group: Optional[str] = RgOpt,
    workspace: Optional[str] = WsOpt,
):
    """List jobs, newest first."""
    from .output import out

    _check_output(output)
    if limit < 1:
        raise UsageError(f"--limit must be a positive number of jobs, not {limit}")
    _local_only(local, subscription, resource_group, workspace)
    tags = _pairs(tag, "--tag", bare_ok=True)
    backend = _session(subscription, resource_group, workspace).listing_backend(local)
    infos = backend.list(experiment=experiment, tags=tags, limit=limit)
    if output != "text":
        _emit([i.to_dict() for i in infos], output)
        return
    from .chain import attempt_label

    for i in infos:
        shape = f"{i.nodes}x{i.processes_per_node}"
        c = i.chain                        # a retry chain's row: which attempt it is on (docs/retries.md)
        out(f"{i.name}\t{i.status}\t{shape}\t{i.experiment_name or ''}\t{i.created or ''}"
            + (f"\t{attempt_label(c)}" if c else ""))
        if i.status == "Unreadable" and i.failure:      # a local job whose state file is corrupt
            from .output import err

            err(f"warning: {i.name}: {i.failure.message}")


@app.command()
def cancel(
    name: str = typer.Argument(..., metavar="NAME", autocompletion=local_job_names),
    local: bool = typer.Option(False, "--local", help="Look only at local jobs."),
    output: str = OutputOpt,
    subscription: Optional[str] = SubOpt,
    resource_group: Optional[str] = RgOpt,
    workspace: Optional[str] = WsOpt,
):
    """Cancel a job: every process of it is stopped."""
    _local_only(local, subscription, resource_group, workspace)
    _check_output(output)
    _print_info(_session(subscription, resource_group, workspace).backend_for(name, local).cancel(name), output)


@app.command()
def clean(
    older_than: str = typer.Option(..., "--older-than", metavar="AGE",
                                   help="Only jobs that ended longer ago than this (7d, 12h, 30m, 90s)."),
    snapshots_only: bool = typer.Option(False, "--snapshots-only",
                                        help="Remove only the code snapshots; keep state, logs and outputs."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be removed; remove nothing."),
    output: str = OutputOpt,
):
    """Remove finished local jobs (running jobs and $DTRAIN_HOME/datastores are never touched)."""
    from .output import err, out, out_json

    _check_output(output)
    report = _session().clean(older_than, dry_run=dry_run, snapshots_only=snapshots_only)
    if output == "json":
        out_json({"removed": report.removed, "bytes_freed": report.bytes_freed, "dry_run": dry_run,
                  "kept_running": report.kept_running, "unreadable": report.unreadable})
        return
    for name in report.removed:
        out(name)
    verb = "would remove" if dry_run else "removed"
    what = "snapshots of " if snapshots_only else ""
    err(f"{verb} {what}{len(report.removed)} job folder(s), {report.bytes_freed / 1e6:.1f} MB"
        + (f"; {len(report.kept_running)} running job(s) left alone" if report.kept_running else "")
        + (f"; {len(report.unreadable)} unreadable job(s) left alone: {', '.join(report.unreadable)}"
           if report.unreadable else ""))


@app.command("wait")
def wait_(
    names: List[str] = typer.Argument(..., metavar="NAME...", autocompletion=local_job_names),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Stop waiting after S seconds (exit 4)."),
    local: bool = typer.Option(False, "--local", help="Look only at local jobs."),
    output: str = typer.Option("text", "--output", "-o", help="text, json (the jobs at the end) or jsonl "
                               "(a status event per change)."),
    subscription: Optional[str] = SubOpt,
    resource_group: Optional[str] = RgOpt,
    workspace: Optional[str] = WsOpt,
):
    """Wait for jobs to end; exit with the worst outcome (Completed 0 < Canceled 3 < Failed 1 < timeout 4 <
    infrastructure 5 < lost 7)."""
    _check_output(output)
    _local_only(local, subscription, resource_group, workspace)
    _follow(_session(subscription, resource_group, workspace), names, output=output, timeout=timeout,
            stream=False, local=local)


@app.command()
def watch(
    names: Optional[List[str]] = typer.Argument(None, metavar="[NAME...]", autocompletion=local_job_names),
    experiment: Optional[str] = ExperimentOpt,
    tag: Optional[List[str]] = TagOpt,
    local: bool = typer.Option(False, "--local", help="Local jobs only."),
    interval: Optional[float] = typer.Option(None, "--interval", help="Seconds between polls (default 5)."),
    output: str = typer.Option("text", "--output", "-o", help="text (a live table), json (the jobs at the end) "
                               "or jsonl (status events)."),
    once: bool = typer.Option(False, "--once", help="Print the table once and exit 0."),
    metric: str = typer.Option("loss", "--metric", metavar="K", help="The metric whose latest value the table "
                               "shows, next to samples/s (one batched metrics read per poll)."),
    no_metrics: bool = typer.Option(False, "--no-metrics", help="No metric columns (and no metrics read)."),
    subscription: Optional[str] = SubOpt,
    resource_group: Optional[str] = RgOpt,
    workspace: Optional[str] = WsOpt,
):
    """A live table of jobs (status, duration, nodes x processes, latest loss and samples/s, last line),
    one list call (and one batched metrics read) per poll.
    Ends when every watched job has ended. Exits like `wait` over the named jobs; without names, over
    the jobs that were running when the watch began (0 when none was)."""
    from . import follow
    from .watch import watch_jobs

    _check_output(output)
    _useless("--interval", once and interval is not None, "does nothing with --once, which polls once")
    if interval is not None and interval <= 0:
        raise UsageError(f"--interval must be a positive number of seconds, not {interval:g}")
    _local_only(local, subscription, resource_group, workspace)
    tags = _pairs(tag, "--tag", bare_ok=True)
    backend = _session(subscription, resource_group, workspace).listing_backend(local)
    try:
        _, judged = watch_jobs(backend, names or None, experiment, tags, interval or 5.0, output, once,
                               metric=None if no_metrics or output != "text" else metric)
    except KeyboardInterrupt:
        from .output import err

        err("interrupted; the jobs keep running")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    if judged:
        from . import ci

        ci.report(judged)
    raise typer.Exit(follow.worst(follow.outcome(i) for i in judged))


@app.command("config")
def config_(
    output: str = OutputOpt,
    subscription: Optional[str] = SubOpt,
    resource_group: Optional[str] = RgOpt,
    workspace: Optional[str] = WsOpt,
):
    """Show the Azure ML workspace the job commands use, and where each part of it came from (flags,
    variables, config.json, AZUREML_ARM_*, az defaults). Exit 6 when a part is missing."""
    from .errors import ConfigError
    from .output import out, out_json
    from .session import WORKSPACE_PARTS

    _check_output(output)
    r = _session(subscription, resource_group, workspace).workspace_resolution()
    if output == "json":
        out_json(r.to_dict())
    else:
        width = max(len(r.values.get(p) or "-") for p in WORKSPACE_PARTS)
        for p in WORKSPACE_PARTS:
            out(f"{p:<16} {(r.values.get(p) or '-').ljust(width)}  {r.sources.get(p) or 'missing'}")
    if r.missing:
        raise ConfigError(r.missing_message(), hint="see docs/azure.md, Workspace")


# --- helpers ------------------------------------------------------------------------------------

def _load(path: str, sets):
    from .output import print_diagnostics
    from .spec.validate import load_spec

    spec, diags = load_spec(path, sets)
    print_diagnostics([d for d in diags if d.severity != "note"])
    return spec


def _session(subscription=None, resource_group=None, workspace=None):
    """The library object a command acts through (session.py), with the command's workspace flags."""
    from .session import Session

    return Session(subscription, resource_group, workspace, notify=_notice)


def _notice(notice) -> None:
    """What a backend has to tell the user (backends never print): a note, or the SDK's own text as it is."""
    from .output import err, note

    (err if notice.verbatim else note)(notice.text)


def _pairs(items, flag: str, bare_ok: bool = False) -> dict:
    """NAME=VALUE flags; with bare_ok a lone NAME means "has this key" (value None), as Azure's tag filter."""
    outp: dict = {}
    for item in items or []:
        if "=" not in item:
            if bare_ok and item.strip():
                outp[item.strip()] = None
                continue
            raise UsageError(f"{flag} '{item}' has no '='", hint=f"write {flag} NAME=VALUE")
        k, _, v = item.partition("=")
        outp[k.strip()] = v
    return outp


def _submit_options(name, inputs):
    from .backends.base import SubmitOptions

    if name is not None:
        import re

        from .spec.schema import JOB_NAME_HINT, JOB_NAME_PATTERN

        if not re.fullmatch(JOB_NAME_PATTERN, name):
            raise UsageError(f"--name '{name}' is not a valid job name", hint=JOB_NAME_HINT)
    paths = {k: os.path.abspath(v) for k, v in _pairs(inputs, "--input").items()}
    return SubmitOptions(name=name, input_paths=paths)


def _print_info(info, output: str) -> None:
    """One job: `name<TAB>status` (and why it failed) on a terminal, or its JSON."""
    from .output import out, out_json

    if output == "json":
        out_json(info.to_dict())
        return
    out(f"{info.name}\t{info.status}" + ("\t(timed out)" if info.timed_out else ""))
    _print_failure(info)


def _print_attempts(info) -> None:
    """A retry chain's attempts, one line each on stderr: name, status, why it ended (docs/retries.md)."""
    from .chain import attempt_label
    from .output import err

    c = info.chain
    if not c:
        return
    for a in c["attempts"]:
        why = f"  {a['outcome']}" + (f": {a['reason']}" if a.get("reason") and a["reason"] != a["status"] else "") \
            if a.get("outcome") else ""
        err(f"  {attempt_label(c, a['attempt'])}  {a['name']}  {a['status']}{why}")
    if c.get("next"):
        err(f"  {attempt_label(c, c['next']['attempt'])}  {c['next']['name']}  due {c['next']['due_at']} "
            f"(submitted by `dtrain wait {c['name']}`)")
    if c.get("blocked"):
        err(f"  no attempt {c['attempt'] + 1}: {c['blocked']}")


def _print_failure(info) -> None:
    from .output import err, paint

    f = info.failure
    if not f:
        return
    err(f"{paint('failed', '31')}: {f.message}")
    for line in (f.traceback or f.last_lines)[-20:]:
        err(f"    {line}")


def _follow(session, names, *, output: str, timeout, stream: bool, local: bool = False, submitted=None):
    """Print what following jobs yields (session.follow), then exit by the worst outcome. `submitted`
    (submit --wait): the JobInfo just submitted, for the start-up progress and the closing summary line."""
    import time

    from . import follow
    from .output import err, log_prefix, note, out, out_jsonl

    _check_timeout(timeout)
    t0 = time.monotonic()
    shown: dict = {}   # name -> last status printed, so the final status is not printed twice
    progress = None
    if stream and len(names) == 1 and submitted is not None:
        from .progress import StartProgress

        progress = StartProgress(submitted)
    final: dict = {}
    try:
        for event in session.follow(names, local=local, timeout=timeout, stream=stream, submitted=submitted):
            if isinstance(event, follow.Ended):
                final = event.infos
            elif isinstance(event, follow.StatusChanged):
                if progress is not None:
                    progress.status(event.info)
                elif output != "json":
                    shown[event.info.name] = event.info.status
                    if output == "jsonl":
                        out_jsonl({"event": "status", "job": event.info.name, "status": event.info.status})
                    else:
                        err(f"{event.info.name}: {event.info.status}")
            elif isinstance(event, follow.Quiet):
                if progress is not None:
                    progress.tick()
            elif isinstance(event, follow.LogReceived):
                if progress is not None and not progress.done:
                    progress.first_output()
                line = event.line
                if output == "jsonl":
                    out_jsonl({"event": "log", "job": event.job, "rank": line.rank, "node": line.node,
                               "text": line.text})
                elif output == "text":
                    out(log_prefix(line, 5) + line.text)
    except follow.WaitTimeout:
        if progress is not None:
            progress.finish()
        err(f"timed out after {timeout:g} s waiting; the job{'s keep' if len(names) > 1 else ' keeps'} running")
        note("re-attach with `dtrain wait " + " ".join(names) + "`")
        raise typer.Exit(ExitCode.TIMEOUT) from None
    except KeyboardInterrupt:
        if progress is not None:
            progress.finish()
        err(f"interrupted; the job{'s keep' if len(names) > 1 else ' keeps'} running")
        note("re-attach with `dtrain wait " + " ".join(names) + "`, stop "
             + ("them" if len(names) > 1 else "it") + " with `dtrain cancel " + names[0] + "`")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    if progress is not None:
        progress.finish()
    from . import ci

    infos = list(final.values())
    final_metrics = _final_metrics(session, infos[0].name, local) if submitted is not None else None
    ci.report(final.values(), metrics={infos[0].name: final_metrics} if final_metrics else None)
    if output == "json":
        if submitted is not None:
            _emit({**infos[0].to_dict(), "metrics": {k: p.to_dict() for k, p in (final_metrics or {}).items()}},
                  "json")
        else:
            _emit([i.to_dict() for i in infos], "json")
    for info in infos:
        if output == "jsonl" and shown.get(info.name) != info.status:
            out_jsonl({"event": "status", "job": info.name, "status": info.status})
        elif output == "text" and (info.timed_out or (shown.get(info.name) != info.status and submitted is None)):
            err(f"{info.name}: {info.status}" + (" (timed out: limits.timeout)" if info.timed_out else ""))
        if output == "text":
            _print_attempts(info)
        _print_failure(info)
    if submitted is not None:
        from .metrics_view import final_line
        from .progress import summary_line

        err(summary_line(infos[0], time.monotonic() - t0))
        last = final_line({k: [p] for k, p in (final_metrics or {}).items()})
        if last:
            err(f"{infos[0].name}: final metrics: {last}")
    raise typer.Exit(follow.worst(follow.outcome(i) for i in infos))


def _final_metrics(session, name: str, local: bool) -> dict:
    """key -> the last point of each metric the job logged ({} when none or when they cannot be read:
    the job's outcome is what submit --wait exits by)."""
    from .errors import DtrainError
    from .metrics_view import final_values

    try:
        return final_values(session.metrics(name, local=local))
    except DtrainError:
        return {}


def _click_exceptions():
    """Typer >= 0.26 vendors click as typer._click; older releases use click itself."""
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click import exceptions
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


def main(argv=None) -> int:
    """Entry point and the one error boundary: our errors print one message (and hint) on stderr."""
    from .output import PipeClosed

    click = _click_exceptions()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        rv = app(args=argv, prog_name="dtrain", standalone_mode=False)
        return int(rv or 0)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except DtrainError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        from .errors import SpecError
        from .output import error, print_diagnostics, summary_line

        if isinstance(exc, SpecError):
            print_diagnostics(exc.diagnostics)
            error(f"{exc.message} ({summary_line(exc.diagnostics)}); nothing was submitted")
        else:
            error(exc.message, exc.hint)
        return int(exc.exit_code)
    except typer.Abort:
        from .output import error

        error("interrupted")
        return int(ExitCode.INTERRUPTED)
    except click.ClickException as exc:
        from .output import err, error

        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `dtrain`: the help, not an error
            err(exc.format_message())
            return int(ExitCode.INVALID)

        error(exc.format_message(), "run `dtrain --help` or `dtrain COMMAND --help`")
        return int(ExitCode.INVALID)
    except KeyboardInterrupt:
        from .output import error

        error("interrupted")
        return int(ExitCode.INTERRUPTED)
    except PipeClosed:
        _silence_closed_pipes()
        return int(ExitCode.OK)
    except Exception as exc:  # a dtrain bug: say so, briefly
        if debug:
            raise
        from .output import error

        error(f"internal error: {type(exc).__name__}: {exc}",
              "this is a dtrain bug; rerun with --debug for the traceback and report it")
        return int(ExitCode.INTERNAL)


def run() -> None:
    sys.exit(main())
