"""Many jobs from one spec: `dtrain submit SPEC --matrix PATH=V1,V2 ...` (and `dtrain scale`).

A grid is a value: the cross product of the --matrix values, each combination applied to the spec like
`--set`, validated and named before anything is sent (build_grid). The runner then submits the members
with at most K in flight and follows them (follow.py), as a stream of events the CLI prints.

Names are derived from the group name and the combination alone (member_name), so running the same
command again asks each backend for the same names, and both backends follow a job that already exists
with the same spec instead of starting it again: a re-run submits nothing new.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
from dataclasses import dataclass, field

from .backends.names import MAX_NAME
from .errors import SpecError, UsageError
from .spec.diagnostics import Diagnostic
from .spec.model import JobSpec

GROUP_TAG = "dtrain.group"
MATRIX_TAG = "dtrain.matrix."        # + the --matrix path, e.g. dtrain.matrix.inputs.lr
MAX_JOBS = 1000                      # a grid larger than this is refused unless raised (--max-jobs)
_SLUG_MAX = 40                       # the readable part of a member name, before its hash
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Axis:
    path: str                        # a --set path, e.g. inputs.lr
    values: tuple                    # the values as written, e.g. ("0.1", "0.2")


@dataclass
class Member:
    """One combination: its job name, its values (path -> text as written) and the spec it makes."""
    name: str
    combination: dict
    spec: JobSpec
    sets: list = field(default_factory=list)   # the --set items that made it (the command's, then its own)


@dataclass
class Grid:
    group: str
    axes: list
    members: list
    warnings: list = field(default_factory=list)   # each combination's warnings, labelled

    def tags(self, member: Member) -> dict:
        """The tags that say which group and which values a job is (job tags outlive this machine)."""
        return {GROUP_TAG: self.group, **{MATRIX_TAG + p: v for p, v in member.combination.items()}}


# --- parsing and naming (pure) -------------------------------------------------------------------

def parse_matrix(items) -> list[Axis]:
    """--matrix PATH=V1,V2 flags, in the order given. Values are split on commas and kept as written (each
    is applied as `--set PATH=V`, so 0.1 is a number and [1,2] would be split: use --set for lists)."""
    from .spec.overrides import parse_override

    axes: list[Axis] = []
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"--matrix '{item}' has no '='", hint="write --matrix PATH=V1,V2, e.g. "
                             "--matrix inputs.lr=0.1,0.01")
        path, _, raw = item.partition("=")
        path = path.strip()
        if not path:
            raise UsageError(f"--matrix '{item}': empty path", hint="write --matrix inputs.lr=0.1,0.01")
        if path == "name":
            raise UsageError("--matrix name=...: a grid's jobs are named GROUP-<values>-<hash>",
                             hint="name the group with --name")
        values = tuple(v.strip() for v in raw.split(","))
        if not raw.strip() or any(v == "" for v in values):
            raise UsageError(f"--matrix '{item}': an empty value", hint="write the values separated by commas, "
                             "without spaces or empty items: --matrix inputs.lr=0.1,0.01")
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            raise UsageError(f"--matrix '{item}': {', '.join(dupes)} given twice", hint="give each value once")
        if any(a.path == path for a in axes):
            raise UsageError(f"--matrix {path} is given twice", hint="put all its values in one flag: "
                             f"--matrix {path}=V1,V2")
        for v in values:                   # a value that is not YAML is an error naming --matrix, not --set
            parse_override(f"{path}={v}", flag="--matrix")
        axes.append(Axis(path, values))
    return axes


def combinations(axes: list[Axis]) -> list[dict]:
    """The cross product, in a stable order: the first --matrix varies slowest (as nested loops)."""
    if not axes:
        return []
    return [dict(zip((a.path for a in axes), vals)) for vals in itertools.product(*(a.values for a in axes))]


def member_name(group: str, combination: dict) -> str:
    """GROUP-<values>-<hash>: readable, and unique per combination whatever the order of the flags or the
    other values given (the hash is of the combination itself), so adding a value to a list keeps the
    names of the combinations that were there. At most 255 characters, a valid job name."""
    digest = hashlib.sha256(json.dumps(combination, sort_keys=True).encode()).hexdigest()[:8]
    slug = _UNSAFE.sub("_", "-".join(combination[p] for p in combination)).strip("_-")[:_SLUG_MAX].strip("_-")
    tail = f"-{slug}-{digest}" if slug else f"-{digest}"
    if len(group) + len(tail) > MAX_NAME:
        raise UsageError(f"the group name '{group[:40]}...' is too long for its job names "
                         f"({len(group)} characters; at most {MAX_NAME - len(tail)} here)", hint="give a shorter --name")
    return group + tail


def generated_group() -> str:
    from .backends.names import generate_name

    return generate_name()


# --- building and validating ---------------------------------------------------------------------

def build_grid(spec_path: str, sets, matrix, name: str | None = None, allow=None, max_jobs: int = MAX_JOBS) -> Grid:
    """Every combination loaded and validated, and named. One invalid combination: a SpecError (exit 2)
    carrying the problems of every combination, each labelled with its values; nothing was submitted.
    More than max_jobs combinations: refused before any is built (counted, not enumerated)."""
    axes = parse_matrix(matrix)
    if not axes:
        raise UsageError("no --matrix given", hint="write --matrix PATH=V1,V2")
    count = math.prod(len(a.values) for a in axes)
    if count > max_jobs:
        raise UsageError(f"--matrix makes {count:,} jobs, more than {max_jobs:,}",
                         hint=f"fewer values, or raise the limit on purpose with --max-jobs {count}")
    combos = combinations(axes)
    members, problems, warnings = [], [], []
    for combo in combos:
        member, diags, bad = _member(spec_path, list(sets or []), combo, allow)
        problems += bad
        if member is not None:
            members.append(member)
            warnings += diags
    if problems:
        n = len(combos) - len(members)
        raise SpecError(problems, message=f"{n} of {len(combos)} combinations invalid")
    group = name or next((m.spec.name for m in members if m.spec.name), None) or generated_group()
    for m in members:
        m.name = member_name(group, m.combination)
    return Grid(group=group, axes=axes, members=members, warnings=_shared_once(warnings, len(combos)))


def _member(spec_path: str, sets: list, combo: dict, allow=None):
    """(Member or None, its warnings labelled, its problems labelled) for one combination."""
    from .spec.validate import load_spec

    own = [f"{p}={v}" for p, v in combo.items()]
    label = ", ".join(own)
    try:
        spec, diags = load_spec(spec_path, sets + own, allow=allow)
    except SpecError as exc:
        return None, [], [_labelled(d, label) for d in exc.diagnostics]
    except UsageError as exc:
        if "no such file" in exc.message or "cannot read" in exc.message or "is a folder" in exc.message:
            raise                           # the spec itself, not a combination: say it once
        return None, [], [Diagnostic("error", f"[{label}] {exc.message}", hint=exc.hint, code="bad-matrix-value")]
    return Member("", combo, spec, sets + own), [(d, label) for d in diags if d.severity != "note"], []


def _shared_once(warnings: list, n: int) -> list[Diagnostic]:
    """A warning every combination has is shown once as it is; one only some have, once per combination
    with its values."""
    count: dict = {}
    for d, _ in warnings:
        count[d] = count.get(d, 0) + 1
    out, seen = [], set()
    for d, label in warnings:
        if count[d] == n:
            if d not in seen:
                seen.add(d)
                out.append(d)
        else:
            out.append(_labelled(d, label))
    return out


def _labelled(d: Diagnostic, label: str) -> Diagnostic:
    from dataclasses import replace

    return replace(d, message=f"[{label}] {d.message}")


def where(grid: Grid, local: bool) -> bool:
    """Whether the grid runs here (True) or on Azure ML; a grid that would do both is a usage error."""
    kinds = {local or m.spec.is_local_compute for m in grid.members}
    if len(kinds) > 1:
        raise UsageError("--matrix makes some jobs local (compute: local) and others Azure ML jobs",
                         hint="run the local and the Azure combinations as two commands")
    return kinds.pop()


def default_max_parallel(grid: Grid, local: bool, cpus: int | None = None) -> int | None:
    """Local: as many jobs at once as the machine has a CPU for each of their processes (at least one
    job); Azure: no limit (None), the cluster's own queue decides."""
    if not local:
        return None
    cpus = cpus or os.cpu_count() or 1
    per_job = max((m.spec.process_count for m in grid.members), default=1)
    return max(1, cpus // max(1, per_job))


# --- what to submit -------------------------------------------------------------------------------

def pending(runner, grid: Grid, *, local: bool, input_paths: dict | None = None, tags: dict | None = None) -> list:
    """Every member planned (a plan error submits nothing), each tagged with its group and values, ready for
    the follower to submit as room allows (follow.Pending)."""
    from .backends.base import SubmitOptions
    from .follow import Pending

    hint = (f"the jobs already submitted keep running; the same command with --name {grid.group} follows "
            "them and submits the rest")
    jobs = []
    for m in grid.members:
        opts = SubmitOptions(name=m.name, tags={**(tags or {}), **grid.tags(m)}, input_paths=dict(input_paths or {}))
        jobs.append(Pending(m.name, runner.plan(m.spec, opts, local=local), m, hint))
    return jobs
