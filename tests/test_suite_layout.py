"""The suite's own layout: fixtures come from conftest.py files (pytest finds them), shared
plain helpers from tests/support/; no test module or conftest is imported by another module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports made absolute)."""
    package = ".".join(path.relative_to(TESTS.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def is_test_module(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return name.startswith("tests.") and (last.startswith("test_") or last == "conftest")


def test_no_module_imports_a_test_module_or_a_conftest() -> None:
    offenders = {
        f"{path.relative_to(TESTS.parent)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in imported_modules(path)
        if is_test_module(name)
    }
    assert not offenders, sorted(offenders)
    assert len(list(TESTS.rglob("test_*.py"))) > 50  # the walk saw the suite


def test_the_support_package_holds_no_tests_or_fixtures() -> None:
    for path in sorted((TESTS / "support").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                assert not node.name.startswith("test_"), f"{path.name}: {node.name}"
                decorators = [ast.unparse(d) for d in node.decorator_list]
                assert not any("fixture" in d for d in decorators), f"{path.name}: {node.name}"
