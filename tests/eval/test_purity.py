"""app.eval is pure: it imports the standard library and a few libraries, nothing else.

The libraries: polars and PyStemmer; numpy, krippendorff and statsmodels for the agreement
between reviewers (app/eval/agreement.py); numba (and llvmlite, its code generator) for the
compiled passes over large logs and corpora (app/eval/compiled/); nanoarrow for a Parquet log's
ids, taken from polars' memory through the Arrow C stream interface (app/eval/log_parquet.py);
pyarrow for a Parquet log read with its ids' dictionaries (app/eval/log_dictionary.py).

An allow-list, read from the import graph (grimp, import-linter's engine): a new import of a
web, database or template library, or of any module of the app outside app.eval, fails here.
That app.eval imports nothing of the app is also the bottom of the layer contract
(pyproject.toml, tests/test_import_contracts.py).
"""

from __future__ import annotations

import sys

import grimp

ALLOWED_LIBRARIES = {
    "polars",
    "Stemmer",
    "numpy",
    "krippendorff",
    "statsmodels",
    "rensa",
    "numba",
    "llvmlite",
    "nanoarrow",
    "pyarrow",
}


def _imports_of_eval() -> set[str]:
    graph = grimp.build_graph("app", include_external_packages=True, cache_dir=None)
    return {
        imported
        for module in graph.find_descendants("app.eval") | {"app.eval"}
        for imported in graph.find_modules_directly_imported_by(module)
    }


def test_eval_imports_only_the_standard_library_and_the_allowed_libraries() -> None:
    imported = _imports_of_eval()
    assert "polars" in imported  # the graph saw the package's imports
    own = {name for name in imported if name == "app" or name.startswith("app.")}
    outside_eval = {name for name in own if not name.startswith("app.eval")}
    libraries = imported - own - set(sys.stdlib_module_names)
    assert outside_eval == set()
    assert libraries <= ALLOWED_LIBRARIES, libraries - ALLOWED_LIBRARIES
