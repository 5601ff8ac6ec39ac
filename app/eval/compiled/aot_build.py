"""Builds the passes ahead of time (numba's AOT compiler) into the module
``app.eval.aot.load_passes`` loads: ``ranks``' and the log pass's (``app.eval.passes``);
the signatures of its exports are written here, once. An array is given as the signature
says (its type, C order): the built module's wrappers take it as it is, unchecked."""

from __future__ import annotations

import importlib
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, cast

from app.eval.aot import PASSES_MODULE, cache_folder, module_file
from app.eval.compiled import ranks
from app.eval.passes import LOG_EXPORTS

#: golden_tables(qids, q_offsets, docs, d_offsets, j_query)
GOLDEN_TABLES = (
    "Tuple((i8[::1], u8[::1], i8[::1], i8[::1]))(u1[::1], i8[::1], u1[::1], i8[::1], i8[::1])"
)
#: rank_block(buf, n, sep, order, final, long_ok, lines, the golden set's nine arrays,
#: queries, nq, targets, nt, names, nn)
RANK_BLOCK = (
    "Tuple((i8, i8, i8[:, ::1], i8, i8[:, ::1], i8, u1[::1], i8))"
    "(u1[::1], i8, i8, i8, b1, b1, i8[:, ::1],"
    " u1[::1], i8[::1], i8[::1], u1[::1], i8[::1], i8[::1], u8[::1], i8[::1], i8[::1],"
    " i8[:, ::1], i8, i8[:, ::1], i8, u1[::1], i8)"
)
#: A corpus as the log pass looks documents up (ids' bytes, their offsets, the table's
#: slots and records) and a thread's accumulators (``log_fast._Worker``).
_CORPUS = "Tuple((u1[::1], i8[::1], u8[::1], i8[:, ::1]))"
_TALLY = "Tuple((i8[:, ::1], i8[::1], i8[::1], i8[::1], f8[::1], i8[::1], i8[::1], i8[::1]))"
#: The log pass's exports (``app.eval.passes.LOG_EXPORTS``).
LOG_SIGNATURES = {
    # qids, qid_ends, docs, doc_ends, scores, ranks, first, last, order, lines, ks, corpus, tally
    "tally_rows": "Tuple((i8, u8[::1]))(u1[::1], i8[::1], u1[::1], i8[::1], f8[::1], i8[::1],"
    f" i8, i8, i8, i8[:, ::1], i8[::1], {_CORPUS}, {_TALLY})",
    # buf, n, shape, final, lines, ks, corpus, tally
    "tally_block": "Tuple((i8, i8, u8[::1]))(u1[::1], i8, Tuple((i8, i8, i8, b1)), b1,"
    f" i8[:, ::1], i8[::1], {_CORPUS}, {_TALLY})",
    # views, out, at
    "inline_views": "Tuple((i8, i8))(u1[::1], u1[::1], i8)",
    # views, data, bases, out, ends, row, at
    "strings": "Tuple((i8, i8))(u1[::1], u1[::1], i8[::1], u1[::1], i8[::1], i8, i8)",
    "row_query_start": "i8(u1[::1], i8[::1], i8, i8)",
    "last_row_query_start": "i8(u1[::1], i8[::1], i8)",
    "line_query_cut": "i8(u1[::1], i8, i8, i8, i8)",
    "last_line_query_start": "i8(u1[::1], i8, i8, i8)",
    # buf, n, final, out, max_line
    "corpus_block": "Tuple((i8, i8, i8))(u1[::1], i8, b1, i8[:, ::1], i8)",
    # ids, offsets, codes, tokens
    "corpus_table": "Tuple((u8[::1], i8[:, ::1]))(u1[::1], i8[::1], i8[::1], f8[::1])",
    "add_new": "i8(u8[::1], u8[::1])",
    # data, offsets, hashes
    "entries": "Tuple((i8, i8))(u1[::1], i8[::1], u8[::1])",
    # data, offsets, hashes, corpus, table, row_first
    "look_up_entries": f"i8(u1[::1], i8[::1], u8[::1], {_CORPUS}, i8[:, ::1], i8[::1])",
    # qidx, qdata, qoffsets, qhashes
    "query_bounds": "Tuple((i8, i8))(i4[::1], u1[::1], i8[::1], u8[::1])",
    # qidx, qdata, qoffsets, qhashes, didx, ddata, doffsets, table, scores, ranks, first,
    # last, order, ks, tally
    "tally_indices": "Tuple((i8, u8[::1]))(i4[::1], u1[::1], i8[::1], u8[::1], i4[::1], u1[::1],"
    f" i8[::1], i8[:, ::1], f8[::1], i8[::1], i8, i8, i8, i8[::1], {_TALLY})",
}


def _without_gil() -> type:
    from numba.core.compiler import Flags

    class WithoutGil(Flags):
        def __init__(self, *copied: Flags) -> None:
            super().__init__(*copied)  # type: ignore[no-untyped-call]  # (copies: their own)
            if not copied:
                flags: Any = self
                flags.release_gil = True
                flags.error_model = "numpy"

    return WithoutGil


def build() -> Path:
    """Build the module into this source's cache folder (written aside, then renamed into
    place: a process loading it never finds half a file); its path. Takes some 4 minutes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's notice that its AOT compiler will move
        from numba.pycc import cc as pycc_cc
        from numba.pycc import compiler as pycc_compiler

    patched: Any = pycc_compiler

    folder = cache_folder()
    if folder is None:
        raise RuntimeError("no folder to keep the compiled passes in (see app.eval.aot)")
    target = module_file(Path(folder))
    target.parent.mkdir(mode=0o700, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cc = cast(Any, pycc_cc).CC(PASSES_MODULE)
        cc.output_dir = tmp
        cc.verbose = False
        cc.export("golden_tables", GOLDEN_TABLES)(cast(Any, ranks.golden_tables).py_func)
        cc.export("rank_block", RANK_BLOCK)(cast(Any, ranks.rank_block).py_func)
        for name, (module, function) in LOG_EXPORTS.items():
            jitted = getattr(importlib.import_module(f"app.eval.compiled.{module}"), function)
            cc.export(name, LOG_SIGNATURES[name])(jitted.py_func)
        plain = patched.Flags
        # The exports' wrappers let go of the GIL, as ``compiled`` functions do (numba's AOT
        # compiler has no option for it: its flags are set here): two threads rank two
        # halves of a run at once.
        patched.Flags = _without_gil()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cc.compile()
        finally:
            patched.Flags = plain
        built = Path(tmp) / target.name
        os.chmod(built, 0o755)
        os.replace(built, target)
    return target
