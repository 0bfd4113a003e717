"""`dtrain clean --datastores`: the datastore folders that only the jobs a clean removes wrote go with them.

What a job writes and reads is what its plan.json recorded at submit: `output_dirs` (resolved paths, so
a retry chain's attempts all name the one `${{name}}` folder bound to the chain) and `inputs`. A folder
under $DTRAIN_HOME/datastores/<store>/ that a removed job wrote goes only when no remaining job (running,
young, unreadable, symlinked, or a submit still staging) writes or reads it, a folder inside it, or a
folder around it. A remaining job whose plan cannot be read might use any of them, so then none goes.
Never removed: a store's own folder (data a user put in it), anything outside $DTRAIN_HOME/datastores,
and a folder reached through a symlink (none is followed: each part of the path is checked).
"""
from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..safefile import NotRegularFile, open_regular
from .store import PLAN, STATE, tree_size


@dataclass
class DatastoreFolder:
    path: str
    bytes: int
    jobs: list = field(default_factory=list)    # the removed jobs that wrote it


def _under(path: str, ds_root: Path) -> str | None:
    """`path` normalised when it lies below a store's folder ($DTRAIN_HOME/datastores/<store>/...)."""
    if not isinstance(path, str) or not os.path.isabs(path):
        return None
    p = Path(os.path.normpath(path))
    try:
        rel = p.relative_to(ds_root)
    except ValueError:
        return None
    return str(p) if len(rel.parts) >= 2 else None


def plan_uses(folder: Path, ds_root: Path) -> tuple[set, set] | None:
    """(datastore folders the job writes, datastore paths it reads) from its plan; None when unreadable."""
    try:
        with open_regular(folder / PLAN) as f:
            plan = json.load(f)
        outputs, inputs = plan.get("output_dirs") or [], (plan.get("inputs") or {}).values()
    except (OSError, NotRegularFile, ValueError, AttributeError):
        return None
    writes = {p for p in (_under(d, ds_root) for d in outputs) if p}
    reads = {p for p in (_under(v, ds_root) for v in inputs) if p}
    return writes, reads


def scan(root: Path, ds_root: Path, skip=()) -> dict:
    """name -> plan_uses() for every job folder (and submit still staging) under the jobs root."""
    uses: dict = {}
    if not root.is_dir():
        return uses
    for d in root.iterdir():
        if d.name in skip or d.name.startswith(".trash-"):
            continue
        if d.name.startswith(".staging-") or (d / STATE).is_file():
            uses[d.name] = plan_uses(d, ds_root)
    return uses


def _overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep)


def _real_folder(path: str, ds_root: Path) -> bool:
    """Whether every part of `path` from $DTRAIN_HOME/datastores down is a folder and none a symlink."""
    parts = Path(path).relative_to(ds_root).parts
    for i in range(len(parts) + 1):
        try:
            if not stat.S_ISDIR(os.lstat(ds_root.joinpath(*parts[:i])).st_mode):
                return False
        except OSError:
            return False
    return True


def _prune_empty_parents(path: str, ds_root: Path) -> None:
    """The folders left empty above a removed one (dtrain/<job>/ of dtrain/<job>/checkpoints), up to the store."""
    p = Path(path).parent
    while len(p.relative_to(ds_root).parts) >= 2:
        try:
            p.rmdir()
        except OSError:                         # not empty (or gone): it stays
            return
        p = p.parent


def _written_by(uses: dict, names: list) -> dict:
    """folder -> which of `names` wrote it."""
    wrote: dict = {}
    for name in names:
        for p in (uses.get(name) or (set(), set()))[0]:
            wrote.setdefault(p, []).append(name)
    return wrote


def removable(before: dict, removed: list, after: dict, notes: list) -> dict:
    """folder -> the removed jobs that wrote it, for the folders no remaining job uses."""
    unknown = sorted(n for n, u in after.items() if u is None)
    if unknown:
        notes.append(f"datastores: the plan of {', '.join(unknown)} cannot be read, so what it uses is "
                     "unknown; no datastore folder removed")
        return {}
    in_use = {p: n for n, (w, r) in after.items() for p in w | r}
    out: dict = {}
    for p, jobs in sorted(_written_by(before, removed).items()):
        user = next((n for q, n in sorted(in_use.items()) if _overlaps(p, q)), None)
        if user:
            notes.append(f"{p}: also used by {user}; left alone")
        elif not any(p.startswith(q + os.sep) for q in out):    # inside one that goes already
            out[p] = sorted(jobs)
    return out


def sweep(home: Path, folders: dict, dry_run: bool, notes: list) -> list:
    """Remove (or, dry, only measure) each folder; the DatastoreFolders that went (or would)."""
    ds_root = home / "datastores"
    gone = []
    for p, jobs in folders.items():
        if not _real_folder(p, ds_root):
            if os.path.lexists(p):
                notes.append(f"{p}: it (or a folder above it) is a symlink or no folder; left alone")
            continue
        gone.append(DatastoreFolder(p, tree_size(Path(p)), jobs))
        if not dry_run:
            shutil.rmtree(p, ignore_errors=True)
            _prune_empty_parents(p, ds_root)
    return gone
