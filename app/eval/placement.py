"""Where the run put a missed document, in one sentence: the only wording of it.

The miss page, the review card, the triage dashboard, the backlog (page and downloads) and the
exported issues all call ``where_the_run_put_it``, so they never disagree.
"""

from __future__ import annotations


def where_the_run_put_it(rank: int | None, retrieved: int | None, depth: int) -> str:
    """The sentence for a miss at ``depth``.

    ``rank``: the document's rank in the run (None: the run did not return it);
    ``retrieved``: how many results the run returned for the query (None or 0: nothing).

    - returned deeper than ``depth``: "rank 73 of 1000";
    - not returned, the run returned 34 results: "not retrieved: not among the run's 34
      results for this query" (whatever the depth: "the top 34" read as if the run had been
      cut there, and "the top 1" read badly);
    - not returned, the run returned one result: "not retrieved: the run's only result for
      this query is another document";
    - the run returned nothing for the query: "not retrieved: the run returned nothing for
      this query".

    Raises ValueError for a pair that is not a miss (rank within ``depth``) or numbers that
    contradict each other (a rank beyond the run's length).
    """
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    if retrieved is not None and retrieved < 0:
        raise ValueError(f"a run returns 0 or more results, got {retrieved}")
    if rank is not None:
        if rank <= depth:
            raise ValueError(f"rank {rank} is within the top {depth}: not a miss")
        if retrieved is None or rank > retrieved:
            raise ValueError(f"rank {rank} is beyond the run's {retrieved or 0} results")
        return f"rank {rank} of {retrieved}"
    if not retrieved:
        return "not retrieved: the run returned nothing for this query"
    if retrieved == 1:
        return "not retrieved: the run's only result for this query is another document"
    return f"not retrieved: not among the run's {retrieved} results for this query"
