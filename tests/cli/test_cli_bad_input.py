"""The command line as a user meets it with bad input: real processes, exit 2, one line
naming the file (and the line), never a traceback. Paths that do not exist, directories
where a file is expected, files that cannot be read, binary garbage; BEIR folders without the
requested split; values beyond a column. (The database matters little here: the hostile
catalogue runs the import commands on both.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli import Done, misstriage
from tests.support.hostile_cases import CORPUS, QRELS, QUERIES, RUN

#: A regular file that even root cannot read (reading it fails with EIO).
UNREADABLE = Path("/proc/self/mem")


def assert_one_line(done: Done, *words: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("misstriage: error: ")
    for word in words:
        assert word in line, line
    assert len(line) < 1024
    return line


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {}
    for kind, text in {"qrels": QRELS, "queries": QUERIES, "corpus": CORPUS, "run": RUN}.items():
        paths[kind] = tmp_path / f"good-{kind}"
        paths[kind].write_text(text)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes((i * 97 + 13) % 256 for i in range(4096)))
    paths["garbage"] = garbage
    paths["missing"] = tmp_path / "no-such-file.trec"
    paths["folder"] = tmp_path / "a-folder"
    paths["folder"].mkdir()
    # a named pipe no one writes to: an input is opened more than once, so a pipe is
    # refused at once (waiting on it would hang the command)
    paths["pipe"] = tmp_path / "a-pipe"
    os.mkfifo(paths["pipe"])
    return paths


BAD = [
    ("missing", "file not found"),
    ("folder", "not a file"),
    ("unreadable", "cannot be read"),
    ("garbage", "line 1"),
    ("pipe", "not a regular file (a pipe?)"),
]


def bad_path(files: dict[str, Path], kind: str) -> Path:
    return UNREADABLE if kind == "unreadable" else files[kind]


@pytest.mark.parametrize(("kind", "words"), BAD)
def test_evaluate(files: dict[str, Path], kind: str, words: str) -> None:
    bad = bad_path(files, kind)
    good = ["--qrels", files["qrels"], "--queries", files["queries"]]
    for args in (
        ["--qrels", bad, "--run", f"r={files['run']}"],
        [*good, "--run", f"r={bad}"],
        [*good, "--run", f"r={files['run']}", "--corpus", bad],
        [*good, "--run", f"r={bad}", "--run-format", "trec"],
    ):
        if kind == "folder" and args[1] == bad:
            continue  # a folder as --qrels is a BEIR folder: tested below
        assert_one_line(misstriage("evaluate", *args), bad.name, words)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_import_commands(files: dict[str, Path], database_url: str) -> None:
    done = misstriage(
        "import-golden-set", "--name", "g", "--qrels", files["qrels"], database_url=database_url
    )
    assert done.returncode == 0, done.stderr
    for kind, words in BAD:
        bad = bad_path(files, kind)
        attempts = [
            ["import-run", "--golden-set", "g", "--name", "r", "--run", bad],
            ["import-golden-set", "--name", "x", "--qrels", files["qrels"], "--corpus",
             files["corpus"], "--manifest", bad],
        ]  # fmt: skip
        if kind != "folder":
            attempts.append(["import-golden-set", "--name", "x", "--qrels", bad])
        for args in attempts:
            assert_one_line(misstriage(*args, database_url=database_url), bad.name, words)
    listed = misstriage(
        "import-golden-set", "--name", "g2", "--qrels", files["qrels"], database_url=database_url
    )
    assert listed.returncode == 0, "nothing was left half-written by the refusals"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_min_grade_beyond_its_column_is_refused(files: dict[str, Path], database_url: str) -> None:
    done = misstriage(
        "import-golden-set", "--name", "g", "--qrels", files["qrels"], "--min-grade", str(2**40),
        database_url=database_url,
    )  # fmt: skip
    assert_one_line(done, "min_grade")


def beir(folder: Path, splits: list[str]) -> Path:
    (folder / "qrels").mkdir(parents=True)
    for split in splits:
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\n")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n')
    return folder


def test_a_beir_folder_without_the_split_names_what_it_expected_and_found(
    tmp_path: Path, files: dict[str, Path]
) -> None:
    folder = beir(tmp_path / "beir", ["dev", "train"])
    done = misstriage("evaluate", "--qrels", folder, "--run", f"r={files['run']}")
    line = assert_one_line(done, "qrels/test.tsv", "found qrels/dev.tsv, qrels/train.tsv")
    assert str(folder) in line
    # one other split alone is not read in its place either
    single = beir(tmp_path / "single", ["dev"])
    done = misstriage("evaluate", "--qrels", single, "--run", f"r={files['run']}")
    assert_one_line(done, "no qrels/test.tsv", "found qrels/dev.tsv")
    # the split asked for is read
    asked = misstriage(
        "evaluate", "--qrels", folder, "--split", "dev", "--run", f"r={files['run']}"
    )
    assert asked.returncode == 0, asked.stderr


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_import_golden_set_refuses_a_beir_folder_without_the_split(
    tmp_path: Path, database_url: str
) -> None:
    folder = beir(tmp_path / "beir", ["train"])
    done = misstriage(
        "import-golden-set", "--name", "g", "--qrels", folder, database_url=database_url
    )
    assert_one_line(done, "no qrels/test.tsv", "found qrels/train.tsv")
    done = misstriage(
        "import-golden-set", "--name", "g", "--qrels", folder, "--split", "train",
        database_url=database_url,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_every_input_that_is_a_pipe_is_refused_at_once(
    files: dict[str, Path], database_url: str
) -> None:
    """An input is opened more than once (its first bytes, its digest, its lines): a named
    pipe would keep a command waiting for a writer, or lose what it read first. Refused,
    naming it, by every command that reads one."""
    pipe = files["pipe"]
    good = ["--qrels", files["qrels"], "--queries", files["queries"]]
    imported = misstriage("import-golden-set", "--name", "g", *good, database_url=database_url)
    assert imported.returncode == 0, imported.stderr
    for args in (
        ["gate", "--qrels", files["qrels"], "--baseline", pipe, "--run", files["run"]],
        ["gate", "--qrels", files["qrels"], "--baseline", files["run"], "--run", pipe],
        ["clusters", "--run", pipe, "--corpus", files["corpus"]],
        ["clusters", "--run", files["run"], "--corpus", pipe],
        ["dedup", "--corpus", pipe, "--out", files["qrels"].parent / "out.jsonl"],
        ["import-run", "--golden-set", "g", "--name", "r", "--run", pipe, "--log"],
        ["import-run", "--golden-set", "g", "--name", "r", "--run", pipe, "--log",
         "--run-format", "cluster_profile"],
        ["import-golden-set", "--name", "x", "--qrels", files["qrels"], "--queries", pipe],
        ["import-golden-set", "--name", "x", "--qrels", files["qrels"], "--corpus", pipe],
    ):  # fmt: skip
        assert_one_line(misstriage(*args, database_url=database_url), "a-pipe", "not a regular")
