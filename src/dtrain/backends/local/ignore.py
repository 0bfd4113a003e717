"""The code snapshot: a copy of `code` holding exactly what azure-ai-ml would upload (dtrain.codefiles)."""
from __future__ import annotations

from pathlib import Path

from ...codefiles import code_files, copy_files


def snapshot(src: Path, dest: Path) -> tuple[int, Path | None]:
    """Copy `src` (a folder or one file) into `dest`, honouring the ignore file and the code-folder rules
    (special files, loops and the size limit are refused before anything is copied). Returns (files
    copied, ignore file used)."""
    files = code_files(src)
    return copy_files(files, Path(dest)), files.ignore_file
