"""The layers are enforced: each import-linter contract in pyproject.toml holds, and the faces
(app.web, app.api) import no table and build no query.

`make lint` runs the same contracts (lint-imports); these tests make `pytest` alone fail too.
import-linter sees modules, not names: the read models live beside the tables in app.models, so
whether a face imports a table is read here from the names it imports.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from importlinter.api import read_configuration
from sqlmodel import SQLModel

import app.api
import app.web

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
#: The console script installed next to the interpreter (``pip install -e '.[dev]'``).
LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))
CONTRACTS = [c["id"] for c in read_configuration(str(PYPROJECT))["contracts_options"]]
FACES = (app.web, app.api)
#: What a face may take from the database libraries: the session its handlers are given.
QUERY_FREE = {"Session"}

#: Tables and query builders a face may still import, as (module, name): none (an entry that
#: is no longer needed fails, so the list only shrinks).
NOT_YET: set[tuple[str, str]] = set()


def test_the_contracts_are_found() -> None:
    assert "layers" in CONTRACTS


@pytest.mark.parametrize("contract", CONTRACTS)
def test_contract_is_kept(contract: str) -> None:
    # In a process of its own: import-linter configures logging as it runs, which in this
    # process would disable the app's loggers for every later test.
    done = subprocess.run(
        [LINT_IMPORTS, str(PYPROJECT), "--contract", contract, "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"import contract {contract!r} is broken:\n{done.stdout}"


def _face_modules() -> list[tuple[str, Path]]:
    found = []
    for face in FACES:
        found.append((face.__name__, Path(str(face.__file__))))
        for info in pkgutil.walk_packages(face.__path__, face.__name__ + "."):
            spec = importlib.util.find_spec(info.name)
            assert spec is not None
            assert spec.origin is not None
            found.append((info.name, Path(spec.origin)))
    return found


def _is_table(module: str, name: str) -> bool:
    value = getattr(importlib.import_module(module), name, None)
    return isinstance(value, type) and issubclass(value, SQLModel) and hasattr(value, "__table__")


def _reach_through() -> set[tuple[str, str]]:
    """(face module, name) for each table it imports from app.models and each query builder
    it imports from sqlmodel or sqlalchemy; a whole module imported counts by its name."""
    found: set[tuple[str, str]] = set()
    for module, path in _face_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {
                    (module, alias.name)
                    for alias in node.names
                    if alias.name.split(".")[0] in ("sqlmodel", "sqlalchemy")
                    or alias.name.startswith("app.models")
                }
            elif isinstance(node, ast.ImportFrom) and node.module:
                source = node.module
                if source == "app" and any(a.name == "models" for a in node.names):
                    found.add((module, "app.models"))
                elif source.split(".")[0] in ("sqlmodel", "sqlalchemy"):
                    found |= {(module, a.name) for a in node.names if a.name not in QUERY_FREE}
                elif source.startswith("app.models"):
                    found |= {(module, a.name) for a in node.names if _is_table(source, a.name)}
    return found


def test_the_faces_import_no_table_and_build_no_query() -> None:
    found = _reach_through()
    assert len(_face_modules()) > 10  # the walk saw the faces
    # A face asks a service (which answers a read model); it reads no table itself.
    assert found - NOT_YET == set()
    assert NOT_YET - found == set(), "gone: delete these entries from NOT_YET"
