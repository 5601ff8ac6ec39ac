"""docs/ci.md: its GitHub Actions and GitLab CI examples are valid against the schemas that
check-jsonschema vendors (offline: ``--builtin-schema``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "ci.md"
CHECK = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent))


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_two_yaml_blocks() -> None:
    assert len(_yaml_blocks()) == 2


@pytest.mark.parametrize(
    ("index", "schema"), [(0, "vendor.github-workflows"), (1, "vendor.gitlab-ci")]
)
def test_yaml_block_is_valid(tmp_path: Path, index: int, schema: str) -> None:
    if CHECK is None:
        # a dev dependency: absent only where the extras were not installed; never in CI
        if os.environ.get("CI"):
            pytest.fail("check-jsonschema is not installed in CI")
        pytest.skip("check-jsonschema is not installed")
    path = tmp_path / f"block{index}.yml"
    path.write_text(_yaml_blocks()[index])
    assert CHECK is not None
    done = subprocess.run(
        [CHECK, "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
