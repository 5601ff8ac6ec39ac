"""The triage, review and progress pages are a thin face: their handlers and helpers are typed
(no ``Any`` slips past mypy's strict mode) and they read through services, never the tables."""

from __future__ import annotations

import inspect
import typing
from types import ModuleType
from typing import Any

import pytest

from app.web import progress, review, triage

MODULES = (triage, review, progress)


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
