"""The layers are enforced: each import-linter contract in pyproject.toml holds.

`make lint` runs the same contracts (lint-imports); this test makes `pytest` alone fail too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from importlinter.api import read_configuration
from importlinter.cli import lint_imports

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
CONTRACTS = [c["id"] for c in read_configuration(str(PYPROJECT))["contracts_options"]]


def test_the_contracts_are_found() -> None:
    assert {"layers", "faces-no-tables"} <= set(CONTRACTS)


@pytest.mark.parametrize("contract", CONTRACTS)
def test_contract_is_kept(contract: str) -> None:
    # The broken imports are printed (pytest shows them with the failure).
    status = lint_imports(
        config_filename=str(PYPROJECT),
        limit_to_contracts=(contract,),
        no_cache=True,
        no_logo=True,
    )
    assert status == 0, f"import contract {contract!r} is broken: see the output above"
