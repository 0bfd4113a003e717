"""A local job's own environment (backends/local/jobenv.py): the first `submit --local --wait` of a spec with
a conda file builds it; the second reuses it; an edited conda file builds a new one (uv's cache warm).

    python benchmarks/jobenv_reuse.py [--pins "numpy==2.1.3 pyyaml==6.0.2"] [--offline] [--json]

Each submit is a fresh `python -m dtrain submit --local --wait` process (wall time, start-up included) of a
one-process job importing the pinned packages, in a fresh DTRAIN_HOME and a fresh uv cache (so the first
build downloads). --offline: tiny wheels built here instead of the package index."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from wheelhouse import make_wheel  # noqa: E402


def _submit(spec: Path, env: dict, name: str) -> float:
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "dtrain", "submit", str(spec), "--local", "--wait", "--name", name],
                       env=env, capture_output=True, text=True)
    took = time.monotonic() - start
    if p.returncode != 0:
        raise SystemExit(f"{name} failed ({p.returncode}):\n{p.stderr}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pins", default="numpy==2.1.3 pyyaml==6.0.2")
    ap.add_argument("--offline", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        pins, options = a.pins.split(), []
        if a.offline:
            for i in range(5):
                make_wheel(t / "wheels", f"benchpkg{i}", "1.0")
            pins, options = [f"benchpkg{i}==1.0" for i in range(5)], ["--no-index", f"--find-links {t / 'wheels'}"]
        mods = {"pyyaml": "yaml", "scikit-learn": "sklearn"}
        imports = ", ".join(mods.get(p.split("==")[0], p.split("==")[0]) for p in pins)
        (t / "src").mkdir()
        (t / "src" / "run.py").write_text(f"import {imports}\nprint('ok')\n")

        def conda(extra: str = "") -> None:
            lines = "".join(f"    - {x}\n" for x in options + pins) + extra
            (t / "conda.yml").write_text(f"dependencies:\n  - python={py}\n  - pip\n  - pip:\n{lines}")

        conda()
        spec = t / "job.yml"
        spec.write_text("command: python run.py\ncode: src\ncompute: local\nenvironment:\n  image: "
                        "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04\n  conda_file: conda.yml\n")
        env = {**os.environ, "DTRAIN_HOME": str(t / "home"), "UV_CACHE_DIR": str(t / "uv-cache"),
               "PYTHONPATH": str(ROOT / "src")}
        first = _submit(spec, env, "first")
        second = _submit(spec, env, "second")
        conda("    - --prefer-binary\n")               # an edit: a new hash, the same packages
        edited = _submit(spec, env, "edited")
        built = sorted(json.loads(p.read_text())["built_s"] for p in (t / "home" / "envs").glob("*/ready.json"))
    res = {"pins": pins, "first_submit_s": round(first, 2), "second_submit_s": round(second, 2),
           "edited_submit_s": round(edited, 2), "builds_s": built}
    if a.json:
        print(json.dumps(res))
    else:
        print(f"pins: {' '.join(pins)}\nfirst submit (builds, cold uv cache): {first:.2f} s\n"
              f"second submit (reuses): {second:.2f} s\nedited conda file (rebuilds, warm cache): {edited:.2f} s\n"
              f"builds alone: {', '.join(f'{b:.2f} s' for b in built)}")


if __name__ == "__main__":
    main()
