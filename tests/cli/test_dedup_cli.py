"""``misstriage dedup``: a corpus in, the same corpus out with ``cluster_id`` on every
document that has a copy; the clusters, pairs, parameters and time printed (a table, or JSON
with every cluster and verified pair); bad input is one line naming the file, exit 2, and
leaves no output file behind."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from app.cli.dedup import dedup
from tests.support.dupe_corpus import make_corpus, pair_quality


def write_corpus(path: Path, docs: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def test_dedup_writes_the_clusters_and_reports_them(tmp_path: Path) -> None:
    made = make_corpus(300, seed=3)
    for doc in made.docs:  # a field of the user's is kept as it was
        doc["source"] = "wiki"
    corpus = write_corpus(tmp_path / "corpus.jsonl", made.docs)
    out = tmp_path / "clustered.jsonl"
    answer = CliRunner().invoke(
        dedup, ["--corpus", str(tmp_path), "--out", str(out), "--format", "json"]
    )
    assert answer.exit_code == 0, answer.output
    document = json.loads(answer.output)
    assert document["corpus"] == str(corpus)
    assert document["parameters"]["threshold"] == 0.8
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [d["_id"] for d in written] == [d["_id"] for d in made.docs]
    assert all(d["source"] == "wiki" and d["title"] for d in written)
    cluster_of = {d["_id"]: d["cluster_id"] for d in written if "cluster_id" in d}
    # the ids written are the clusters reported, and they find the generated copies
    members = {doc: cid for cid, docs in document["cluster_members"].items() for doc in docs}
    assert cluster_of == members
    assert document["clusters"] == len(set(cluster_of.values())) > 0
    quality = pair_quality(made.truth, document["cluster_members"])
    assert quality["precision"] >= 0.99, quality
    assert quality["recall"] >= 0.95, quality
    above = [p for p in document["pairs"] if p["similarity"] >= 0.8]
    assert len(above) == document["pairs_at_threshold"]
    # every band counted once: the bands add up to the pairs kept
    assert sum(b["pairs"] for b in document["bands"]) == len(document["pairs"])


def test_the_table_names_parameters_counts_and_time(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", make_corpus(120, seed=5).docs)
    out = tmp_path / "out.jsonl"
    answer = CliRunner().invoke(
        dedup, ["--corpus", str(corpus), "--out", str(out), "--threshold", "0.7"]
    )
    assert answer.exit_code == 0, answer.output
    heads = [line.split(maxsplit=1)[0] for line in answer.output.splitlines()[:5]]
    assert heads == ["corpus", "parameters", "found", "wrote", "time"]
    assert "Jaccard >= 0.7 over normalised word 5-shingles" in answer.output
    assert "every candidate verified exactly" in answer.output


def test_bad_input_names_the_file_and_writes_nothing(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "a", "text": "one two"}\n{"_id": \n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    answer = CliRunner().invoke(dedup, ["--corpus", str(corpus), "--out", str(out)])
    assert answer.exit_code == 2
    assert str(corpus) in answer.output
    assert "line 2" in answer.output
    assert "Traceback" not in answer.output
    assert list(tmp_path.iterdir()) == [corpus]


def test_out_may_not_overwrite_the_corpus(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", [{"_id": "a", "text": "one two three"}])
    before = corpus.read_bytes()
    answer = CliRunner().invoke(dedup, ["--corpus", str(corpus), "--out", str(corpus)])
    assert answer.exit_code == 2
    assert "must not be the corpus" in answer.output
    assert corpus.read_bytes() == before


def test_a_threshold_outside_zero_to_one_is_a_usage_error(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", [{"_id": "a", "text": "one two three"}])
    for bad in ("0", "1.5", "nan"):
        answer = CliRunner().invoke(
            dedup, ["--corpus", str(corpus), "--out", str(tmp_path / "o"), "--threshold", bad]
        )
        assert answer.exit_code == 2, bad
        assert "--threshold" in answer.output, bad
