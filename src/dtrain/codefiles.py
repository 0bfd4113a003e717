"""The files of a job's `code` folder, as azure-ai-ml uploads them; the local snapshot copies the same list.

What the SDK does (azure/ai/ml/_utils/_asset_utils.py, upload_directory / get_upload_files_from_folder /
traverse_directory):
  * it walks with os.walk(followlinks=True): a symlinked folder is uploaded with its contents, under the
    link's name; a symlinked file is uploaded with the contents of its target, under the link's name;
  * each file is matched against the ignore file on its own (dtrain.ignorefile), by its path under the
    resolved folder it was found in;
  * it has no size limit, and opens whatever it finds.
What dtrain refuses (exit 2, naming the path), before anything is copied or uploaded:
  * a FIFO, socket or device (or a symlink to one, e.g. /dev/zero): Azure's upload would block or read
    forever;
  * a broken symlink or a symlink loop between files: Azure's upload fails on it;
  * a symlinked folder that points back to one of its own parents, unless everything under it is ignored:
    Azure's walk would follow it until the OS gives up, uploading the same files over and over;
  * more than the size limit in all (DTRAIN_CODE_LIMIT_MB, default 1024 MB).
Files and folders the ignore file excludes are never opened, whatever they are.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UsageError
from .ignorefile import IgnoreRules

LIMIT_ENV = "DTRAIN_CODE_LIMIT_MB"


@dataclass
class CodeFile:
    source: str      # the real file (symlinks resolved)
    dest: str        # '/'-separated path inside the snapshot / upload
    size: int


@dataclass
class CodeFiles:
    files: list[CodeFile] = field(default_factory=list)
    ignore_file: Path | None = None

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def limit_bytes() -> int:
    from .settings import current

    return current().code_limit_bytes


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _refuse(path: str, what: str, hint: str | None = None) -> UsageError:
    return UsageError(f"code folder: {path} is {what}",
                      hint=hint or "remove it from the code folder, or exclude it in .amlignore")


def code_files(src: str | os.PathLike, *, limit: int | None = None) -> CodeFiles:
    """Every file Azure would upload for `code: src`, checked against the rules above."""
    limit = limit_bytes() if limit is None else limit
    src = Path(src)
    out = CodeFiles()
    if not src.is_dir():
        st = _stat_target(str(src), str(src))
        out.files.append(CodeFile(os.path.realpath(src), src.name, st.st_size))
        _check_limit(out, limit, src)
        return out
    root = Path(os.path.realpath(src))
    rules = IgnoreRules.for_folder(src)
    out.ignore_file = rules.source
    loops: list[tuple[str, str]] = []          # (link shown to the user, real folder it loops back to)
    # Stack of (folder as the walk reaches it, its real path, dest prefix, real paths of its ancestors).
    stack: list[tuple[str, str, str, tuple[str, ...]]] = [(str(src), str(root), "", (str(root),))]
    while stack:
        shown, real, prefix, chain = stack.pop()
        try:
            entries = sorted(os.scandir(real), key=lambda e: e.name)
        except OSError:
            continue                               # os.walk skips a folder it cannot list; so does the SDK
        for e in entries:
            shown_path = os.path.join(shown, e.name)
            dest = f"{prefix}{e.name}"
            try:
                is_dir = e.is_dir()                # follows symlinks, as os.walk(followlinks=True)
            except OSError:
                is_dir = False
            if is_dir:
                target = os.path.realpath(e.path)
                if target in chain:
                    loops.append((shown_path, target))
                    continue
                stack.append((shown_path, target, dest + "/", chain + (target,)))
                continue
            # A file (or anything that is not a folder): matched by its path under the resolved folder.
            if rules.excluded(os.path.join(real, e.name)):
                continue
            st = _stat_target(e.path, shown_path)
            out.files.append(CodeFile(os.path.realpath(e.path), dest, st.st_size))
    for link, target in loops:
        if any(f.source == target or f.source.startswith(target.rstrip("/") + "/") for f in out.files):
            raise _refuse(link, f"a symlink back to its own parent folder {target}",
                          hint="Azure's upload would follow it over and over; remove the link or point it "
                               "elsewhere")
    out.files.sort(key=lambda f: f.dest)
    _check_limit(out, limit, src)
    return out


def check_code_folder(path: str | os.PathLike | None) -> None:
    """The pre-upload check for an Azure submit: refuses what code_files refuses (nothing is read)."""
    if path is not None:
        code_files(path)


def _stat_target(path: str, shown: str) -> os.stat_result:
    try:
        st = os.stat(path)                       # follows symlinks, as the upload does
    except OSError as exc:
        if os.path.islink(path):
            what = "a symlink loop" if exc.errno == 40 else f"a broken symlink (-> {os.readlink(path)})"
            raise _refuse(shown, what, hint="Azure's upload fails on it; remove it or exclude it in "
                                            ".amlignore") from None
        raise _refuse(shown, f"unreadable ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        target = f" (-> {os.path.realpath(path)})" if os.path.islink(path) else ""
        raise _refuse(shown + target, _kind(st.st_mode),
                      hint="Azure's upload would block or read it forever; remove it from the code folder "
                           "or exclude it in .amlignore")
    return st


def _check_limit(out: CodeFiles, limit: int, src: Path) -> None:
    total = out.total_bytes
    if total <= limit:
        return
    biggest = sorted(out.files, key=lambda f: -f.size)[:3]
    names = ", ".join(f"{f.dest} ({f.size / 1e6:.1f} MB)" for f in biggest)
    raise UsageError(f"code folder {src} holds {total / 1e6:.1f} MB to upload, over the {limit / 1e6:.0f} MB "
                     f"limit (largest: {names})",
                     hint=f"exclude data and outputs in .amlignore (use inputs for data), or raise the limit "
                          f"with {LIMIT_ENV}")


def copy_files(files: CodeFiles, dest: Path, *, limit: int | None = None) -> int:
    """Copy the listed files into `dest` (a fresh folder). A file that became a FIFO/device since it was
    listed, or that grows past the limit while being copied, stops the copy with an error."""
    import shutil

    limit = limit_bytes() if limit is None else limit
    dest.mkdir(parents=True, exist_ok=True)
    budget = limit
    for f in files.files:
        target = dest / f.dest
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(f.source, os.O_RDONLY | os.O_NONBLOCK)   # never blocks on a FIFO swapped in
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise _refuse(f.source, "no longer a regular file")
            with os.fdopen(fd, "rb", closefd=False) as fin, open(target, "wb") as fout:
                while chunk := fin.read(1 << 20):
                    budget -= len(chunk)
                    if budget < 0:
                        raise UsageError(f"code folder: {f.source} grew while it was copied; the snapshot "
                                         f"passed the {limit / 1e6:.0f} MB limit",
                                         hint=f"exclude it in .amlignore, or raise {LIMIT_ENV}")
                    fout.write(chunk)
        finally:
            os.close(fd)
        shutil.copystat(f.source, target)
    return len(files.files)
