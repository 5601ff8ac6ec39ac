"""The evaluation conventions of misstriage, decided once (DESIGN.md, "Evaluation conventions").

Every number the product shows is computed under these rules, and the rules travel with the
numbers (the metrics read model echoes them) so that the CLI, the API and the UI can echo them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Order(StrEnum):
    """How the lines of a run become a ranking."""

    #: trec_eval: score descending (parsed as a double), ties by docno in descending byte order;
    #: the rank column is ignored.
    TREC_EVAL = "trec_eval"
    #: the rank column ascending; equal ranks keep file order.
    RANK = "rank"
    #: the order of the lines in the file.
    FILE = "file"


class Gain(StrEnum):
    """The gain of a relevant document of grade g in nDCG."""

    #: 2^g - 1 (Burges et al.); the default.
    EXP = "exp"
    #: g, as trec_eval's ``ndcg_cut``.
    LINEAR = "linear"


#: The recall depths of the depth curve; any requested depth is added to them.
DEFAULT_DEPTHS: tuple[int, ...] = (10, 20, 50, 100, 200, 1000)
DEFAULT_K = 10
DEFAULT_DEPTH = 50
DEFAULT_MIN_GRADE = 1

#: The ideal ranking of nDCG: the k highest judged grades of the query, retrieved or not
#: (trec_eval ``ndcg_cut``).
IDEAL = "strict"
#: Which queries are averaged.
AVERAGED_QUERIES = "golden queries with at least one relevant document; absent from the run = 0"
#: Which queries are averaged with ``Conventions.all_judged_queries`` (trec_eval ``-c``).
ALL_JUDGED_QUERIES = (
    "every judged query, those without a relevant document too (R = 0, nDCG from their positive "
    "grades, 0 when all are non-positive), as trec_eval -c; absent from the run = 0"
)
#: The grades nDCG's gains come from: trec_eval's ``-l`` (min_grade) changes binary measures only.
NDCG_GRADES = (
    "every judged grade > 0, whatever min_grade (trec_eval -l changes binary measures only)"
)
AVERAGING = "macro (mean of per-query values); micro (pooled hits / pooled relevant) beside it"
DUPLICATES = "first occurrence in the file wins; later ones are dropped and counted"


@dataclass(frozen=True, slots=True)
class Conventions:
    """The settings that decide every number, echoed next to every number."""

    order: Order = Order.TREC_EVAL
    gain: Gain = Gain.EXP
    min_grade: int = DEFAULT_MIN_GRADE
    #: Also average the judged queries without a relevant document (trec_eval ``-c``):
    #: excluded by default.
    all_judged_queries: bool = False

    @property
    def averaged_queries(self) -> str:
        """Which queries the means are taken over, in words (echoed with the numbers)."""
        return ALL_JUDGED_QUERIES if self.all_judged_queries else AVERAGED_QUERIES

    def is_relevant(self, grade: int) -> bool:
        """A judged document is relevant when its grade is at least ``min_grade``."""
        return grade >= self.min_grade


def parse_depths(text: str) -> tuple[int, ...]:
    """Parse ``"10,20,50"`` into sorted unique positive depths."""
    depths: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        # ASCII digits only: str.isdigit() accepts "²", which int() refuses; and no more
        # digits than the largest depth has, so a 5,000-digit number is never converted.
        digits = part.lstrip("0")
        if not (part.isascii() and part.isdigit()) or not digits:
            raise ValueError(f"depth {part[:20]!r} is not a positive integer")
        if len(digits) > len(str(MAX_CUTOFF)) or int(digits) > MAX_CUTOFF:
            raise ValueError(f"depth {part[:20]!r} is larger than {MAX_CUTOFF:,}")
        depths.add(int(digits))
    if not depths:
        raise ValueError("no depth given")
    return tuple(sorted(depths))


#: The largest k or depth the product computes.
MAX_CUTOFF = 100_000


class CutoffError(ValueError):
    """k and depth that do not describe a two-stage system (``code`` is the error code)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def check_cutoffs(*, k: int, depth: int) -> None:
    """The one rule for k and depth, used by every face (web, API, CLI): both within
    1..MAX_CUTOFF, and k at most depth, because the k results people read are taken from the
    top ``depth`` candidates; a k above depth would count documents no candidate list holds."""
    for name, value in (("k", k), ("depth", depth)):
        if not 1 <= value <= MAX_CUTOFF:
            raise CutoffError(
                f"{name} must be between 1 and {MAX_CUTOFF}, not {value}", code="invalid_cutoff"
            )
    if k > depth:
        raise CutoffError(
            f"k ({k}) is larger than depth ({depth}): the top k are read from the top depth "
            "candidates, so k must be at most depth",
            code="k_above_depth",
        )
