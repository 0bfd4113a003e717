"""Job templates (job_templates/*.yml) and `dtrain init`: a commented spec plus its training script.

Templates are ordinary Azure ML job YAMLs whose first line is `# dtrain-template: <summary>`; their
`code:` points at ../training_scripts. init copies one into a folder with the script and the helper
modules it imports, retargeted to a VM size and node count. No Azure SDK, no network.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .errors import UsageError


def _data_dir(name: str) -> Path:
    """job_templates/ or training_scripts/: package data in an installed wheel (dtrain/<name>),
    else the folder at the top of the source checkout (editable installs, PYTHONPATH=src)."""
    packaged = Path(str(resources.files("dtrain") / name))
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / name


TEMPLATES_DIR = _data_dir("job_templates")
SCRIPTS_DIR = _data_dir("training_scripts")
_HEADER = re.compile(r"#\s*dtrain-template:\s*(.+)")
_SCRIPT = re.compile(r"python[\d.]*\s+(?:-u\s+)?([\w./-]+\.py)")
_LOCAL_IMPORT = re.compile(r"^\s*(?:import|from)\s+(\w+)", re.M)


@dataclass(frozen=True)
class Template:
    name: str
    summary: str
    path: Path
    script: str | None
    instance_type: str | None
    nodes: int
    processes_per_node: int
    framework: str
    needs: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"name": self.name, "summary": self.summary, "script": self.script, "framework": self.framework,
                "instance_type": self.instance_type, "nodes": self.nodes,
                "processes_per_node": self.processes_per_node, "needs": list(self.needs), "path": str(self.path)}


# What a template's job needs on this machine beyond dtrain itself, from the helper module its script imports
# and its distribution: without it the script exits 2 (an extra) or the local launch is refused (mpirun).
_EXTRA_OF_MODULE = {"torch_common.py": "the torch extra (pip install 'dtrain[torch]')",
                    "tf_common.py": "the tensorflow extra (pip install 'dtrain[tensorflow]')"}
MPIRUN_NEED = "Open MPI's mpirun (apt-get install openmpi-bin)"


def _needs(script: str | None, framework: str) -> tuple[str, ...]:
    files = {p.name for p in script_files(script)} if script else set()
    needs = [extra for module, extra in _EXTRA_OF_MODULE.items() if module in files]
    return tuple(needs + ([MPIRUN_NEED] if framework == "mpi" else []))


def _field(text: str, key: str):
    m = re.search(rf"^\s*{key}:\s*([^\s#]+)", text, re.M)
    return m.group(1) if m else None


def _load(path: Path) -> Template:
    text = path.read_text()
    first = text.splitlines()[0] if text else ""
    m = _HEADER.match(first)
    script = _SCRIPT.search(text)
    dist = _field(text, "type") if "distribution:" in text else None
    dist_type = None
    if "distribution:" in text:
        block = text.split("distribution:", 1)[1]
        dm = re.search(r"^\s+type:\s*(\w+)", block, re.M)
        dist_type = dm.group(1).lower() if dm else dist
    ppn = _field(text, "process_count_per_instance")
    framework = dist_type or "none"
    return Template(
        name=path.stem, summary=m.group(1).strip() if m else "", path=path,
        script=script.group(1) if script else None, instance_type=_field(text, "instance_type"),
        nodes=int(_field(text, "instance_count") or 1), processes_per_node=int(ppn) if ppn else 1,
        framework=framework, needs=_needs(script.group(1) if script else None, framework))


def all_templates() -> list[Template]:
    if not TEMPLATES_DIR.is_dir():
        raise UsageError(f"templates not found at {TEMPLATES_DIR}",
                         hint="reinstall dtrain (pip install dtrain, or pip install -e . in a checkout)")
    return [_load(p) for p in sorted(TEMPLATES_DIR.glob("*.yml"))]


def get(name: str) -> Template:
    ts = {t.name: t for t in all_templates()}
    if name not in ts:
        from .spec.fields import did_you_mean

        dym = did_you_mean(name, ts)
        raise UsageError(f"no template named '{name}'",
                         hint=(f"did you mean '{dym}'? " if dym else "") + "`dtrain templates` lists them")
    return ts[name]


def script_files(script: str) -> list[Path]:
    """The script and the training_scripts modules it imports, transitively."""
    todo, found = [SCRIPTS_DIR / script], []
    while todo:
        p = todo.pop()
        if p in found or not p.is_file():
            continue
        found.append(p)
        for mod in _LOCAL_IMPORT.findall(p.read_text()):
            cand = SCRIPTS_DIR / f"{mod}.py"
            if cand.is_file() and cand not in found:
                todo.append(cand)
    return found


def render_init(t: Template, instance_type: str | None, nodes: int | None) -> str:
    """The template's text retargeted: code -> src, size, node count, processes = GPUs of the size."""
    text = t.path.read_text()
    text = re.sub(r"^(\s*code:\s*)\S+", r"\1src", text, count=1, flags=re.M)
    chosen = instance_type or t.instance_type
    if chosen:
        from .spec import vmsizes

        size = vmsizes.lookup(chosen)
        name = size.name if size is not None else chosen
        # The comment always comes from the validator's catalog: a template's own comment would describe
        # another VM as soon as the size changes.
        text = re.sub(r"^(\s*instance_type:\s*)\S+[^\n]*", lambda m: f"{m.group(1)}{name}   # {size_comment(size)}",
                      text, count=1, flags=re.M)
    if instance_type:
        if t.framework in ("pytorch", "mpi"):
            # validate accepts sizes outside the GPU catalog (CPU sizes, new sizes) with a note; so does init,
            # with one process per node, since their GPU count is unknown.
            ppn = size.gpus if size is not None else 1
            text = re.sub(r"^(\s*process_count_per_instance:\s*)\d+", rf"\g<1>{ppn}", text, count=1,
                          flags=re.M)
    if nodes is not None:
        if nodes < 1:
            raise UsageError("--nodes must be at least 1")
        text = re.sub(r"^(\s*instance_count:\s*)\d+", rf"\g<1>{nodes}", text, count=1, flags=re.M)
        if t.framework == "tensorflow":
            text = re.sub(r"^(\s*worker_count:\s*)\d+", rf"\g<1>{nodes}", text, count=1, flags=re.M)
    header = ("# yaml-language-server: $schema=https://azuremlschemas.azureedge.net/latest/"
              "commandJob.schema.json\n")
    return header + text


def size_comment(size) -> str:
    """What a VM size is, for the comment beside `instance_type:`: GPUs, GPU model, InfiniBand or not."""
    if size is None:
        return "not in dtrain's GPU catalog (docs/vm-sizes.md): GPUs and InfiniBand unknown"
    if size.gpu_fraction < 1:
        gpus = f"1/{round(1 / size.gpu_fraction)} of an {size.gpu_model} ({size.gpu_memory_gib:g}GB)"
    else:
        gpus = f"{size.gpus} x {size.gpu_model}"
        if f"{size.gpu_memory_gib:g}GB" not in size.gpu_model:
            gpus += f" {size.gpu_memory_gib:g}GB"
    fabric = size.interconnect.split(" (")[0].split(" x")[0].split(";")[0] if size.infiniband else "no InfiniBand"
    return f"{gpus}, {fabric}"


def size_note(instance_type: str | None) -> str | None:
    """validate's note for a size outside the catalog, for init to print: the two agree on what is accepted."""
    if not instance_type:
        return None
    from .spec import vmsizes

    if vmsizes.lookup(instance_type) is not None:
        return None
    sugg = vmsizes.suggest(instance_type)
    return (f"'{instance_type}' is not a GPU size dtrain knows: processes per node not matched to GPUs"
            + (f" (did you mean '{sugg[0]}'?)" if sugg else ""))


def init(directory: Path, name: str, instance_type: str | None = None, nodes: int | None = None,
         force: bool = False) -> list[Path]:
    """Write DIR/job.yml and DIR/src/<scripts>. Every destination is checked before anything is written:
    files that exist are a UsageError listing them (exit 2), unless force; then nothing was changed."""
    t = get(name)
    directory = Path(directory)
    job = directory / "job.yml"
    src = directory / "src"
    text = render_init(t, instance_type, nodes)
    scripts = script_files(t.script) if t.script else []
    dests = [job, *(src / f.name for f in scripts)]
    try:
        existing = [d for d in dests if os.path.lexists(d)] + _blocking_files(directory, src)
    except OSError as exc:
        raise _cannot_write(directory, exc) from None
    if existing and not force:
        listed = ", ".join(str(d) for d in existing)
        raise UsageError(f"the template would overwrite what already exists: {listed}; nothing was written",
                         hint="choose another folder, or pass --force to overwrite them")
    written = []
    try:
        src.mkdir(parents=True, exist_ok=True)
        for f, dest in zip(scripts, dests[1:]):
            shutil.copyfile(f, dest)
            written.append(dest)
        tmp = job.with_suffix(".yml.tmp")
        tmp.write_text(text)
        tmp.replace(job)
    except OSError as exc:
        raise _cannot_write(directory, exc) from None
    return [job, *written]


def _blocking_files(directory: Path, src: Path) -> list[Path]:
    """DIR or DIR/src as a file (not a folder): nothing of the template could be written there."""
    return [p for p in (directory, src) if os.path.lexists(p) and not p.is_dir()]


def _cannot_write(directory: Path, exc: OSError) -> UsageError:
    if exc.errno == errno.ENAMETOOLONG:
        longest = max((len(part.encode()) for part in directory.parts), default=0)
        return UsageError(f"cannot create {str(directory)[:60]}...: the name is too long "
                          f"({longest} bytes in one folder name; at most 255, 4096 in a whole path)",
                          hint="choose a shorter folder name")
    return UsageError(f"cannot write into {directory}: {exc.strerror or exc}", hint="choose a folder you can write to")
