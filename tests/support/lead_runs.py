"""A golden set with a first-stage run, its reranking and a hybrid run, for the lead views."""

from __future__ import annotations

QRELS = "q1 0 a 1\nq1 0 b 1\nq2 0 c 1\nq3 0 d 2\n"


QUERIES = "q1\tthrottling errors\nq2\tsso login\nq3\texport data\n"


# first: a@1, b@3; c@4; d not retrieved.  reranked: the same top 5 per query, reordered.
FIRST = (
    "q1 Q0 a 1 9 t\nq1 Q0 x 2 8 t\nq1 Q0 b 3 7 t\nq2 Q0 y 1 9 t\nq2 Q0 z 2 8 t\n"
    "q2 Q0 w 3 7 t\nq2 Q0 c 4 6 t\nq3 Q0 e 1 1 t\n"
)


RERANKED = (
    "q1 Q0 b 1 9 t\nq1 Q0 a 2 8 t\nq1 Q0 x 3 7 t\nq2 Q0 c 1 9 t\nq2 Q0 y 2 8 t\n"
    "q2 Q0 z 3 7 t\nq2 Q0 w 4 6 t\nq3 Q0 e 1 1 t\n"
)


# hybrid finds d (q3) at rank 2 and loses c.
HYBRID = "q1 Q0 a 1 9 t\nq1 Q0 b 2 8 t\nq2 Q0 y 1 9 t\nq3 Q0 e 1 9 t\nq3 Q0 d 2 8 t\n"
