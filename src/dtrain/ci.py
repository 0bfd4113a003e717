"""CI-native reporting: a GitHub Actions job summary and ::error annotations, or the Azure Pipelines
logging commands, written when a followed job ends. Nothing happens outside those CI systems.

Workflow and logging commands go to stderr: both runners read them from either stream, and stdout
carries only data (names, JSON), so `dtrain submit ... --output json | jq` works in CI too.

Every text from a job or the service (failure messages, tracebacks, last lines, statuses, metric names)
is untrusted: it is redacted, stripped of control bytes, and written so that it can neither end the
summary's code block nor render as Markdown, nor be read as a runner command (untrusted.py)."""
from __future__ import annotations

import os
import re
import sys

from .backends.base import JobInfo
from .untrusted import AZURE_PIPELINES, GITHUB, ci_kind, neutralize_commands, redact, strip_controls


def _clean(text) -> str:
    return strip_controls(redact(str(text)))


# Markdown and HTML punctuation that could start a link, an image, emphasis, a tag or an entity, or end
# a table cell; each is shown literally once backslash-escaped (CommonMark: any ASCII punctuation). An
# underscore inside a word emphasizes nothing, so job names like run_1_a stay as they are.
_MD_SPECIAL = re.compile(r"[\\`*\[\]()#!|<>~&{}]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_text(text) -> str:
    """Untrusted text for one line of Markdown or a table cell: redacted, no control bytes, one line,
    and shown as written (`![x](http://...)` stays text, `|` does not end the cell)."""
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(), _clean(text).replace("\n", " "))


def md_fenced(text) -> list[str]:
    """Untrusted text as a fenced code block: the fence is a run of backticks longer than any in the
    text, so no line of it can close the block (and nothing inside renders)."""
    body = _clean(text)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, body, fence]


def _md_url(url: str) -> str | None:
    # a link target from the service: http(s) only, and nothing that could end the (...) early
    if not re.match(r"https?://", url or ""):
        return None
    return re.sub(r"[\s()<>\"'`\\\x00-\x1f\x7f]", lambda m: f"%{ord(m.group()):02X}", url)


def _failure_text(info: JobInfo) -> tuple[str, str]:
    f = info.failure
    if f is None:
        return f"{info.name}: {info.status}", ""
    who = f"rank {f.rank}" if f.rank is not None else "the job"
    code = f" exited {f.exit_code}" if f.exit_code is not None else ""
    title = f"{info.name}: {info.status}: {who}{code}"
    lines = (f.traceback or f.last_lines)[-20:]
    return title, "\n".join([f.message, *lines]).strip()


def why_markdown(cause) -> list[str]:
    """A failed job's top cause (dtrain.diagnose.Cause) under its failure: the kind, the summary and hint,
    and the first line of evidence fenced (the summary and evidence quote the job's text)."""
    if cause is None:
        return []
    out = [f"why: `{cause.kind}`: {md_text(cause.summary)}", "", f"hint: {md_text(cause.hint)}", ""]
    if cause.evidence:
        file, line, text = cause.evidence[0]
        out += [*md_fenced(f"{file}:{line}: {text}" if line else text), ""]
    return out


def _why_text(cause) -> str:
    return f"\nwhy: {cause.kind}: {cause.summary}\nhint: {cause.hint}" if cause is not None else ""


def metrics_markdown(metrics: dict) -> list[str]:
    """The final metrics of each job as a table: job -> key -> last MetricPoint."""
    from .metrics_view import fmt

    rows = ["| job | metric | last value | step |", "|---|---|---|---|"]
    for job, last in metrics.items():
        for key, p in (last or {}).items():
            rows.append(f"| {md_text(job)} | {md_text(key)} | {fmt(p.value)} | {p.step} |")
    return ["#### metrics", "", *rows, ""] if len(rows) > 2 else []


_md_cell = md_text


def attempts_markdown(infos) -> list[str]:
    """Each retry chain's attempts (chain.py), so that a CI run that needed a retry says why."""
    from .chain import attempt_label   # here, not at the top: `validate` imports this module for annotations

    out: list[str] = []
    for i in infos:
        c = i.chain
        if not c:
            continue
        out += [f"#### attempts of {i.name}", "", "| attempt | job | status | outcome | reason |", "|---|---|---|---|---|"]
        out += [f"| {attempt_label(c, a['attempt'])} | {_md_cell(a['name'])} | {_md_cell(a['status'])} | "
                f"{_md_cell(a.get('outcome') or '')} | {_md_cell(a.get('reason') or '')} |" for a in c["attempts"]]
        out.append("")
    return out


def cost_markdown(infos) -> list[str]:
    """What each ended job cost (a chain: per attempt), and the total (cost.py: run time x nodes x price)."""
    from .cost import job_cost
    from .prices import when

    rows, totals = ["| job | cost (USD) | price | source |", "|---|---|---|---|"], []
    for i in infos:
        c = job_cost(i) if i.terminal else None
        if not c or c.get("total") is None:
            continue
        p = c["price"]
        src = f"{p['source']}, {when(p['source'], p['as_of'], p.get('age_days', 0))}" + \
            (", local run priced as on Azure ML" if c.get("local") else "")
        for a in c.get("attempts") or []:
            if a.get("total") is not None:
                rows.append(f"| {md_text(a['name'])} | {a['total']:,.2f} | {p['per_hour']:g}/h x {i.nodes} | {md_text(src)} |")
        rows.append(f"| {md_text(i.name)} | {c['total']:,.2f} | {p['per_hour']:g}/h x {i.nodes} | {md_text(src)} |")
        totals.append(c["total"])
    if len(totals) > 1:
        rows.append(f"| total | {sum(totals):,.2f} | | |")
    return ["#### cost", "", *rows, ""] if totals else []


def summary_markdown(infos, metrics: dict | None = None, columns: dict | None = None,
                     causes: dict | None = None) -> str:
    """The jobs as a Markdown table; `columns` (name -> {header: value}) adds columns, e.g. a grid's
    --matrix values; `causes` (name -> top Cause) says why each failed job failed."""
    extra = list(dict.fromkeys(h for cols in (columns or {}).values() for h in cols))
    rows = ["| job | status | " + "".join(f"{_md_cell(h)} | " for h in extra) + "nodes x processes | started | ended |",
            "|---|---|" + "---|" * len(extra) + "---|---|---|"]
    from .chain import attempt_label

    for i in infos:
        status = i.status + (" (timed out)" if i.timed_out else "")
        if i.chain:
            status += ", " + attempt_label(i.chain)
        url = _md_url(redact(i.url or ""))
        name = f"[{md_text(i.name)}]({url})" if url else md_text(i.name)
        own = (columns or {}).get(i.name, {})
        rows.append(f"| {name} | {md_text(status)} | " + "".join(f"{_md_cell(own.get(h, ''))} | " for h in extra)
                    + f"{i.nodes} x {i.processes_per_node} | {md_text(i.started or '')} | {md_text(i.ended or '')} |")
    out = ["### dtrain", "", *rows, "", *attempts_markdown(infos), *cost_markdown(infos), *metrics_markdown(metrics or {})]
    for i in infos:
        cause = (causes or {}).get(i.name)
        if i.failure or cause is not None:
            title, body = _failure_text(i)
            out += [f"**{md_text(title)}**", "", *(md_fenced(body) + [""] if body else []), *why_markdown(cause)]
    return "\n".join(out)


def report(infos, stream=None, metrics: dict | None = None, columns: dict | None = None,
           causes: dict | None = None) -> None:
    """Write the CI system's summary and annotations for finished jobs (annotations on stderr); `metrics`
    (job -> key -> last MetricPoint) adds a table of the final metric values, `columns` (job -> {header:
    value}) columns to the jobs table (a grid's --matrix values), `causes` (job -> its top Cause, `dtrain
    why`) the cause and hint under each failure and in its annotation."""
    causes = causes or {}
    stream = stream or sys.stderr
    infos = list(infos)
    ci = ci_kind()
    if ci == GITHUB:
        path = os.environ.get("GITHUB_STEP_SUMMARY")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(summary_markdown(infos, metrics, columns, causes) + "\n")
        for i in infos:
            if i.status != "Completed" or i.timed_out:
                title, body = _failure_text(i)
                print(github_error(title, (body + _why_text(causes.get(i.name))).strip()), file=stream, flush=True)
    elif ci == AZURE_PIPELINES:
        for i in infos:
            if i.status != "Completed" or i.timed_out:
                title, body = _failure_text(i)
                body = (body + _why_text(causes.get(i.name))).strip()
                print(azure_pipelines_error(title + (": " + body if body else "")), file=stream, flush=True)
        summary_dir = os.environ.get("AGENT_TEMPDIRECTORY") or os.environ.get("RUNNER_TEMP")
        if summary_dir:
            path = os.path.join(summary_dir, "dtrain-summary.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write(summary_markdown(infos, metrics, columns, causes) + "\n")
            print(f"##vso[task.uploadsummary]{path}", file=stream, flush=True)


# --- annotations for spec diagnostics (dtrain validate) --------------------------------------------
# Each CI's escaping, from its logging-command rules: GitHub's data escapes %, CR and LF, and its
# properties also ':' and ','; Azure Pipelines escapes ';', ']', CR, LF and '%' (as %AZP25).

def gh_escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def gh_escape_property(text: str) -> str:
    return gh_escape_data(text).replace(":", "%3A").replace(",", "%2C")


def vso_escape(text: str) -> str:
    return (text.replace("%", "%AZP25").replace(";", "%3B").replace("]", "%5D").replace("\r", "%0D")
            .replace("\n", "%0A"))


def github_error(title: str, body: str) -> str:
    """An ::error annotation for a job's failure: redacted, no control bytes, escaped as data (the
    message cannot add a line or a second command), and no `##vso[`/`##[` left in it (the runner also
    reads the old `##[` form)."""
    data = neutralize_commands(_clean(body or title), AZURE_PIPELINES)   # the `##` rules, whichever CI
    return f"::error title={gh_escape_property(_clean(title))}::{gh_escape_data(data)}"


def azure_pipelines_error(message: str) -> str:
    """A ##vso[task.logissue] error for a job's failure: redacted, no control bytes, `##vso[` in it
    neutralized, escaped (`]` cannot end the command's properties)."""
    return f"##vso[task.logissue type=error]{vso_escape(neutralize_commands(_clean(message), AZURE_PIPELINES))}"


_GH_LEVEL = {"error": "error", "warning": "warning", "note": "notice"}


def _diagnostic_text(d) -> str:
    # a diagnostic quotes the spec's values, which may hold a SAS URL or a key (its CR/LF are escaped)
    return redact(d.message + (f"\nhint: {d.hint}" if d.hint else ""))


def _gh_file(path: str) -> str:
    # GitHub places annotations by path from the repository root (GITHUB_WORKSPACE)
    ws = os.environ.get("GITHUB_WORKSPACE")
    if ws:
        rel = os.path.relpath(os.path.abspath(path), ws)
        if not rel.startswith(".."):
            return rel.replace(os.sep, "/")
    return path


def github_annotation(d) -> str:
    props = []
    if d.file and d.line is not None:   # a --set value has no file to point at
        props.append(f"file={gh_escape_property(_gh_file(d.file))}")
        props.append(f"line={d.line}")
        if d.column is not None:
            props.append(f"col={d.column}")
    if d.code:
        props.append(f"title={gh_escape_property('dtrain ' + d.code)}")
    head = f"::{_GH_LEVEL[d.severity]}" + (" " + ",".join(props) if props else "")
    return f"{head}::{gh_escape_data(_diagnostic_text(d))}"


def azure_pipelines_annotation(d) -> str | None:
    if d.severity not in ("error", "warning"):   # logissue knows errors and warnings only
        return None
    props = [f"type={d.severity}"]
    if d.file and d.line is not None:
        props += [f"sourcepath={vso_escape(d.file)}", f"linenumber={d.line}"]
        if d.column is not None:
            props.append(f"columnnumber={d.column}")
    if d.code:
        props.append(f"code={vso_escape(d.code)}")
    return f"##vso[task.logissue {';'.join(props)}]{vso_escape(_diagnostic_text(d))}"


def annotate_diagnostics(diags, stream=None) -> None:
    """Spec diagnostics as the running CI's annotations, on the PR's lines. stderr by default: stdout
    carries JSON. Nothing outside GitHub Actions (GITHUB_ACTIONS=true) or Azure Pipelines (TF_BUILD=True)."""
    stream = stream or sys.stderr
    ci = ci_kind()
    if ci == GITHUB:
        lines = [github_annotation(d) for d in diags]
    elif ci == AZURE_PIPELINES:
        lines = [a for a in (azure_pipelines_annotation(d) for d in diags) if a]
    else:
        return
    for line in lines:
        print(line, file=stream, flush=True)
