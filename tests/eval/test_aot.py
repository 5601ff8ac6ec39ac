"""The pass built ahead of time (app.eval.aot) is loaded only from this source's folder, one
only its user may write to, and never when switched off; loading it loads no numba."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.eval import aot


@pytest.fixture
def built() -> Path:
    """The module ``make install`` built (``cluster_stream.warm``); in CI its absence fails."""
    aot.load_passes.cache_clear()
    module = aot.load_passes()
    aot.load_passes.cache_clear()
    if module is None or module.__file__ is None:
        message = "the passes are not built ahead of time: make install (app.eval.aot)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return Path(module.__file__)


def _placed(built: Path, base: Path, digest: str, mode: int) -> Path:
    folder = base / digest
    (folder / "aot").mkdir(parents=True)
    shutil.copy2(built, folder / "aot" / built.name)
    folder.chmod(mode)
    return folder


@pytest.mark.parametrize(
    ("digest", "mode", "loads"),
    [
        ("this source", 0o700, True),
        ("this source", 0o777, False),  # another user could have put code there
        ("0123456789abcdef", 0o700, False),  # built from another source
    ],
)
def test_the_module_is_loaded_from_its_own_folder_only(
    built: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    digest: str,
    mode: int,
    loads: bool,
) -> None:
    name = aot.source_digest() if digest == "this source" else digest
    _placed(built, tmp_path, name, mode)
    monkeypatch.setattr(aot, "_bases", lambda: [tmp_path])
    aot.load_passes.cache_clear()
    try:
        module = aot.load_passes()
        assert (module is not None) is loads
        if module is not None:
            assert Path(str(module.__file__)).is_relative_to(tmp_path)
            assert callable(module.rank_block)
    finally:
        aot.load_passes.cache_clear()


def test_switched_off(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISSTRIAGE_AOT", "0")
    aot.load_passes.cache_clear()
    try:
        assert aot.load_passes() is None
    finally:
        aot.load_passes.cache_clear()


def test_loading_it_loads_no_numba(built: Path) -> None:
    """The point of building ahead of time: evaluate starts without numba."""
    code = (
        "import sys; from app.eval.aot import load_passes; "
        "assert load_passes() is not None; print('numba' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "False"


def test_a_pass_that_cannot_be_built_leaves_runs_to_the_careful_reader(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """No C compiler (numba's AOT compiler needs one): ``make install`` goes on, and says so."""
    from app.eval import ranks_fast
    from app.eval.compiled import aot_build

    def no_compiler() -> Path:
        raise OSError("gcc: command not found")

    monkeypatch.setattr(aot_build, "build", no_compiler)
    monkeypatch.setattr(aot, "_bases", lambda: [tmp_path])  # where nothing is built
    monkeypatch.delenv("MISSTRIAGE_AOT", raising=False)
    aot.load_passes.cache_clear()
    try:
        with caplog.at_level("WARNING"):
            ranks_fast.build_ahead()
    finally:
        aot.load_passes.cache_clear()
    assert "not built (OSError: gcc: command not found)" in caplog.text


def test_switched_off_nothing_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """MISSTRIAGE_AOT=0: the passes are neither loaded nor built."""
    from app.eval import ranks_fast
    from app.eval.compiled import aot_build

    def build() -> Path:
        raise AssertionError("built while switched off")

    monkeypatch.setattr(aot_build, "build", build)
    monkeypatch.setenv("MISSTRIAGE_AOT", "0")
    aot.load_passes.cache_clear()
    try:
        assert aot.load_passes() is None
        ranks_fast.build_ahead()
    finally:
        aot.load_passes.cache_clear()
