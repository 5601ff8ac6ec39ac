"""app.eval is pure: importing all of it pulls in no web, template or database code."""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = (
    "fastapi",
    "starlette",
    "sqlmodel",
    "sqlalchemy",
    "alembic",
    "jinja2",
    "uvicorn",
    "app.web",
    "app.api",
    "app.models",
    "app.services",
    "app.db",
    "app.cli",
)

PROBE = """
import json, pkgutil, importlib, sys
import app.eval
for module in pkgutil.walk_packages(app.eval.__path__, "app.eval."):
    importlib.import_module(module.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_eval_imports_no_web_or_db_code() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout
    loaded = json.loads(out)
    assert "app.eval.evaluate" in loaded
    offenders = [
        name for name in loaded if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    ]
    assert offenders == []
