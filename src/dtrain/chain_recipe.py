"""A retry chain's recipe ($DTRAIN_HOME/chains/NAME.json): what the jobs' tags cannot hold and a follower needs
to submit the next attempt, the validated spec and the --input paths (chain.py). Written atomically; a recipe
of another shape is no recipe, never a crash; `stop_recipe` marks a chain canceled between attempts."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path


def _recipes() -> Path:
    from .settings import current

    return current().home / "chains"


def save_recipe(chain: str, spec, input_paths: dict, local: bool) -> None:
    """$DTRAIN_HOME/chains/<chain>.json: the validated spec (after --set), so that `dtrain wait CHAIN` in any
    terminal of this machine can submit the next attempt. Written atomically; no secret (the spec is a file
    here already). Another machine follows the chain through the jobs' tags, and re-running the same
    `submit --retries` there drives it."""
    doc = {"chain": chain, "local": local, "input_paths": dict(input_paths or {}),
           "spec": {"data": spec.data, "base_dir": str(spec.base_dir),
                    "source": str(spec.source.resolve()) if spec.source is not None else None}}
    path = _recipes() / f"{chain}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, sort_keys=True, default=str)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    except OSError as exc:
        raise _unstorable(path, exc) from None


def check_recipe_storable(chain: str) -> None:
    """Before attempt 1 is submitted: a chain whose recipe cannot be stored would retry nothing (no
    follower could submit attempt 2), so it is refused (exit 6) while nothing has been sent."""
    folder = _recipes()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{chain}.probe.", dir=str(folder))
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise _unstorable(folder / f"{chain}.json", exc) from None


def _unstorable(path: Path, exc: OSError):
    from .errors import ConfigError

    return ConfigError(f"cannot store the recipe of chain {path.stem} at {path} ({exc.strerror or exc}); "
                       "without it no attempt after the first could be submitted",
                       hint="make $DTRAIN_HOME/chains writable (or set DTRAIN_HOME), or submit without --retries")


def stop_recipe(chain: str) -> bool:
    """Mark the chain stopped (`dtrain cancel` between attempts): no follower on this machine submits another
    attempt. False when this machine has no recipe for it."""
    path = _recipes() / f"{chain}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict):
            return False
        doc["stopped"] = True
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, sort_keys=True, default=str)
        os.replace(tmp, path)
        return True
    except (OSError, ValueError):
        return False


def recipe_stopped(chain: str) -> bool:
    try:
        doc = json.loads((_recipes() / f"{chain}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and bool(doc.get("stopped"))


def load_recipe(chain: str):
    """(spec, input_paths) from the recipe, or None when this machine has none."""
    from .spec.model import JobSpec

    try:
        doc = json.loads((_recipes() / f"{chain}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    s = doc.get("spec") if isinstance(doc, dict) else None
    inputs = doc.get("input_paths") or {} if isinstance(doc, dict) else None
    # a recipe of another shape (damaged, hand-edited) is no recipe, never a crash
    if not (isinstance(s, dict) and isinstance(s.get("data"), dict) and s["data"] and isinstance(s.get("base_dir"), str)
            and isinstance(s.get("source") or "", str) and isinstance(inputs, dict)):
        return None
    spec = JobSpec(data=s["data"], base_dir=Path(s["base_dir"]), source=Path(s["source"]) if s.get("source") else None)
    return spec, {str(k): str(v) for k, v in inputs.items()}
