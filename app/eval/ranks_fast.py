"""The compiled path of a TREC run's ranking (``app.eval.sources.load_run``): the run read a
block at a time by ``compiled.ranks``' pass, built ahead of time (``app.eval.aot``), which
hands back each query's lines and repeats and each judged document's rank, and nothing else:
no frame of the run's lines is made.

``rank_compiled`` answers None when this path does not read the file: the module is not
built, the file is gzip or not plain TREC lines of printable ASCII as the pass reads them, a
query's lines are not together, or the run answers none of the golden queries. The caller
then reads it the careful way, which gives the same figures and words every error.
"""

from __future__ import annotations

import locale
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import polars as pl

from app.eval.aot import load_passes, switched_off
from app.eval.conventions import Order
from app.eval.golden import Judgments
from app.eval.passes import LINE_FIELDS, ORDER_CODES, REFUSED
from app.eval.ranking import RankCounts, RankedRun, ranked_run
from app.eval.textio import BOM, GZIP_MAGIC, separator_of

#: Bytes read at a time (the lines of a query the block before left come first).
BLOCK_BYTES = 8 << 20
#: The longest query the pass holds, in bytes: a longer one is the careful reader's.
MAX_QUERY_BYTES = 64 << 20
#: Lines taken apart at a time (``log_fast._BATCH_LINES``: why not a power of two).
_BATCH_LINES = 16_392
#: ``compiled.ranks``' rows.
_P_QUERY, _P_LINES, _P_DROPPED, _P_NAME_START, _P_NAME_END = range(_P_FIELDS := 5)
_T_JUDGMENT, _T_RANK = range(_T_FIELDS := 2)


def rank_compiled(
    path: Path, golden: Judgments, *, order: Order, name: str, source: str
) -> RankedRun | None:
    """The ranked run of the TREC run at ``path``, as ``ranking.rank_run`` ranks it, or
    None (see the module)."""
    module = load_passes()
    if module is None or not path.is_file():  # a pipe is read once, by the careful reader
        return None
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
            if head.startswith((GZIP_MAGIC, BOM)):
                return None
            separator = separator_of(head)
            if separator is None:
                return None
            size = path.stat().st_size
            cut = _query_cut(handle, size // 2, separator.encode()) if size >= SPLIT_FROM else None
        known, judgments, golden_arrays = _golden_arrays(module, golden)
        ranges = [(0, size)] if cut is None else [(0, cut), (cut, size)]
        pass_ = _Pass(module, path, golden_arrays, ord(separator), ORDER_CODES[order])
        with ThreadPoolExecutor(len(ranges)) as pool:
            answers = list(pool.map(pass_, ranges))
    except OSError:
        return None  # the careful reader says what is wrong with the file, as it words it
    if any(answer is None for answer in answers):
        return None
    queries, targets, names = _joined([a for a in answers if a is not None])
    return _ranked(golden, known, judgments, queries, targets, names, order, name, source)


#: A file this long is read in two halves at once, by two threads (the pass lets go of the
#: GIL); the halves are cut where a query begins.
SPLIT_FROM = 1 << 20
#: How far past the middle a query's beginning is looked for.
_CUT_WINDOW = 1 << 20


def _query_cut(handle: BinaryIO, middle: int, sep: bytes) -> int | None:
    """Where the first query that begins after byte ``middle`` begins (a line whose query
    id is not the one of the line before), or None when none does in ``_CUT_WINDOW`` bytes.
    Blank lines are no query. Were a query's lines on both sides (a line the pass reads
    otherwise), its id would be found twice and the run declined."""
    handle.seek(middle)
    window = handle.read(_CUT_WINDOW)
    at = window.find(b"\n") + 1
    last = None
    while 0 < at < len(window):
        end = window.find(b"\n", at)
        if end < 0:
            return None  # the window ends in the line
        qid = window[at:end].split(sep, 1)[0].strip(b"\r")
        if qid:
            if last is not None and qid != last:
                return middle + at
            last = qid
        at = end + 1
    return None


def _id_bytes(ids: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The ids' UTF-8 bytes end to end, and the offset of each (one more: the end)."""
    offsets = np.zeros(ids.len() + 1, np.int64)
    offsets[1:] = ids.str.len_bytes().cast(pl.Int64).cum_sum().to_numpy()
    text = ids.str.join("").item() if ids.len() else ""
    return np.frombuffer(bytearray(text.encode("utf-8")), np.uint8), offsets


def _golden_arrays(
    module: Any, golden: Judgments
) -> tuple[pl.Series, pl.DataFrame, tuple[np.ndarray, ...]]:
    """The golden set's queries (numbered in this order), its judgments (qid, doc_id, grade,
    q: its query's number; numbered in this order) and ``compiled.ranks.golden_tables``'
    arrays, in the order ``rank_block`` takes them."""
    known = golden.known_qids
    numbered = pl.DataFrame({"qid": known}).with_row_index("q")
    judgments = (
        golden.judgments.select("qid", "doc_id", "grade")
        .join(numbered, on="qid", how="left")
        .sort("q", maintain_order=True)
    )
    qids, q_offsets = _id_bytes(known)
    docs, d_offsets = _id_bytes(judgments.get_column("doc_id"))
    j_query = judgments.get_column("q").cast(pl.Int64).to_numpy(writable=True)
    q_slots, j_hashes, j_first, j_slots = module.golden_tables(
        qids, q_offsets, docs, d_offsets, j_query
    )
    arrays = (qids, q_offsets, q_slots, docs, d_offsets, j_query, j_hashes, j_first, j_slots)
    return known, judgments, arrays


#: What a range of the file gives: its queries' rows, its judged documents' rows and the
#: ids of its queries the golden set does not know (``compiled.ranks``).
_Answer = tuple[np.ndarray, np.ndarray, np.ndarray]


class _Pass:
    """The pass over one range of the file, in a thread of its own (its own handle, block
    and scratch)."""

    def __init__(
        self, module: Any, path: Path, golden: tuple[np.ndarray, ...], sep: int, order: int
    ) -> None:
        self.module = module
        self.path = path
        self.golden = golden
        self.sep = sep
        self.order = order
        # C's strtod reads a long decimal as Python does in the C locale's numbers
        self.long_ok = locale.localeconv()["decimal_point"] == "."

    def __call__(self, byte_range: tuple[int, int]) -> _Answer | None:
        start, stop = byte_range
        lines = np.zeros((LINE_FIELDS, _BATCH_LINES), np.int64)
        queries = np.empty((1024, _P_FIELDS), np.int64)
        targets = np.empty((1024, _T_FIELDS), np.int64)
        names = np.empty(4096, np.uint8)
        nq = nt = nn = 0
        buf = np.empty(2 * BLOCK_BYTES, np.uint8)
        have = 0  # bytes of a query the block before left, at the front of ``buf``
        left = stop - start
        with self.path.open("rb") as handle:
            handle.seek(start)
            while True:
                if len(buf) - have < BLOCK_BYTES:
                    if 2 * len(buf) > MAX_QUERY_BYTES:
                        return None
                    larger = np.empty(2 * len(buf), np.uint8)
                    larger[:have] = buf[:have]
                    buf = larger
                got = handle.readinto(buf.data[have : have + min(BLOCK_BYTES, left)])
                left -= got
                n = have + got
                final = got == 0
                status, consumed, queries, nq, targets, nt, names, nn = self.module.rank_block(
                    buf, n, self.sep, self.order, final, self.long_ok, lines, *self.golden,
                    queries, nq, targets, nt, names, nn,
                )  # fmt: skip
                if status == REFUSED:
                    return None
                if final:
                    return queries[:nq], targets[:nt], names[:nn]
                have = n - consumed
                buf[:have] = buf[consumed:n].copy()


def _joined(answers: list[_Answer]) -> _Answer:
    """The ranges' answers as one (the ids' places in the names moved along)."""
    if len(answers) == 1:
        return answers[0]
    shift = 0
    for queries, _, names in answers:
        named = queries[:, _P_NAME_START] >= 0
        queries[named, _P_NAME_START] += shift
        queries[named, _P_NAME_END] += shift
        shift += len(names)
    return (
        np.concatenate([a[0] for a in answers]),
        np.concatenate([a[1] for a in answers]),
        np.concatenate([a[2] for a in answers]),
    )


def _ranked(
    golden: Judgments,
    known: pl.Series,
    judgments: pl.DataFrame,
    queries: np.ndarray,
    targets: np.ndarray,
    names: np.ndarray,
    order: Order,
    name: str,
    source: str,
) -> RankedRun | None:
    """The run of the pass's answer, or None when it has no line or a query's lines were
    not together."""
    number = queries[:, _P_QUERY]
    golden_rows = number >= 0
    unknown = names.tobytes().decode("ascii").split("\n")[:-1] if len(names) else []
    qid = pl.concat(
        [
            known.gather(pl.Series(number[golden_rows])).alias("qid"),
            pl.Series("qid", unknown, pl.String),
        ]
    )
    n = pl.Series(
        "n", np.concatenate([queries[golden_rows, _P_LINES], queries[~golden_rows, _P_LINES]])
    ).cast(pl.UInt32)
    per_query = pl.DataFrame([qid, n])
    if not len(queries) or qid.is_duplicated().any():
        return None  # no line (the careful reader says what is wrong); or a query comes back
    dropped = np.concatenate([queries[golden_rows, _P_DROPPED], queries[~golden_rows, _P_DROPPED]])
    some = dropped > 0
    dropped_per_query = dict(
        zip(qid.filter(pl.Series(some)).to_list(), dropped[some].tolist(), strict=True)
    )
    judged = (
        judgments.select("qid", "doc_id", "grade")
        .gather(pl.Series(targets[:, _T_JUDGMENT]))
        .with_columns(pl.Series("rank", targets[:, _T_RANK]).cast(pl.UInt32))
        .sort("qid", "rank")
    )
    return ranked_run(
        RankCounts(
            per_query=per_query,
            dropped_per_query=dropped_per_query,
            unknown_queries=int((~golden_rows).sum()),
            unknown_lines=int(queries[~golden_rows, _P_LINES].sum()),
            judged=judged,
        ),
        golden,
        order=order,
        name=name,
        source=source,
        fmt="trec",
        lines=int(queries[:, _P_LINES].sum()),
    )


def build_ahead() -> None:
    """Build the passes ahead of time (this one and the log pass: ``app.eval.aot``) unless
    this source's are built (``make install``, the image: ``cluster_stream.warm``), and check
    that the module loads and ranks a tiny run as the careful path does; raises if it does
    not. Where it cannot be built (no C compiler: numba's AOT compiler needs one), logs so
    and leaves every run to the careful reader, and the log pass to numba. Nothing when
    switched off (MISSTRIAGE_AOT=0)."""
    import logging
    import tempfile

    from app.eval.golden import golden_from_frame
    from app.eval.ranking import rank_run
    from app.eval.trec import read_trec_run

    if switched_off():
        return
    load_passes.cache_clear()
    if load_passes() is None:
        from app.eval.compiled.aot_build import build

        try:
            build()
        except Exception as exc:  # the compiler's and the linker's errors, whatever they are
            logging.getLogger(__name__).warning(
                "the passes built ahead of time were not built (%s: %s); runs are read by "
                "the careful reader and logs by numba's pass, with the same figures",
                type(exc).__name__,
                str(exc)[:200],
            )
            return
        load_passes.cache_clear()
    golden = golden_from_frame(
        pl.DataFrame({"qid": ["q1", "q1", "q2"], "doc_id": ["d2", "d9", "d1"], "grade": [1, 2, 1]})
    )
    with tempfile.TemporaryDirectory(prefix="misstriage-warm-") as tmp:
        path = Path(tmp) / "run.trec"
        path.write_text("q1 Q0 d1 1 2.5 t\nq1 Q0 d9 2 1.5 t\nq1 Q0 d2 3 1.5 t\nq2 Q0 d1 1 1 t\n")
        for order in ORDER_CODES:
            fast = rank_compiled(path, golden, order=order, name="run", source=str(path))
            frame = read_trec_run(path, with_rank=order is Order.RANK)
            careful = rank_run(frame, golden, order=order, name="run", source=str(path), fmt="trec")
            if fast is None or not fast.judged.equals(careful.judged):
                raise RuntimeError(f"the ranking built ahead of time is not loaded ({order})")
