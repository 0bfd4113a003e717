"""The code snapshot: a copy of `code` that honours the ignore file Azure ML honours (dtrain.ignorefile)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from ...ignorefile import IgnoreRules


def snapshot(src: Path, dest: Path) -> tuple[int, Path | None]:
    """Copy `src` (a folder or one file) into `dest`, honouring the ignore file. Returns (files copied,
    ignore file used)."""
    dest.mkdir(parents=True, exist_ok=True)
    src = Path(src)
    if src.is_file():
        shutil.copy2(src, dest / src.name)
        return 1, None
    rules = IgnoreRules.for_folder(src)
    count = 0
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = os.path.relpath(dirpath, src)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        keep = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if not rules.ignored(rel, True):
                keep.append(d)
        dirnames[:] = keep
        target_dir = dest / rel_dir if rel_dir else dest
        target_dir.mkdir(parents=True, exist_ok=True)
        for fn in filenames:
            rel = f"{rel_dir}/{fn}" if rel_dir else fn
            full = Path(dirpath) / fn
            if rules.ignored(rel, full.is_dir()):
                continue
            try:
                shutil.copy2(full, target_dir / fn)   # follows symlinks, as Azure's upload does
            except (FileNotFoundError, IsADirectoryError):
                continue                               # a dangling link or a file removed meanwhile
            count += 1
    return count, rules.source
