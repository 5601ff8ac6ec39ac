"""misstriage gate: exit codes, JSON shape, markdown, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import main

QRELS = "q1 0 a 1\nq1 0 b 1\nq2 0 c 1\n"
GOOD = "q1 Q0 a 1 3.0 t\nq1 Q0 b 2 2.0 t\nq2 Q0 c 1 1.0 t\n"
WORSE = "q1 Q0 a 1 3.0 t\nq2 Q0 x 1 1.0 t\n"


def _run(tmp_path: Path, base: str, new: str, *extra: str) -> tuple[int, str, str]:
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "b.trec").write_text(base)
    (tmp_path / "n.trec").write_text(new)
    (tmp_path / "queries.tsv").write_text("q1\tfirst | query\nq2\tsecond\n")
    args = ["gate", "--qrels", str(tmp_path / "q.txt"), "--baseline", str(tmp_path / "b.trec")]
    args += ["--run", str(tmp_path / "n.trec"), "--queries", str(tmp_path / "queries.tsv")]
    done = CliRunner().invoke(main, [*args, "--depth", "5", "--k", "2", *extra])
    return done.exit_code, done.stdout, done.stderr


def test_passes_and_json_shape(tmp_path: Path) -> None:
    code, out, _ = _run(tmp_path, WORSE, GOOD, "--format", "json", "--permutations", "200")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {
        "left", "entered", "measures", "permutations", "seed", "passed", "reasons",
        "depth", "k", "queries",
    }  # fmt: skip
    assert data["passed"] is True
    assert set(data["measures"]) == {"R@5", "nDCG@2"}
    assert set(data["measures"]["R@5"]) == {"before", "after", "delta", "p_value"}
    assert {(d["qid"], d["doc_id"]) for d in data["entered"]} == {("q1", "b"), ("q2", "c")}
    assert data["entered"][0]["text"] == "first | query"
    assert data["entered"][0]["rank_before"] is None


def test_fails_with_markdown(tmp_path: Path) -> None:
    code, out, _ = _run(tmp_path, GOOD, WORSE, "--format", "markdown", "--permutations", "200")
    assert code == 1
    assert "FAILED" in out
    assert "| measure | before | after | change | p |" in out
    assert "first \\| query" in out


def test_max_new_misses(tmp_path: Path) -> None:
    code, out, _ = _run(tmp_path, GOOD, GOOD, "--max-new-misses", "0")
    assert code == 0
    assert "PASSED" in out


def test_bad_file_names_file_and_line(tmp_path: Path) -> None:
    code, _, err = _run(tmp_path, GOOD, "q1 Q0 a 1 abc t\n")
    assert code == 2
    assert "n.trec, line 1" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_defaults_equal_the_cores() -> None:
    from app.cli import gate as cli
    from app.eval import conventions
    from app.eval import gate as core

    assert (cli.DEFAULT_DEPTH, cli.DEFAULT_K) == (conventions.DEFAULT_DEPTH, conventions.DEFAULT_K)
    assert (cli.DEFAULT_MAX_DROP, cli.DEFAULT_PERMUTATIONS, cli.DEFAULT_SEED) == (
        core.DEFAULT_MAX_DROP,
        core.DEFAULT_PERMUTATIONS,
        core.DEFAULT_SEED,
    )


def test_the_markdown_lists_fifty_documents_and_counts_the_rest(tmp_path: Path) -> None:
    """60 judged documents of one query leave the top 60: a pull-request comment shows the
    first 50 rows and says how many more there are; the JSON keeps all 60."""
    docs = [f"d{i:02d}" for i in range(60)]
    (tmp_path / "q.txt").write_text("".join(f"q1 0 {d} 1\n" for d in docs))
    (tmp_path / "b.trec").write_text(
        "".join(f"q1 Q0 {d} {i + 1} {100 - i} t\n" for i, d in enumerate(docs))
    )
    (tmp_path / "n.trec").write_text("q1 Q0 other 1 1.0 t\n")
    args = ["gate", "--qrels", str(tmp_path / "q.txt"), "--baseline", str(tmp_path / "b.trec")]
    args += ["--run", str(tmp_path / "n.trec"), "--depth", "60", "--k", "10"]
    args += ["--permutations", "50"]
    markdown = CliRunner().invoke(main, [*args, "--format", "markdown"])
    assert markdown.exit_code == 1
    lines = markdown.stdout.splitlines()
    start = lines.index("### Left the top 60: 60")
    rows = [line for line in lines[start:] if line.startswith("| `q1` |")]
    assert len(rows) == 50
    assert rows[0].startswith("| `q1` |  | `d00` | 1 | 1 → — |")
    assert "and 10 more" in lines[start:]
    data = json.loads(CliRunner().invoke(main, [*args, "--format", "json"]).stdout)
    assert [d["doc_id"] for d in data["left"]] == docs


GRADED = "q1 0 a 2\nq1 0 b 1\nq2 0 c 1\nq3 0 z 0\n"
# the rank column disagrees with the scores: trec_eval order puts b first, rank order a
RANKS = "q1 Q0 a 1 1.0 t\nq1 Q0 b 2 3.0 t\nq2 Q0 c 1 1.0 t\n"


def _measures(tmp_path: Path, *extra: str) -> dict[str, dict[str, float]]:
    (tmp_path / "g.txt").write_text(GRADED)
    (tmp_path / "r.trec").write_text(RANKS)
    args = ["gate", "--qrels", str(tmp_path / "g.txt"), "--baseline", str(tmp_path / "r.trec")]
    args += ["--run", str(tmp_path / "r.trec"), "--depth", "5", "--k", "1"]
    done = CliRunner().invoke(main, [*args, "--format", "json", "--permutations", "10", *extra])
    assert done.exit_code == 0, done.output
    return dict(json.loads(done.stdout)["measures"])


def test_the_gate_takes_the_evaluation_conventions(tmp_path: Path) -> None:
    """--gain, --order and --all-judged-queries change the gate's measures as they change
    evaluate's: hand-computed nDCG@1 for q1 (ideal a, grade 2) and q2 (c first: 1)."""
    # trec_eval order: b (grade 1) first. exp: (2^1-1)/(2^2-1) = 1/3; linear: 1/2
    exp = _measures(tmp_path)["nDCG@1"]["before"]
    assert exp == pytest.approx((1 / 3 + 1) / 2)
    linear = _measures(tmp_path, "--gain", "linear")["nDCG@1"]["before"]
    assert linear == pytest.approx((1 / 2 + 1) / 2)
    # rank order: a (grade 2) first, ideal
    assert _measures(tmp_path, "--order", "rank")["nDCG@1"]["before"] == pytest.approx(1.0)
    # q3 has judgments but no relevant document: averaged as 0 only with the switch
    assert _measures(tmp_path, "--all-judged-queries")["R@5"]["before"] == pytest.approx(2 / 3)
    assert _measures(tmp_path)["R@5"]["before"] == pytest.approx(1.0)
