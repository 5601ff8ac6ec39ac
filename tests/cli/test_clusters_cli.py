"""``misstriage clusters``: a run's duplicate profile without judgments, in process."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from tests.support.cli import run_misstriage

DEMO = Path(__file__).resolve().parents[2] / "examples" / "helpcentre"


def _demo(*extra: str) -> list[str]:
    return [
        "clusters",
        "--run",
        str(DEMO / "runs" / "bm25.trec"),
        "--corpus",
        str(DEMO / "corpus.jsonl"),
        *extra,
    ]


def test_json_and_table_carry_the_same_figures() -> None:
    done = run_misstriage(
        *_demo("--format", "json", "--price-per-million", "3", "--queries-per-day", "10000")
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    depths = document["depths"]
    assert [d["k"] for d in depths] == [10, 20, 30, 40, 50]
    # every query of the run, judged or not: the demo's run answers 67 queries
    assert document["queries"] == 67
    assert document["token_estimate"].startswith("characters / 4")
    for d in depths:
        assert sum(d["histogram"].values()) == 67
        assert d["distinct_fraction"] == d["mean_distinct"] / d["k"]
        assert d["daily_price"] == d["prompt_tokens"] * 10000 * 3 / 1_000_000
    for before, after in itertools.pairwise(depths):
        step = (after["mean_distinct"] - before["mean_distinct"]) / (after["k"] - before["k"])
        assert after["marginal_per_slot"] == step
    table = run_misstriage(*_demo("--price-per-million", "3", "--queries-per-day", "10000"))
    assert table.returncode == 0, table.stderr
    rows = {
        int(cells[0]): cells
        for line in table.stdout.splitlines()
        if (cells := line.split()) and cells[0].isdigit()
    }
    assert sorted(rows) == [10, 20, 30, 40, 50]
    for d in depths:
        cells = rows[d["k"]]
        assert float(cells[1]) == round(d["mean_distinct"], 2)
        assert float(cells[2]) == round(d["distinct_fraction"], 3)
        assert float(cells[-1]) == round(d["daily_price"], 2)
    # both say what the figures rest on: the file's ids, as given, not calibrated
    said = document["detector_run"]
    assert (said["id"], said["source"], said["precision"]) == (None, "imported", None)
    assert said["sentence"].startswith("clusters from the cluster_id of corpus.jsonl (as given)")
    assert said["sentence"] in table.stdout


def test_chosen_ks_and_threshold() -> None:
    done = run_misstriage(*_demo("--k", "5,1", "--threshold", "1", "--format", "json"))
    assert done.returncode == 0, done.stderr
    first, second = json.loads(done.stdout)["depths"]
    assert (first["k"], second["k"]) == (1, 5)
    # at k=1 every query has exactly one cluster: all of them are at or below 1
    assert first["histogram"] == {"1": 67}
    assert first["share_at_or_below"] == 1.0


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    missing = run_misstriage(
        "clusters", "--run", str(tmp_path / "none.trec"), "--corpus", str(DEMO / "corpus.jsonl")
    )
    assert missing.returncode == 2
    assert "file not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad_k = run_misstriage(*_demo("--k", "ten"))
    assert bad_k.returncode == 2
    assert "--k" in bad_k.stderr


def test_prices_that_are_not_finite_are_usage_errors() -> None:
    for option in ("--price-per-million", "--queries-per-day"):
        for value in ("nan", "inf"):
            result = run_misstriage(*_demo(option, value))
            assert result.returncode == 2, (option, value, result.stdout)
            assert f"'{value}' is not a finite number" in result.stderr
