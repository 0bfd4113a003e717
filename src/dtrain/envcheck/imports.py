"""The imports of a job's code, read as azure-ai-ml uploads the code folder (dtrain.codefiles: the same
ignore rules), and which of them the environment, the standard library or the code folder itself
provides. Imports guarded by `try: ... except ImportError` are optional and not reported."""
from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..codefiles import code_files
from .conda import normalize

# Import name -> the distribution that provides it, where they differ (the suggestion in a diagnostic).
IMPORT_TO_DIST = {
    "sklearn": "scikit-learn", "cv2": "opencv-python", "PIL": "pillow", "yaml": "pyyaml",
    "skimage": "scikit-image", "bs4": "beautifulsoup4", "dateutil": "python-dateutil", "dotenv": "python-dotenv",
    "jwt": "pyjwt", "attr": "attrs", "Crypto": "pycryptodome", "google.protobuf": "protobuf",
    "OpenSSL": "pyopenssl", "serial": "pyserial", "magic": "python-magic", "docx": "python-docx",
    "pptx": "python-pptx", "fitz": "pymupdf", "git": "gitpython", "lightgbm": "lightgbm", "xgboost": "xgboost",
    "tensorboardX": "tensorboardx", "pytorch_lightning": "pytorch-lightning", "lightning": "lightning",
    "sentencepiece": "sentencepiece", "tiktoken": "tiktoken", "faiss": "faiss-cpu", "onnxruntime": "onnxruntime",
    "mpi4py": "mpi4py", "horovod": "horovod", "deepspeed": "deepspeed", "apex": "apex", "wandb": "wandb",
    "zmq": "pyzmq", "psycopg2": "psycopg2-binary", "MySQLdb": "mysqlclient", "Levenshtein": "levenshtein",
    "editdistance": "editdistance", "llama_cpp": "llama-cpp-python", "speech_recognition": "speechrecognition",
}
# Distribution -> import names it provides beyond its own name (conda and pip names alike).
DIST_PROVIDES = {
    "pytorch": ("torch",), "pytorch-cpu": ("torch",), "tensorflow-cpu": ("tensorflow",),
    "tensorflow-gpu": ("tensorflow",), "tf-nightly": ("tensorflow",), "mlflow-skinny": ("mlflow",),
    "opencv-python-headless": ("cv2",), "opencv-contrib-python": ("cv2",),
    "opencv-contrib-python-headless": ("cv2",), "py-opencv": ("cv2",), "opencv": ("cv2",),
    "pillow-simd": ("PIL",), "faiss-gpu": ("faiss",), "onnxruntime-gpu": ("onnxruntime",),
    "pyyaml": ("yaml",), "protobuf": ("google",), "setuptools": ("pkg_resources", "setuptools", "_distutils_hack"),
    "psycopg2": ("psycopg2",), "typing-extensions": ("typing_extensions",), "msgpack-python": ("msgpack",),
}
_OPTIONAL = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass(frozen=True)
class ImportUse:
    name: str        # the import as written (a.b.c)
    top: str         # its top-level name
    file: str        # the file, as shown
    line: int


def scan(code: Path, shown_root: str) -> tuple[list, set]:
    """(every non-optional absolute import in the code's Python files, the module names the code folder
    itself provides). `shown_root`: how the folder is named in diagnostics."""
    files = code_files(code)
    uses: list = []
    local: set = set()
    for f in files.files:
        parts = f.dest.split("/")
        local.update(p for p in parts[:-1])
        stem = parts[-1].split(".")[0]
        if parts[-1].endswith((".py", ".so", ".pyd")):
            local.add(stem)
        if not parts[-1].endswith(".py"):
            continue
        shown = os.path.join(shown_root, f.dest) if code.is_dir() else shown_root
        uses.extend(_imports(Path(f.source), shown))
    return uses, local


def _imports(path: Path, shown: str) -> list:
    try:
        tree = ast.parse(path.read_bytes(), filename=shown)
    except (SyntaxError, ValueError, OSError):
        return []                  # the job's own problem: Python reports it where it runs
    optional = _optional_lines(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno in optional:
            continue
        if isinstance(node, ast.Import):
            out += [ImportUse(a.name, a.name.split(".")[0], shown, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(ImportUse(node.module, node.module.split(".")[0], shown, node.lineno))
    return out


def _optional_lines(tree: ast.AST) -> set:
    """Lines of imports inside `try:` bodies whose handlers catch ImportError (optional dependencies) and
    inside `if TYPE_CHECKING:` blocks (never run)."""
    lines: set = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h.type) for h in node.handlers):
            lines.update(n.lineno for b in node.body for n in ast.walk(b) if hasattr(n, "lineno"))
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines.update(n.lineno for b in node.body for n in ast.walk(b) if hasattr(n, "lineno"))
    return lines


def _catches_import_error(t) -> bool:
    if t is None:
        return True                # a bare except
    names = [t] if not isinstance(t, ast.Tuple) else list(t.elts)
    return any(isinstance(n, ast.Name) and n.id in _OPTIONAL for n in names)


def provided_names(distributions) -> set:
    """The top-level import names a set of distributions (normalized names) provides."""
    names: set = set()
    for d in distributions:
        names.add(d.replace("-", "_"))
        names.update(n.lower() for n in DIST_PROVIDES.get(d, ()))
    for imp, dist in IMPORT_TO_DIST.items():
        if normalize(dist) in distributions:
            names.add(imp.split(".")[0].lower())
    return names


def is_provided(top: str, distributions: set, names: set, local: set) -> bool:
    """Whether `top` comes from the standard library, the code folder or the environment. A namespace
    import (azure, google, azureml) counts as provided by any distribution named after it (azure-ai-ml)."""
    if top in sys.stdlib_module_names or top in local or top.lower() in names:
        return True
    prefix = normalize(top) + "-"
    return any(d.startswith(prefix) for d in distributions)


def suggestion(use: ImportUse) -> str:
    """The distribution to add for an import."""
    dotted = ".".join(use.name.split(".")[:2])
    return IMPORT_TO_DIST.get(dotted) or IMPORT_TO_DIST.get(use.top) or use.top.replace("_", "-").lower()
