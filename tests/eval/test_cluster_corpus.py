"""The compiled pass over a corpus (app.eval.compiled.corpus, run by app.eval.cluster_corpus)
gives the careful reader's frame, or declines the file.

The reference is the careful reader (``app.eval.jsonl.read_corpus``, as ``_careful`` uses it).
A generated corpus holds every edge the pass decides something about: titles and texts with
every JSON escape (``\\uXXXX`` of BMP characters, surrogate pairs, which Python counts as one
character), raw UTF-8, empty or missing titles and texts; ids as strings and integers; cluster
ids null, missing, strings and integers; parent ids and chunk indexes; other members of every
scalar kind; blanks around every token, CRLF, blank lines, a byte-order mark, gzip, blocks a
few lines long (a line cut across two). Lines the pass must decline (bad input, or input it is
not sure to read the same way) each go into an otherwise usual corpus: the result is still the
careful reader's, its frame or its error. A property test (hypothesis) writes random titles and
texts (control characters, lone surrogates, non-ASCII) as ``json.dumps`` does. The pass
refuses a line at the length the careful reader refuses it (``textio.MAX_LINE_BYTES``).
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from app.eval import cluster_corpus, textio
from app.eval.cluster_corpus import _careful, read_cluster_corpus, read_compiled
from app.eval.cluster_profile import CORPUS_SCHEMA, ClusterCorpus
from app.eval.errors import InputError
from app.eval.jsonl import read_corpus

CAREFUL = 1 << 40  # a ``compiled_from`` no file reaches: the careful reader alone
BOM = b"\xef\xbb\xbf"

#: bodies of JSON strings (as the file holds them) a title or a text may be
STRINGS = [
    "",
    "plain words",
    "line\\nbreak",
    'say \\"hi\\"',
    "back\\\\slash",
    "a\\/b",
    "tab\\there \\b\\f\\r",
    "\\u00e9t\\u00C9 \\u4e2d\\u6587",
    "\\ud83d\\ude00 smile",
    "\\uD83D\\uDE00\\ud800\\udc00\\udbff\\udfff",
    "caf\u00e9 \u4e2d\u6587 \U0001f600",
    "mixed \u00e9\\u00e9\U0001f600\\ud83d\\ude00",
    "\\u0001 an escaped control, a raw DEL \x7f, \\u007f",
    "\u2028 separators \\u2029 \u0085",
    '{[looks like JSON]}: 1, \\"x\\", null',
    "  spaced  ",
]
#: other members (not read): every scalar JSON has, some Python reads oddly
EXTRAS = [
    ("source", '"web"'),
    ("score", "1.5e-3"),
    ("zero", "-0"),
    ("neg", "-12"),
    ("exp", "-2.5E+10"),
    ("frac", "0.000"),
    ("huge", "1e400"),
    ("long", "12345678901234567890123"),
    ("wide", "9" * 640),  # Python's json reads integers of up to 4,300 digits (640 taken)
    ("flag", "true"),
    ("off", "false"),
    ("none", "null"),
    ("lang", '"fr\\u00e9 \u00e9"'),
    ("lone", '"\\ud800"'),  # json reads it; the careful reader does not look at it
    ("nul", '"\\u0000"'),
    ("my key", '"x"'),
    ("Title", "5"),
    ("", '""'),
]
BLANK_LINES = ["", " ", "\t", "\r", "  \t\r", "\x0b", "\x0c"]


def _blank(rng: random.Random) -> str:
    """Blanks JSON allows between tokens (a lone CR too: a line ends at LF only)."""
    return rng.choice(["", "", "", " ", "  ", "\t", " \t ", "\r"])


def _string(rng: random.Random) -> str:
    if rng.random() < 0.1:
        return '"' + " ".join(rng.choices(STRINGS, k=rng.randint(5, 40))) + '"'
    return '"' + rng.choice(STRINGS) + '"'


def _document(rng: random.Random, i: int) -> str:
    """Document ``i``'s line (without its end): its id unique by ``i`` whatever its kind."""
    kind = rng.randrange(4)
    ident = [f'"d{i}"', f"{i + 1000}", f"-{i + 1}", f'"doc-{i}_x.y/{i}:~"'][kind]
    if i == 0:
        ident = "0"
    members = [("_id", ident)]
    for name in ("title", "text"):
        if rng.random() < 0.85:
            members.append((name, _string(rng)))
    k = rng.randint(0, 30)
    choices = {
        "cluster_id": [None, "null", f'"c{k}"', f'"c{k}"', f"{k}", f"-{k + 1}"],
        "parent_id": [None, None, "null", f'"p{k}"', f"{k + 7}"],
        "chunk_index": [None, None, "null", "0", str(rng.randint(1, 5000)), "2147483647"],
    }
    for name, values in choices.items():
        value = rng.choice(values)
        if value is not None:
            members.append((name, value))
    members += rng.sample(EXTRAS, rng.randint(0, 3))
    rng.shuffle(members)
    body = ",".join(
        f'{_blank(rng)}"{name}"{_blank(rng)}:{_blank(rng)}{value}{_blank(rng)}'
        for name, value in members
    )
    return f"{_blank(rng)}{{{body}}}{_blank(rng)}"


def _corpus_text(rng: random.Random, documents: int) -> str:
    out = []
    for i in range(documents):
        if rng.random() < 0.05:
            out.append(rng.choice(BLANK_LINES) + "\n")
        out.append(_document(rng, i) + rng.choice(["\n", "\n", "\n", "\r\n"]))
    return "".join(out)


def _variants(text: str) -> dict[str, bytes]:
    plain = text.encode()
    return {
        "corpus.jsonl": plain,
        "crlf.jsonl": text.replace("\n", "\r\n").encode(),
        "bom.jsonl": BOM + plain,
        "no-last-newline.jsonl": plain.rstrip(b"\n"),
        "corpus.jsonl.gz": gzip.compress(BOM + plain),
    }


def _outcome(path: Path, compiled_from: int) -> tuple[list[dict[str, Any]], bool] | str:
    """What ``read_cluster_corpus`` gives: the frame's rows and has_text, or the error."""
    try:
        corpus = read_cluster_corpus(path, compiled_from=compiled_from)
    except InputError as error:
        return str(error)
    assert corpus.documents.schema == CORPUS_SCHEMA
    return corpus.documents.to_dicts(), corpus.has_text


def _same(got: ClusterCorpus, want: ClusterCorpus) -> None:
    assert got.documents.schema == want.documents.schema
    assert got.documents.to_dicts() == want.documents.to_dicts()
    assert got.has_text == want.has_text


@pytest.mark.parametrize("block", [cluster_corpus.BLOCK_BYTES, 1000, 61])
def test_the_compiled_pass_reads_a_corpus_as_the_careful_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """Every edge of a corpus the pass takes, in every variant of the file, read whole or a
    block a few lines long (61 bytes: most lines cut across two blocks)."""
    monkeypatch.setattr(cluster_corpus, "BLOCK_BYTES", block)
    text = _corpus_text(random.Random(2031), 300)
    for name, data in _variants(text).items():
        path = tmp_path / name
        path.write_bytes(data)
        want = read_cluster_corpus(path, compiled_from=CAREFUL)
        assert want.documents.height == 300, name
        taken = read_compiled(path)
        assert taken is not None, name  # the pass read it: the comparison is not vacuous
        _same(taken, want)
        _same(read_cluster_corpus(path, compiled_from=0), want)


def test_characters_are_counted_as_python_counts_them(tmp_path: Path) -> None:
    """Figures worked by hand: a surrogate pair is one character, é written raw or escaped
    one, an escape one; the newline joins a title and a text only when both are there."""
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        '{"_id": "a", "title": "\\ud83d\\ude00", "text": "\u00e9", "cluster_id": "c1"}\n'
        '{"_id": "b", "title": "\\u00e9\\n\\"", "cluster_id": null}\n'
        '{"_id": 3, "text": "\U0001f600\\/x", "cluster_id": 7}\n'
        '{"_id": "d", "title": "", "text": ""}\n'
    )
    want = [
        {"doc_id": "a", "cluster_id": "c1", "tokens": 3 / 4},
        {"doc_id": "b", "cluster_id": None, "tokens": 3 / 4},
        {"doc_id": "3", "cluster_id": "7", "tokens": 3 / 4},
        {"doc_id": "d", "cluster_id": None, "tokens": 0.0},
    ]
    for corpus in (read_compiled(path), _careful(path)):
        assert corpus is not None
        assert corpus.documents.to_dicts() == want
        assert corpus.has_text
    titles_only = tmp_path / "titles.jsonl"
    titles_only.write_text('{"_id": "a", "title": "t"}\n{"_id": "b", "text": ""}\n')
    for corpus in (read_compiled(titles_only), _careful(titles_only)):
        assert corpus is not None
        assert not corpus.has_text
        assert corpus.documents.get_column("tokens").to_list() == [0.25, 0.0]


def test_an_empty_corpus_is_the_careful_readers_error(tmp_path: Path) -> None:
    for name, data in {"empty.jsonl": b"", "blank.jsonl": b"\n \r\n\t\n", "bom.jsonl": BOM}.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert read_compiled(path) is None
        with pytest.raises(InputError, match="the corpus is empty"):
            read_cluster_corpus(path, compiled_from=0)


#: lines the pass declines: bad input (the careful reader words the error) or input it is not
#: sure to read the same way (the careful reader reads it)
DECLINED: dict[str, bytes] = {
    "a lone surrogate in the text": b'{"_id": "x1", "text": "a\\ud800b"}',
    "a low surrogate alone in the title": b'{"_id": "x1", "title": "\\udc00"}',
    "a high surrogate before another escape": b'{"_id": "x1", "text": "\\ud800\\u0041"}',
    "a high surrogate at the end": b'{"_id": "x1", "text": "ab\\uD800"}',
    "an escaped NUL in the text": b'{"_id": "x1", "text": "a\\u0000b"}',
    "an escaped NUL in the title": b'{"_id": "x1", "title": "\\u0000"}',
    "a raw NUL": b'{"_id": "x1", "text": "a\x00b"}',
    "a null title": b'{"_id": "x1", "title": null}',
    "a number for a title": b'{"_id": "x1", "title": 5}',
    "a list for a text": b'{"_id": "x1", "text": ["a"]}',
    "a boolean text": b'{"_id": "x1", "text": false}',
    "an id with a space": b'{"_id": "x 1"}',
    "an empty id": b'{"_id": ""}',
    "an object for an id": b'{"_id": {"a": 1}}',
    "a null id": b'{"_id": null}',
    "no id": b'{"title": "t", "text": "x"}',
    "an empty object": b"{}",
    "an object as another member": b'{"_id": "x1", "meta": {"a": 1}}',
    "a list as another member": b'{"_id": "x1", "tags": ["a", "b"]}',
    "an empty list as another member": b'{"_id": "x1", "tags": []}',
    "an id twice on a line": b'{"_id": "x1", "text": "t", "_id": "x2"}',
    "the same id twice on a line": b'{"_id": "x1", "_id": "x1"}',
    "a title twice": b'{"_id": "x1", "title": "a", "title": "bb"}',
    "a cluster twice": b'{"_id": "x1", "cluster_id": "a", "cluster_id": null}',
    "a document twice": b'{"_id": "u3", "text": "again"}',
    "an integer id and its string": b'{"_id": 7}\n{"_id": "7"}',
    "invalid UTF-8": b'{"_id": "x1", "text": "a\xffb"}',
    "an overlong UTF-8 sequence": b'{"_id": "x1", "text": "\xc0\xaf"}',
    "a surrogate in UTF-8": b'{"_id": "x1", "text": "\xed\xa0\x80"}',
    "a UTF-8 sequence cut short": b'{"_id": "x1", "text": "\xe4\xb8"}',
    "a code point past U+10FFFF": b'{"_id": "x1", "text": "\xf4\x90\x80\x80"}',
    "invalid UTF-8 in another member": b'{"_id": "x1", "note": "\xff"}',
    "a raw control character": b'{"_id": "x1", "text": "a\x01b"}',
    "a raw tab in a string": b'{"_id": "x1", "title": "a\tb"}',
    "a negative chunk index": b'{"_id": "x1", "chunk_index": -1}',
    "a fractional chunk index": b'{"_id": "x1", "chunk_index": 1.5}',
    "a chunk index past int32": b'{"_id": "x1", "chunk_index": 2147483648}',
    "a chunk index of 2**31 as an exponent": b'{"_id": "x1", "chunk_index": 2.147483648e9}',
    "a chunk index as a string": b'{"_id": "x1", "chunk_index": "3"}',
    "a boolean chunk index": b'{"_id": "x1", "chunk_index": true}',
    "a chunk index of -0": b'{"_id": "x1", "chunk_index": -0}',
    "-0 for an id": b'{"_id": -0}',
    "true for an id": b'{"_id": true}',
    "a float id": b'{"_id": 1.0}',
    "a 19-digit id": b'{"_id": 1234567890123456789}',
    "an id beyond ASCII": b'{"_id": "d\xc3\xa9"}',
    "an escape in an id": b'{"_id": "d\\u0031"}',
    "an empty cluster id": b'{"_id": "x1", "cluster_id": ""}',
    "a cluster id with a space": b'{"_id": "x1", "cluster_id": "c 1"}',
    "a boolean cluster id": b'{"_id": "x1", "cluster_id": false}',
    "a float cluster id": b'{"_id": "x1", "cluster_id": 1.5}',
    "a list for a parent id": b'{"_id": "x1", "parent_id": ["p"]}',
    "NaN": b'{"_id": "x1", "score": NaN}',
    "-Infinity": b'{"_id": "x1", "score": -Infinity}',
    "an integer of 5,000 digits": b'{"_id": "x1", "n": ' + b"1" * 5000 + b"}",
    "a negative integer of 4,301 digits": b'{"_id": "x1", "n": -' + b"9" * 4301 + b"}",
    "an integer of 641 digits": b'{"_id": "x1", "n": ' + b"1" * 641 + b"}",
    "a decimal of 641 digits before its point": b'{"_id": "x1", "n": ' + b"1" * 641 + b".5}",
    "a leading zero": b'{"_id": "x1", "n": 01}',
    "a point without digits": b'{"_id": "x1", "n": 1.}',
    "a plus sign": b'{"_id": "x1", "n": +1}',
    "true misspelt": b'{"_id": "x1", "f": tru}',
    "a JSON list": b'["x1"]',
    "a string": b'"x1"',
    "trailing garbage": b'{"_id": "x1"} x',
    "two objects": b'{"_id": "x1"}{"_id": "x2"}',
    "a lone carriage return between objects": b'{"_id": "x1"}\r{"_id": "x2"}',
    "a trailing comma": b'{"_id": "x1",}',
    "a missing comma": b'{"_id": "x1" "text": "t"}',
    "an escaped key": b'{"\\u005fid": "x1"}',
    "a key beyond ASCII": b'{"_id": "x1", "cl\xc3\xa9": 1}',
    "a bad escape": b'{"_id": "x1", "text": "\\x41"}',
    "a short unicode escape": b'{"_id": "x1", "text": "\\u12"}',
    "a string cut short": b'{"_id": "x1", "text": "abc}',
    "an object cut short": b'{"_id": "x1", "text": "abc"',
    "a byte-order mark mid-file": BOM + b'{"_id": "x1"}',
    "a form feed before the object": b'\x0c{"_id": "x1"}',
    "single quotes": b"{'_id': 'x1'}",
    "an unquoted key": b'{_id: "x1"}',
    "nested 100 deep": b'{"_id": "x1", "n": ' + b"[" * 100 + b"]" * 100 + b"}",
}
#: the usual lines around the one tried
USUAL = [
    f'{{"_id": "u{i}", "title": "t{i}", "text": "text {i}", "cluster_id": "c{i % 3}"}}'.encode()
    for i in range(20)
]


@pytest.mark.parametrize("line", list(DECLINED.values()), ids=list(DECLINED))
@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_line_it_does_not_take_declines_the_file(tmp_path: Path, line: bytes, where: str) -> None:
    """The pass declines (None) what it is not sure to read as the careful reader, and
    ``read_cluster_corpus`` then reads the file that way: the same frame, or its error."""
    lines = [*USUAL[:10], line, *USUAL[10:]] if where == "middle" else [*USUAL, line]
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if where == "middle" else b""))
    assert read_compiled(path) is None
    assert _outcome(path, 0) == _outcome(path, CAREFUL)


def test_a_line_past_the_careful_readers_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The careful reader refuses a line longer than ``textio.MAX_LINE_BYTES`` (its newline
    counted); the pass refuses it at the same length (given the bound: 256 MiB unless told),
    whole or cut by the block's end, so a gigabyte without a newline is not held."""
    from app.eval.compiled import corpus as kernel

    data = b'{"_id": "a"}\n{"_id": "' + b"d" * 5000 + b'"}\n'  # line 2: 5,012 bytes
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(data)
    buf = np.frombuffer(bytearray(data), np.uint8)
    out = np.zeros((kernel.CORPUS_FIELDS, 10), np.int64)
    for bound, taken in [(5012, True), (5011, False), (1000, False)]:
        monkeypatch.setattr(textio, "MAX_LINE_BYTES", bound)
        if taken:
            assert len(list(read_corpus(path))) == 2
        else:
            with pytest.raises(InputError, match=f"line 2: a line longer than {bound:,} bytes"):
                list(read_corpus(path))
        status, _, count = kernel.corpus_block(buf, len(buf), True, out, bound)
        assert (status, count) == ((kernel.DONE, 2) if taken else (kernel.REFUSED, 0))
    status, _, _ = kernel.corpus_block(buf, 2000, False, out, 1000)  # not yet whole
    assert status == kernel.REFUSED
    assert kernel.corpus_block(buf, len(buf), True, out)[:3:2] == (kernel.DONE, 2)


#: characters a title or a text may hold: any but NUL and surrogates (controls, non-ASCII,
#: astral), and those JSON escapes
_CHARS = st.one_of(
    st.characters(exclude_characters="\x00"),
    st.sampled_from('\n\r\t"\\/\x7f\u2028\u00e9\u4e2d\U0001f600'),
)
#: what the careful reader may refuse in a title or a text: a NUL, a lone surrogate; and two
#: surrogates of a pair, one character once written escaped, not UTF-8 once written raw
_ODD = st.one_of(
    st.just("\x00"),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.sampled_from(["\ud83d\ude00", "\ud800\udc00", "\udbff\udfff", "\ud800\ud800\udc00"]),
)
_TEXTS = st.one_of(
    st.none(),
    st.text(_CHARS, max_size=40),
    st.builds(lambda a, odd, b: a + odd + b, st.text(_CHARS, max_size=10), _ODD, st.text(_CHARS)),
)
#: another member, maybe named like one the careful reader reads (then there twice, or checked)
_EXTRAS = st.one_of(
    st.none(),
    st.tuples(
        st.one_of(
            st.text(_CHARS, max_size=8),
            st.sampled_from(["_id", "title", "text", "cluster_id", "parent_id", "chunk_index"]),
        ),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.floats(),
            st.text(_CHARS, max_size=10),
        ),
    ),
)


@settings(max_examples=150, deadline=None)
@given(title=_TEXTS, text=_TEXTS, extra=_EXTRAS, ascii_only=st.booleans())
def test_random_titles_and_texts_as_json_dumps_writes_them(
    tmp_path_factory: pytest.TempPathFactory,
    title: str | None,
    text: str | None,
    extra: tuple[str, Any] | None,
    ascii_only: bool,
) -> None:
    """A document of random title and text (None: left out) among usual ones: when the
    careful reader refuses the file the pass declines it; a title and a text alone it takes;
    what it takes, it counts as the careful reader does."""
    members: list[tuple[str, Any]] = [("_id", "h1")]
    members += [
        (name, value) for name, value in (("title", title), ("text", text)) if value is not None
    ]
    if extra is not None:
        members.append(extra)
    body = ", ".join(
        f"{json.dumps(name, ensure_ascii=ascii_only)}: {json.dumps(value, ensure_ascii=ascii_only)}"
        for name, value in members
    )
    line = "{" + body + "}"
    path = tmp_path_factory.mktemp("random") / "corpus.jsonl"
    path.write_bytes(b"\n".join([*USUAL[:5], line.encode("utf-8", "surrogatepass"), *USUAL[5:]]))
    try:
        want = _careful(path)
    except InputError:
        event("the careful reader refuses it")
        assert read_compiled(path) is None
        return
    got = read_compiled(path)
    event("the careful reader reads it; the pass " + ("declines" if got is None else "takes it"))
    if extra is None:
        assert got is not None  # strings as json.dumps writes them are the pass's to read
    if got is not None:
        _same(got, want)
        row = want.documents.row(5, named=True)
        assert row["doc_id"] == "h1"
        assert got.documents.row(5, named=True) == row
