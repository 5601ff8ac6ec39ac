"""``misstriage evaluate`` as a user runs it: a real process, its output, its exit status."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from app.cli import evaluate as evaluate_command
from app.eval.textio import DecompressionLimit
from tests.support.cli import evaluate_cli as cli
from tests.support.cli import run_misstriage
from tests.support.service import WriteFile

QRELS = "q1 0 a 2\nq1 0 b 1\nq2 0 c 1\nq3 0 z 0\n"
QUERIES = '{"_id": "q1", "text": "rate limits"}\n{"_id": "q2", "text": "sso login"}\n'
# good: a at 1, b at 3, c at 2; weak: b at 1, a at 12 (outside depth 10), c not retrieved.
GOOD = "q1 Q0 a 1 9 t\nq1 Q0 x 2 8 t\nq1 Q0 b 3 7 t\nq2 Q0 y 1 5 t\nq2 Q0 c 2 4 t\n"
WEAK = "q1 Q0 b 1 20 t\n" + "".join(f"q1 Q0 n{i} {i + 1} {19 - i} t\n" for i in range(10))
WEAK += "q1 Q0 a 12 1 t\nq2 Q0 y 1 5 t\nq9 Q0 c 1 1 t\n"


@pytest.fixture
def inputs(write_file: WriteFile) -> dict[str, Path]:
    return {
        "qrels": write_file("qrels.txt", QRELS),
        "queries": write_file("queries.jsonl", QUERIES),
        "good": write_file("good.trec", GOOD),
        "weak": write_file("weak.trec.gz", WEAK, gz=True),
    }


def base(inputs: dict[str, Path]) -> list[str | Path]:
    return [
        "evaluate",
        "--qrels",
        inputs["qrels"],
        "--queries",
        inputs["queries"],
        "--run",
        f"good={inputs['good']}",
        "--run",
        f"weak={inputs['weak']}",
        "--k",
        "2",
        "--depth",
        "10",
    ]


def test_table_has_one_row_per_run(inputs: dict[str, Path]) -> None:
    result = cli(*base(inputs))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["run", "R@2", "R@10", "nDCG@2", "micro", "R@10", "misses@10"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:4]}
    # good: q1 has a@1, b@3 -> R@2 = 1/2, R@10 = 1; q2 has c@2 -> 1, 1.
    assert rows["good"][:2] == ["0.7500", "1.0000"]
    assert rows["good"][4] == "0/3"
    # weak: q1 has b@1 (R@2 = 1/2) and a@12; q2's c is not retrieved: R@10 = (1/2 + 0) / 2.
    assert rows["weak"][:2] == ["0.2500", "0.2500"]
    assert rows["weak"][3:] == ["0.3333", "2/3"]
    assert "1 run query is not in the golden set (1 line ignored)" in result.stdout
    assert "1 judged query has no document with grade >= 1: not averaged" in result.stderr


def test_json_output_schema(inputs: dict[str, Path]) -> None:
    result = cli(*base(inputs), "--format", "json", "--per-query", "--gain", "linear")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) >= {"misstriage", "k", "depth", "depths", "conventions", "golden_set", "runs"}
    assert doc["conventions"]["gain"] == "linear"
    assert doc["conventions"]["order"] == "trec_eval"
    assert doc["conventions"]["ideal"] == "strict"
    assert doc["golden_set"]["report"]["evaluated_queries"] == 2
    good, weak = doc["runs"]
    assert set(good) >= {
        "name",
        "measures",
        "micro",
        "depth_curve",
        "misses",
        "report",
        "per_query",
    }
    assert good["measures"]["R@2"] == 0.75
    assert weak["report"]["unknown_queries"] == 1
    assert weak["report"]["format"] == "trec"
    assert list(weak["depth_curve"]) == ["2", "10", "20", "50", "100", "200", "1000"]
    assert [row["qid"] for row in weak["per_query"]] == ["q1", "q2"]
    assert weak["per_query"][1]["text"] == "sso login"
    assert weak["per_query"][1]["nDCG_cand@2"] is None
    assert weak["per_query"][1]["diagnosis"] == "ingestion"
    assert weak["per_query"][1]["reason"].endswith(
        "; a guess: no index manifest or corpus says whether the misses are indexed"
    )
    assert weak["diagnosis_evidence"] is False


def test_corpus_is_the_evidence_of_the_diagnosis(
    inputs: dict[str, Path], write_file: WriteFile
) -> None:
    # The corpus holds a and b, not c: weak's q1 misses a (rank 12, in the index) with b first
    # among its candidates; q2's c is neither retrieved nor in the index.
    corpus = write_file(
        "corpus.jsonl",
        '{"_id": "a", "title": "", "text": "rate limits"}\n'
        '{"_id": "b", "title": "", "text": "throttling"}\n',
    )
    result = cli(*base(inputs), "--corpus", corpus, "--format", "json", "--per-query")
    assert result.returncode == 0, result.stderr
    weak = json.loads(result.stdout)["runs"][1]
    assert weak["diagnosis_evidence"] is True
    q1, q2 = weak["per_query"]
    assert q1["diagnosis"] == "candidate_generation"
    assert q1["reason"] == ("R@10 0.50 < 0.8 and nDCG_cand@2 1.00 ≥ 0.5; 1 of 1 miss in the index")
    assert q2["diagnosis"] == "ingestion"
    assert q2["reason"] == (
        "R@10 0.00 < 0.8 and nDCG_cand@2 undefined (no relevant document in the top 10); "
        "1 of 1 miss not in the index"
    )


def test_an_index_manifest_is_the_evidence_instead_of_the_corpus(
    inputs: dict[str, Path], write_file: WriteFile
) -> None:
    # The corpus describes a, b and c; the index (its manifest) holds a and b only: q2's c is
    # in the corpus and still not indexed, so weak's q2 is ingestion by the manifest alone.
    corpus = write_file(
        "corpus.jsonl",
        '{"_id": "a", "title": "", "text": "rate limits"}\n'
        '{"_id": "b", "title": "", "text": "throttling"}\n'
        '{"_id": "c", "title": "", "text": "sso"}\n',
    )
    manifest = write_file("manifest.txt", "# the index\na\nb\n")
    by_corpus = cli(*base(inputs), "--corpus", corpus, "--format", "json", "--per-query")
    by_manifest = cli(
        *base(inputs), "--corpus", corpus, "--manifest", manifest, "--format", "json", "--per-query"
    )
    assert by_corpus.returncode == by_manifest.returncode == 0, by_manifest.stderr
    q2_corpus = json.loads(by_corpus.stdout)["runs"][1]["per_query"][1]
    q2_manifest = json.loads(by_manifest.stdout)["runs"][1]["per_query"][1]
    assert q2_corpus["diagnosis"] == "candidate_generation"  # c is in the corpus
    assert q2_manifest["diagnosis"] == "ingestion"
    assert q2_manifest["reason"].endswith("1 of 1 miss not in the index")
    # A manifest alone (no corpus) is evidence too.
    alone = cli(*base(inputs), "--manifest", manifest, "--format", "json", "--per-query")
    assert json.loads(alone.stdout)["runs"][1]["per_query"][1]["diagnosis"] == "ingestion"


def test_cost_ms_prints_the_cost_beside_the_depth_curve(inputs: dict[str, Path]) -> None:
    result = cli(*base(inputs), "--depths", "2,10", "--cost-ms", "3.1")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    advisor = text[text.index("depth advisor") :].splitlines()
    good = advisor[advisor.index("run good:") + 3 : advisor.index("run good:") + 5]
    # good: R@2 = 0.75, R@10 = 1 at 2 x 3.1 = 6.2 and 10 x 3.1 = 31 ms.
    assert good[0].split() == ["2", "0.7500", "6.2", "-"]
    assert good[1].split()[:3] == ["10", "1.0000", "31"]
    assert good[1].endswith("depth 10 buys +0.250 R for +24.8 ms per query")
    # weak: R@2 = R@10 = 0.25 (a is at 12): the step buys nothing, depth stops paying at 2.
    assert "depth 10 buys nothing for +24.8 ms per query" in text
    assert "depth stops paying at 2: R@2 = 0.250" in text
    assert "depth still pays at 10" in text


def test_cost_block_in_json_only_with_cost_ms(inputs: dict[str, Path]) -> None:
    plain = json.loads(cli(*base(inputs), "--format", "json").stdout)
    assert "cost" not in plain["runs"][0]
    result = cli(*base(inputs), "--format", "json", "--depths", "2,10", "--cost-ms", "3.1")
    assert result.returncode == 0, result.stderr
    good, weak = json.loads(result.stdout)["runs"]
    assert good["cost"]["cost_per_candidate_ms"] == 3.1
    assert good["cost"]["tolerance"] == 0.01
    assert [(r["depth"], r["recall"]) for r in good["cost"]["per_depth"]] == [(2, 0.75), (10, 1.0)]
    assert [r["cost_ms"] for r in good["cost"]["per_depth"]] == pytest.approx([6.2, 31.0])
    assert good["cost"]["per_depth"][0]["gain_per_ms"] is None
    assert good["cost"]["per_depth"][1]["gain_per_ms"] == pytest.approx(0.25 / 24.8)
    assert good["cost"]["advised_depth"] == 10
    assert weak["cost"]["advised_depth"] == 2
    assert weak["cost"]["steps"] == ["depth 10 buys nothing for +24.8 ms per query"]


def test_csv_output(inputs: dict[str, Path]) -> None:
    result = cli(*base(inputs), "--format", "csv")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["run"] for r in rows] == ["good", "weak"]
    assert float(rows[1]["micro R@10"]) == pytest.approx(1 / 3)
    assert rows[1]["misses@10"] == "2"


def test_misses_out(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "misses.csv"
    assert cli(*base(inputs), "--misses-out", out).returncode == 0
    rows = list(csv.DictReader(out.open()))
    assert [(r["run"], r["qid"], r["doc_id"], r["grade"], r["rank"]) for r in rows] == [
        ("weak", "q1", "a", "2", "12"),
        ("weak", "q2", "c", "1", ""),
    ]
    jsonl = tmp_path / "misses.jsonl"
    assert cli(*base(inputs), "--misses-out", jsonl).returncode == 0
    first = json.loads(jsonl.read_text().splitlines()[0])
    assert first == {
        "run": "weak",
        "qid": "q1",
        "doc_id": "a",
        "grade": 2,
        "rank": 12,
        "query": "rate limits",
    }


def test_fail_under(inputs: dict[str, Path]) -> None:
    below = cli(*base(inputs), "--fail-under", "R@10=0.5")
    assert below.returncode == 1
    assert "weak: R@10 = 0.2500 is below 0.5" in below.stderr
    assert "good" not in below.stderr
    assert cli(*base(inputs), "--fail-under", "R@10=0.25,nDCG@2=0.1").returncode == 0
    # A recall cutoff outside the curve is computed for the check.
    assert cli(*base(inputs), "--fail-under", "R@3=0.9").returncode == 1


@pytest.mark.parametrize(
    "option",
    [
        ["--fail-under", "R@10"],
        ["--fail-under", "P@10=0.5"],
        ["--fail-under", "R@10=2"],
        ["--fail-under", "nDCG@5=0.5"],
        ["--depths", "ten"],
        ["--k", "0"],
        ["--order", "score"],
        ["--cost-ms", "-1"],
        ["--cost-ms", "3.1", "--tolerance", "2"],
    ],
)
def test_bad_options_exit_2(inputs: dict[str, Path], option: list[str]) -> None:
    result = cli(*base(inputs), *option)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_bad_input_is_one_clear_line(inputs: dict[str, Path], write_file: WriteFile) -> None:
    bad = write_file("bad.trec", GOOD + "q2 Q0 d 3 high t\n")
    result = cli("evaluate", "--qrels", inputs["qrels"], "--run", f"bad={bad}")
    assert result.returncode == 2
    assert (
        result.stderr.strip() == f"misstriage: error: {bad}, line 6: score 'high' is not a number"
    )
    assert result.stdout == ""


def test_missing_file_exit_2(inputs: dict[str, Path], tmp_path: Path) -> None:
    result = cli("evaluate", "--qrels", inputs["qrels"], "--run", f"x={tmp_path / 'nope.trec'}")
    assert result.returncode == 2
    assert result.stderr.strip() == f"misstriage: error: {tmp_path / 'nope.trec'}: file not found"


def test_scifact_table_matches_readme(scifact: Path) -> None:
    args = ["evaluate", "--qrels", scifact]
    for name in ("bm25", "dense", "hybrid"):
        args += ["--run", f"{name}={scifact / 'runs' / f'{name}.trec'}"]
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()[2:5]}
    assert rows == {
        "bm25": ["0.8180", "0.8852", "0.6860", "0.8850", "39/339"],
        "dense": ["0.7833", "0.8920", "0.6451", "0.8938", "36/339"],
        "hybrid": ["0.8509", "0.9377", "0.7182", "0.9410", "20/339"],
    }


@pytest.mark.parametrize(
    "option", ["--cost-ms", "--tolerance", "--recall-threshold", "--ndcg-threshold"]
)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_a_number_that_is_not_finite_is_a_usage_error(
    inputs: dict[str, Path], option: str, value: str
) -> None:
    extra = ["--cost-ms", "3.1"] if option == "--tolerance" else []
    result = cli(*base(inputs), *extra, option, value)
    assert result.returncode == 2, result.stdout
    assert option in result.stderr
    assert "Traceback" not in result.stderr


def test_the_decompression_limit_of_the_settings_applies_to_a_gzip_run(
    inputs: dict[str, Path], write_file: WriteFile
) -> None:
    """The limit is looked up only when a gzip file is read, and it is still the setting's."""
    big = write_file("big.trec.gz", GOOD * 20_000, gz=True)  # 1.6 MB in a few kilobytes
    args = ["evaluate", "--qrels", inputs["qrels"], "--run", f"big={big}"]
    limited = run_misstriage(*args, env={"MISSTRIAGE_DECOMPRESSED_MAX_BYTES": "100000"})
    assert limited.returncode == 2
    assert "decompression bomb" in limited.stderr
    assert "MISSTRIAGE_DECOMPRESSED_MAX_BYTES" in limited.stderr
    assert cli(*args).returncode == 0


def test_the_limit_is_looked_up_only_for_a_gzip_file(
    inputs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading the service's settings costs more than reading a small run: plain files never
    pay for it."""
    looked_up: list[DecompressionLimit] = []

    def tracked() -> DecompressionLimit:
        looked_up.append(DecompressionLimit())
        return looked_up[-1]

    monkeypatch.setattr(evaluate_command, "_decompression_limit", tracked)
    plain = cli("evaluate", "--qrels", inputs["qrels"], "--run", f"good={inputs['good']}")
    assert plain.returncode == 0, plain.stderr
    assert looked_up == []
    gzipped = cli("evaluate", "--qrels", inputs["qrels"], "--run", f"weak={inputs['weak']}")
    assert gzipped.returncode == 0, gzipped.stderr
    assert len(looked_up) == 1
