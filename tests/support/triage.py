"""Build a golden set, a run and a triage with a known number of misses, through services."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import GoldenSet, Role, Run, Triage, User
from app.models.triage_public import Overlap
from app.services.accounts import users
from app.services.imports import golden_sets, runs
from app.services.triage import triages

TOPICS = [
    "api throttling limits",
    "single sign-on with okta",
    "webhook signatures",
    "exporting workspace data",
    "invoice vat numbers",
]


def make_triage(
    engine: Engine,
    tmp: Path,
    *,
    queries: int = 5,
    per_query: int = 2,
    name: str = "g",
    corpus: bool = False,
    overlap: Overlap | None = None,
) -> tuple[GoldenSet, Run, Triage]:
    """``queries`` queries with ``per_query`` relevant documents each (grades 1..per_query),
    and a run that returns none of them: queries x per_query misses. With ``corpus``, query
    texts and a corpus (titles, texts, chunks of one parent) for review context; with
    ``overlap``, double review."""
    qrels = "".join(f"q{q} 0 d{q}-{i} {i + 1}\n" for q in range(queries) for i in range(per_query))
    run = "".join(
        f"q{q} Q0 noise{q}-{r} {r + 1} {100 - r} t\n" for q in range(queries) for r in range(3)
    )
    (tmp / f"{name}.qrels").write_text(qrels)
    (tmp / f"{name}.trec").write_text(run)
    texts = corpus_path = None
    if corpus:
        texts = tmp / f"{name}.queries.tsv"
        texts.write_text(
            "".join(f"q{q}\thow do I handle {TOPICS[q % len(TOPICS)]}?\n" for q in range(queries))
        )
        corpus_path = tmp / f"{name}.corpus.jsonl"
        lines = []
        for q in range(queries):
            topic = TOPICS[q % len(TOPICS)]
            for i in range(per_query):
                text = f"Part {i + 1} of the article about {topic}: rate limiting and retries."
                lines.append(
                    json.dumps(
                        {
                            "_id": f"d{q}-{i}",
                            "title": f"Article {q}: {topic}",
                            "text": text,
                            "parent_id": f"article-{q}",
                            "chunk_index": i,
                        }
                    )
                )
            lines += [
                json.dumps(
                    {
                        "_id": f"noise{q}-{r}",
                        "title": f"Unrelated page {r}",
                        "text": "Something else entirely.",
                    }
                )
                for r in range(3)
            ]
        corpus_path.write_text("\n".join(lines) + "\n")
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session,
            name=name,
            qrels=tmp / f"{name}.qrels",
            queries=texts,
            corpus=corpus_path,
        )
        stored = runs.import_run(
            session=session,
            golden=golden,
            name="run",
            path=tmp / f"{name}.trec",
            source_name="run.trec",
        )
        triage = triages.create_triage(
            session=session, run=stored, golden=golden, depth=10, k=1, user=None, overlap=overlap
        )
    return golden, stored, triage


def make_people(engine: Engine, *names_and_roles: tuple[str, Role]) -> dict[str, User]:
    """Accounts named ``<name>@example.com``; a name starting with "adj" gets the
    adjudicator flag."""
    with Session(engine, expire_on_commit=False) as session:
        return {
            name: users.create_user(
                session=session,
                email=f"{name}@example.com",
                password="long enough",
                role=role,
                adjudicator=name.startswith("adj"),
            )
            for name, role in names_and_roles
        }
