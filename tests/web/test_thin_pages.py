"""The pages are a thin face: every handler and helper in app/web is typed (no ``Any`` slips
past mypy's strict mode) and reads through services, never the tables."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from types import ModuleType
from typing import Any

import pytest

import app.web

MODULES = tuple(
    importlib.import_module(info.name)
    for info in pkgutil.iter_modules(app.web.__path__, prefix="app.web.")
)


def _functions(module: ModuleType) -> list[Any]:
    return [
        f
        for _, f in inspect.getmembers(module, inspect.isfunction)
        if f.__module__ == module.__name__
    ]


def _mentions_any(hint: object) -> bool:
    if hint is Any:
        return True
    return any(_mentions_any(arg) for arg in typing.get_args(hint))


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__ for m in MODULES])
def test_no_any_in_handlers_and_helpers(module: ModuleType) -> None:
    untyped = [
        f"{f.__name__}({name})"
        for f in _functions(module)
        for name, hint in typing.get_type_hints(f, vars(module)).items()
        if _mentions_any(hint)
    ]
    assert untyped == []


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__ for m in MODULES])
def test_pages_read_through_services(module: ModuleType) -> None:
    source = inspect.getsource(module)
    for reach in ("session.get(", "session.exec(", "select(", "from sqlmodel import col"):
        assert reach not in source, f"{module.__name__} reaches past the services: {reach}"
