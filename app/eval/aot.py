"""Where the compiled passes are kept, and the one built ahead of time, loaded without numba.

numba compiles ``app.eval.compiled`` on first use and keeps what it compiled in a folder named
after the digest of the package's source (``cache_folder``). Loading numba and that cache takes
some 0.5-1 s: too long for ``evaluate``, which reads a run of millions of lines in about as
much, and a quarter of what polars takes to scan a log of 100M rows. evaluate's pass
(``compiled.ranks``) and the log pass (``app.eval.passes``) are therefore also built ahead of
time, by numba's AOT compiler, into a plain extension module kept in the same folder (``make
install``, the image: ``app.eval.cluster_stream.warm``). ``load_passes`` loads it in a
millisecond, or answers None (not built, built from another source, or in a folder another
user may write to): evaluate then reads the run the careful way, and the log pass is numba's.

This module imports neither numba nor numpy.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import ModuleType

#: The package whose source names the folder.
COMPILED = Path(__file__).resolve().parent / "compiled"
#: A cache folder's name: the first 16 hexadecimal digits of its source's digest.
_DIGEST = re.compile(r"[0-9a-f]{16}")
#: The module built ahead of time, its file in the folder's ``aot`` folder.
PASSES_MODULE = "misstriage_passes"


def source_digest() -> str:
    """The first 16 hexadecimal digits of the digest of ``app.eval.compiled``'s source and
    of ``app.eval.passes`` (which names the built module's exports): a function compiled
    there takes in the functions it calls from its other modules, so a change to any module
    makes everything compiled before stale."""
    digest = hashlib.sha256()
    for source in [*sorted(COMPILED.glob("*.py")), COMPILED.parent / "passes.py"]:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]


def _bases() -> list[Path]:
    """Where cache folders may be: NUMBA_CACHE_DIR, else beside the source, else the user's
    cache."""
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "misstriage"
    bases = [os.environ.get("NUMBA_CACHE_DIR"), COMPILED / "__pycache__" / "numba", user / "numba"]
    return [Path(base) for base in bases if base]


def cache_folder() -> str | None:
    """The folder of this source's compiled code, made if need be: the first of ``_bases``
    where it can be, only this user may write to it (numba's cache holds pickles, and the
    module built ahead of time is code, both run when loaded); the folders of older sources
    there are removed. None when no folder will do (numba's own choice then)."""
    name = source_digest()
    for base in _bases():
        folder = base / name
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not _own(folder) or not os.access(folder, os.W_OK):
                continue
            for older in base.iterdir():
                if older.name != name and _DIGEST.fullmatch(older.name) and _own(older):
                    shutil.rmtree(older, ignore_errors=True)
        except OSError:
            continue
        return str(folder)
    return None


def _own(folder: Path) -> bool:
    """True when ``folder`` is this user's and no one else may write to it."""
    status = folder.stat()
    return status.st_uid == os.geteuid() and not status.st_mode & 0o022


def module_file(folder: Path) -> Path:
    """The file of the module built ahead of time in the cache ``folder``."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return folder / "aot" / f"{PASSES_MODULE}{suffix}"


def switched_off() -> bool:
    """True when MISSTRIAGE_AOT=0: the passes built ahead of time are neither loaded nor
    built."""
    return os.environ.get("MISSTRIAGE_AOT", "1") == "0"


@cache
def load_passes() -> ModuleType | None:
    """The passes built ahead of time from this source (``compiled.ranks``' and the log
    pass's exports), or None (see the module). Set MISSTRIAGE_AOT=0 to leave it unused (the
    careful reader then reads every run, and numba compiles the log pass)."""
    if switched_off():
        return None
    name = source_digest()
    for base in _bases():
        folder = base / name
        path = module_file(folder)
        try:
            if not path.is_file() or not all(_own(p) for p in (folder, path.parent, path)):
                continue
        except OSError:
            continue
        spec = importlib.util.spec_from_file_location(PASSES_MODULE, path)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except ImportError:
            continue
        sys.modules.setdefault(PASSES_MODULE, module)
        return module
    return None


@contextmanager
def passes_unbuilt() -> Iterator[None]:
    """Within it, ``load_passes`` answers None (as MISSTRIAGE_AOT=0 makes it): the passes
    are numba's, compiled on first use (``warm`` compiles them so; tests try both)."""
    before = os.environ.get("MISSTRIAGE_AOT")
    os.environ["MISSTRIAGE_AOT"] = "0"
    load_passes.cache_clear()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MISSTRIAGE_AOT", None)
        else:
            os.environ["MISSTRIAGE_AOT"] = before
        load_passes.cache_clear()
