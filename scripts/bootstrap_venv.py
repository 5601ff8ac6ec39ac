"""Create a virtual environment with pip, even where Debian's python3-venv is not installed.

``python3 -m venv`` needs ensurepip, which Debian ships separately (python3-venv). Without it,
this creates the environment without pip and installs pip from its wheel on PyPI, checked
against the sha256 PyPI publishes. Standard library only; run with the system python3.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import venv
from pathlib import Path

MINIMUM = (3, 11)
PIP_JSON = "https://pypi.org/pypi/pip/json"


def has_pip(python: Path) -> bool:
    return subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0


def install_pip(python: Path) -> None:
    with urllib.request.urlopen(PIP_JSON, timeout=60) as response:
        release = json.load(response)
    wheel = next(f for f in release["urls"] if f["filename"].endswith(".whl"))
    url = urllib.parse.urljoin(PIP_JSON, wheel["url"])  # mirrors answer with relative links
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / wheel["filename"]
        with urllib.request.urlopen(url, timeout=120) as response:
            data = response.read()
        if hashlib.sha256(data).hexdigest() != wheel["digests"]["sha256"]:
            raise SystemExit("bootstrap: the pip wheel does not match PyPI's sha256")
        target.write_bytes(data)
        # A wheel is importable: run pip from it to install itself.
        subprocess.run(
            [python, f"{target}/pip", "install", "--quiet", "--no-index", str(target)], check=True
        )


def main() -> None:
    if sys.version_info < MINIMUM:
        raise SystemExit(
            f"bootstrap: Python {'.'.join(map(str, MINIMUM))} or newer is needed, "
            f"this is {sys.version.split()[0]}"
        )
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".venv")
    python = target / "bin" / "python"
    if not python.exists():
        try:
            venv.EnvBuilder(with_pip=True).create(target)
        except (subprocess.CalledProcessError, OSError):
            venv.EnvBuilder(with_pip=False, clear=True).create(target)
    if not has_pip(python):
        install_pip(python)


if __name__ == "__main__":
    main()
