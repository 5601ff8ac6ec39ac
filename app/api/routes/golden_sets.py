"""/api/v1/golden-sets: import, list, get, delete; and their runs."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Path, Response, UploadFile
from pydantic import BaseModel

from app.eval import Gain, Order
from app.eval.conventions import DEFAULT_DEPTH, DEFAULT_K
from app.http.deps import LeadDep, ReviewerDep, SessionDep, SettingsDep
from app.http.params import Cutoff, Id, Page, PerPage
from app.http.uploads import saved_uploads
from app.models.golden import GoldenSetPublic
from app.models.runs import RunPublic
from app.readmodel import PageOf, paged
from app.services.delivery import events
from app.services.errors import Invalid
from app.services.imports import golden_sets as service
from app.services.imports import profile_import
from app.services.imports import runs as run_service
from app.services.imports import series as series_service
from app.services.paging import DEFAULT_PER_PAGE
from app.services.views.series import SeriesHistory, series_history

router = APIRouter(prefix="/golden-sets", tags=["golden-sets"])


@router.post("", status_code=201)
def import_golden_set(
    session: SessionDep,
    principal: LeadDep,
    name: Annotated[str, Form()],
    qrels: UploadFile,
    queries: UploadFile | None = None,
    corpus: UploadFile | None = None,
    manifest: UploadFile | None = None,
    min_grade: Annotated[int, Form()] = 1,
    description: Annotated[str, Form()] = "",
) -> GoldenSetPublic:
    """Import judgments (TREC qrels or BEIR TSV, plain or gzip), optional query texts and an
    optional corpus (BEIR corpus.jsonl) with an optional index manifest (the ids the index
    holds, one a line). All or nothing: a bad file answers 400 naming its line and leaves no
    rows."""
    with saved_uploads(qrels, queries, corpus, manifest) as saved:
        qrels_path, queries_path, corpus_path, manifest_path = saved.paths
        if qrels_path is None:
            raise Invalid("a qrels file is needed", code="qrels_required")
        golden = service.import_golden_set(
            session=session,
            name=name,
            qrels=qrels_path,
            queries=queries_path,
            corpus=corpus_path,
            manifest=manifest_path,
            min_grade=min_grade,
            description=description,
            user=principal.user,
            source_names=saved.names,
        )
    return GoldenSetPublic.of(golden)


@router.get("")
def list_golden_sets(
    session: SessionDep,
    principal: ReviewerDep,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
) -> PageOf[GoldenSetPublic]:
    items = service.list_golden_sets(session=session)
    return paged([GoldenSetPublic.of(g) for g in items], page, per_page)


@router.get("/{golden_set_id}")
def get_golden_set(
    session: SessionDep, principal: ReviewerDep, golden_set_id: Id
) -> GoldenSetPublic:
    return GoldenSetPublic.of(service.get_golden_set(session=session, golden_set_id=golden_set_id))


@router.delete("/{golden_set_id}", status_code=204)
def delete_golden_set(session: SessionDep, principal: LeadDep, golden_set_id: Id) -> Response:
    service.delete_golden_set(session=session, golden_set_id=golden_set_id)
    return Response(status_code=204)


@router.post("/{golden_set_id}/runs", status_code=201)
def import_run(
    session: SessionDep,
    settings: SettingsDep,
    principal: LeadDep,
    golden_set_id: Id,
    name: Annotated[str, Form()],
    run: UploadFile,
    format: Annotated[str | None, Form()] = None,
    order: Annotated[Order, Form()] = Order.TREC_EVAL,
    description: Annotated[str, Form()] = "",
    kind: Annotated[Literal["judged", "log"], Form()] = "judged",
    series: Annotated[str, Form(max_length=1000)] = "",
    meta: Annotated[str, Form(max_length=20000)] = "",
    columns: Annotated[str, Form(max_length=2000)] = "",
) -> RunPublic:
    """Import a run (TREC, JSONL or Parquet, plain or gzip; format detected when absent;
    ``columns`` names a Parquet file's column of each field, ``qid=query_id, doc_id=docid,
    score=bm25, rank=position``, where they are not qid, doc_id, score, rank). ``kind=log``:
    production query-log results without judgments for their queries (every query kept;
    cluster measures only, ``GET /api/v1/runs/{id}/clusters``). A log run may also come as
    its per-query cluster profile, the output of docs/sql/unique_clusters.sql (CSV, plain or
    gzip, or Parquet, with the columns ``qid, k, distinct_clusters, results, clustered``;
    ``format=cluster_profile``, or detected by those columns): its clusters are then known
    at the file's ks only (``exact_ks``), without a cost side; ``kind=judged`` is refused
    (422 ``profile_is_log``), a bad file answers 400 ``bad_input`` naming its line.
    ``series`` names the configuration it is one evaluation of ("bm25-main",
    "feature/login": any name without control characters), ``meta`` its provenance as a
    JSON object of strings (``{"commit": "abc123", "branch": "main", "time": "..."}``). A
    log run takes no series (422 ``log_run_series``). The run's cluster figures come from the
    one clustering it names: when a detector run is applied (or cluster ids imported) while
    the file is read, it is read again with the new clusters; when they changed during each
    of three reads, 409 ``clusters_changed``, nothing stored (import it again)."""
    golden = service.get_golden_set(session=session, golden_set_id=golden_set_id)
    with saved_uploads(run) as saved:
        (path,) = saved.paths
        if path is None:
            raise Invalid("a run file is needed", code="run_required")
        if profile_import.is_profile_upload(path, format or None):
            stored = profile_import.import_cluster_profile(
                session=session,
                golden=golden,
                name=name,
                path=path,
                source_name=run.filename or "run",
                kind=kind,
                description=description,
                user=principal.user,
                series=series,
                meta=series_service.meta_from_json(meta),
            )
            return RunPublic.of(stored)
        stored = run_service.import_run(
            session=session,
            golden=golden,
            name=name,
            path=path,
            source_name=run.filename or "run",
            fmt=format or None,
            order=order,
            description=description,
            keep_depth=settings.keep_depth,
            user=principal.user,
            kind=kind,
            series=series,
            meta=series_service.meta_from_json(meta),
            columns=run_service.parse_columns(columns),
        )
    return RunPublic.of(stored)


@router.get("/{golden_set_id}/runs")
def list_runs(
    session: SessionDep,
    principal: ReviewerDep,
    golden_set_id: Id,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
) -> PageOf[RunPublic]:
    golden = service.get_golden_set(session=session, golden_set_id=golden_set_id)
    runs = run_service.list_runs(session=session, golden=golden)
    return paged([RunPublic.of(r) for r in runs], page, per_page)


class SeriesSummary(BaseModel):
    name: str
    runs: int


@router.get("/{golden_set_id}/series")
def list_series(
    session: SessionDep,
    principal: ReviewerDep,
    golden_set_id: Id,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
) -> PageOf[SeriesSummary]:
    """The golden set's series, by name, with their number of runs."""
    golden = service.get_golden_set(session=session, golden_set_id=golden_set_id)
    found = series_service.series_names(session=session, golden=golden)
    return paged([SeriesSummary(name=name, runs=runs) for name, runs in found], page, per_page)


@router.get("/{golden_set_id}/series/{name:path}")
def get_series(
    session: SessionDep,
    principal: ReviewerDep,
    golden_set_id: Id,
    name: Annotated[str, Path(min_length=1, max_length=series_service.MAX_SERIES)],
    k: Cutoff = DEFAULT_K,
    depth: Cutoff = DEFAULT_DEPTH,
    gain: Gain = Gain.EXP,
) -> SeriesHistory:
    """A series' runs oldest first (import order), each with R@k, R@depth and nDCG@k and its
    misses by cause (its latest triage at ``depth``, null when it has none); 404
    ``series_not_found``. A series holds judged runs only (a log run in one, stored before
    imports refused it, is left out).

    ``name`` is the series name as one percent-encoded path segment, every character but
    ``A-Z a-z 0-9 - . _ ~`` encoded: ``feature/login`` is ``feature%2Flogin`` (a ``/`` sent
    as it is works too), ``a?b#c`` is ``a%3Fb%23c``, ``100%`` is ``100%25``. The names ``.``
    and ``..`` go as ``%2E`` and ``%2E%2E``: clients drop the plain segments before sending
    (httpx, curl and urllib3 remove ``..`` and ``.``; they send ``%2E%2E`` as it is, and so
    does curl with ``--path-as-is``), while the server decodes ``%2E%2E`` to ``..``."""
    golden = service.get_golden_set(session=session, golden_set_id=golden_set_id)
    return series_history(session=session, golden=golden, series=name, k=k, depth=depth, gain=gain)


class CausesBody(BaseModel):
    causes: list[str]


@router.put("/{golden_set_id}/causes")
def set_causes(
    session: SessionDep, principal: LeadDep, golden_set_id: Id, body: CausesBody
) -> GoldenSetPublic:
    """Rename or add causes (``other`` is built in); 409 once labelling has started."""
    golden = service.get_golden_set(session=session, golden_set_id=golden_set_id)
    return GoldenSetPublic.of(
        service.set_causes(session=session, golden=golden, causes=body.causes)
    )


class WebhookBody(BaseModel):
    url: str | None = None
    events: list[str] = []


@router.put("/{golden_set_id}/webhook")
def set_webhook(
    session: SessionDep,
    settings: SettingsDep,
    principal: LeadDep,
    golden_set_id: Id,
    body: WebhookBody,
) -> GoldenSetPublic:
    """Post ``miss.labelled`` and/or ``triage.closed`` events of this golden set's triages to
    ``url``, signed with MISSTRIAGE_WEBHOOK_SECRET (HMAC-SHA256); ``url`` null turns it off."""
    golden = service.get_golden_set(session=session, golden_set_id=golden_set_id)
    return GoldenSetPublic.of(
        events.configure(
            session=session,
            golden=golden,
            url=body.url,
            events=body.events,
            allow_local=settings.allow_local_network,
        )
    )
