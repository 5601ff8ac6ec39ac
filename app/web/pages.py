"""Golden sets, runs with their metrics, and triages, as HTML pages."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated

from fastapi import APIRouter, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session

from app.eval import Order
from app.eval.conventions import (
    DEFAULT_DEPTH,
    DEFAULT_K,
    DEFAULT_MIN_GRADE,
    MAX_CUTOFF,
)
from app.eval.values import INT32_MAX, INT32_MIN
from app.http.deps import LeadDep, Principal, ReviewerDep, SessionDep, SettingsDep
from app.http.params import Id
from app.http.uploads import saved_uploads
from app.models import JUDGED, LOG, Role
from app.models.golden import GoldenSetPublic
from app.models.triage_public import Overlap
from app.services.delivery import events
from app.services.errors import Invalid, ServiceError
from app.services.imports import golden_sets as golden_service
from app.services.imports import runs as run_service
from app.services.imports.profile_import import (
    PROFILE_FORMAT,
    import_cluster_profile,
    is_profile_upload,
)
from app.services.imports.series import parse_meta_pairs
from app.services.triage import triages as triage_service
from app.web.forms import Fields
from app.web.progress import new_import_id, tracking
from app.web.render import redirect, render

router = APIRouter(include_in_schema=False)


class RunKind(StrEnum):
    """The import form's kind: a judged run, or a log run (no judgments, clusters only)."""

    JUDGED = JUDGED
    LOG = LOG


class RunFormat(StrEnum):
    """The import form's format choice; empty means detect."""

    DETECT = ""
    TREC = "trec"
    JSONL = "jsonl"
    PARQUET = "parquet"
    #: a log run's per-query cluster profile (docs/sql/unique_clusters.sql's output)
    CLUSTER_PROFILE = PROFILE_FORMAT


@router.get("/", name="home")
def home(request: Request, principal: ReviewerDep) -> Response:
    return RedirectResponse(request.url_for("golden_sets_page").path, status_code=303)


def _golden_sets(
    request: Request,
    session: Session,
    principal: Principal,
    *,
    error: str | None = None,
    form: Mapping[str, str | int] | None = None,
    status: int = 200,
    error_code: str | None = None,
) -> HTMLResponse:
    return render(
        request,
        "golden_sets.html",
        {
            "golden_sets": [
                GoldenSetPublic.of(g) for g in golden_service.list_golden_sets(session=session)
            ],
            "can_import": principal.role.allows(Role.LEAD),
            "error": error,
            "form": form or {"name": "", "min_grade": 1},
            "import_id": new_import_id(),
        },
        principal=principal,
        status=status,
        error_code=error_code,
    )


@router.get("/golden-sets", name="golden_sets_page")
def golden_sets_page(request: Request, session: SessionDep, principal: ReviewerDep) -> HTMLResponse:
    return _golden_sets(request, session, principal)


@router.post("/golden-sets", name="import_golden_set_form")
def import_golden_set(
    request: Request,
    session: SessionDep,
    principal: LeadDep,
    name: Annotated[str, Form()],
    qrels: UploadFile,
    queries: UploadFile | None = None,
    corpus: UploadFile | None = None,
    manifest: UploadFile | None = None,
    min_grade: Annotated[str, Form()] = "",
    import_id: Annotated[str, Form()] = "",
) -> Response:
    form = {"name": name, "min_grade": min_grade}
    fields = Fields()
    grade = fields.integer(
        # the service's bounds, as the API's (one rule whichever face takes the form)
        "min_grade",
        min_grade,
        default=DEFAULT_MIN_GRADE,
        minimum=INT32_MIN,
        maximum=INT32_MAX,
    )
    try:
        if fields.errors:
            raise Invalid(fields.errors["min_grade"], code="invalid_min_grade")
        with (
            saved_uploads(qrels, queries, corpus, manifest) as saved,
            tracking(import_id, principal.user.id, saved.paths[:1]) as progress,
        ):
            qrels_path, queries_path, corpus_path, manifest_path = saved.paths
            if qrels_path is None:
                raise ServiceError("Choose a judgments file.", code="qrels_required")
            golden = golden_service.import_golden_set(
                progress=progress,
                session=session,
                name=name,
                qrels=qrels_path,
                queries=queries_path,
                corpus=corpus_path,
                manifest=manifest_path,
                min_grade=grade,
                user=principal.user,
                source_names=saved.names,
            )
    except ServiceError as exc:
        return _golden_sets(
            request,
            session,
            principal,
            error=exc.message,
            form=form,
            status=exc.status,
            error_code=exc.code,
        )
    return redirect(
        request,
        request.url_for("golden_set_page", golden_set_id=golden.id).path,
        flash=f"golden set `{golden.name}` imported: {golden.queries:,} queries, "
        f"{golden.judgments:,} judgments",
    )


def _back_to_golden_set(
    request: Request,
    golden_id: int | None,
    message: str,
    *,
    kind: str = "ok",
    form: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    error_code: str | None = None,
) -> Response:
    """Post/redirect/get back to the golden-set page, saying what happened."""
    url = request.url_for("golden_set_page", golden_set_id=golden_id)
    if params:
        url = url.include_query_params(**params)
    # A path, not the Host header's URL (links never come from the Host header).
    where = url.path + (f"?{url.query}" if url.query else "")
    response = redirect(request, where, flash=message, kind=kind, form=form)
    if error_code:
        response.headers["X-Error-Code"] = error_code
    return response


@router.post("/golden-sets/{golden_set_id}/runs", name="import_run_form")
def import_run(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: LeadDep,
    golden_set_id: Id,
    name: Annotated[str, Form()],
    run: UploadFile,
    format: Annotated[str, Form()] = "",
    order: Annotated[str, Form()] = "",
    kind: Annotated[str, Form()] = "",
    import_id: Annotated[str, Form()] = "",
    series: Annotated[str, Form()] = "",
    meta: Annotated[str, Form()] = "",
    columns: Annotated[str, Form()] = "",
) -> Response:
    golden = golden_service.get_golden_set(session=session, golden_set_id=golden_set_id)
    form = {
        "columns": columns[:2000],
        "name": name[:200],
        "format": format[:20],
        "order": order[:20],
        "kind": kind[:20],
        "series": series[:200],
        "meta": meta[:10000],
    }
    fields = Fields()
    fmt = fields.choice("format", format, RunFormat, default=RunFormat.DETECT)
    run_order = fields.choice("order", order, Order, default=Order.TREC_EVAL)
    run_kind = fields.choice("kind", kind, RunKind, default=RunKind.JUDGED)
    try:
        if fields.errors:
            raise Invalid(next(iter(fields.errors.values())), code="invalid_form")
        with (
            saved_uploads(run) as saved,
            tracking(import_id, principal.user.id, saved.paths) as progress,
        ):
            (path,) = saved.paths
            if path is None:
                raise ServiceError("Choose a run file.", code="run_required")
            if is_profile_upload(path, fmt.value or None):
                imported = import_cluster_profile(
                    session=session,
                    golden=golden,
                    name=name,
                    path=path,
                    source_name=run.filename or "run",
                    kind=run_kind.value,
                    user=principal.user,
                    series=series,
                    meta=parse_meta_pairs(meta.splitlines()),
                )
            else:
                imported = run_service.import_run(
                    columns=run_service.parse_columns(columns[:2000]),
                    progress=progress,
                    session=session,
                    golden=golden,
                    name=name,
                    path=path,
                    source_name=run.filename or "run",
                    fmt=fmt.value or None,
                    order=run_order,
                    keep_depth=settings.keep_depth,
                    user=principal.user,
                    kind=run_kind.value,
                    series=series,
                    meta=parse_meta_pairs(meta.splitlines()),
                )
    except ServiceError as exc:
        return _back_to_golden_set(
            request,
            golden.id,
            f"run not imported: {exc.message}",
            kind="error",
            form=form,
            error_code=exc.code,
        )
    if imported.kind == LOG:
        return redirect(
            request,
            request.url_for("run_clusters_page", run_id=imported.id).path,
            flash=f"log run `{imported.name}` imported: {imported.queries:,} queries, "
            f"{imported.lines:,} lines (no judgments: cluster measures only)",
        )
    return _back_to_golden_set(
        request,
        golden.id,
        f"run `{imported.name}` imported: {imported.queries:,} queries, {imported.lines:,} lines",
    )


@router.post("/runs/{run_id}/triages", name="create_triage_form")
def create_triage(
    request: Request,
    session: SessionDep,
    principal: LeadDep,
    run_id: Id,
    depth: Annotated[str, Form()] = "",
    k: Annotated[str, Form()] = "",
    reviewers: Annotated[str, Form()] = "",
    share: Annotated[str, Form()] = "",
    seed: Annotated[str, Form()] = "",
) -> Response:
    """A triage at the depth and k the golden-set page showed (its hidden fields), with
    ``reviewers`` distinct reviewers (double review; 1 when empty) on ``share`` percent of
    the misses (a sample drawn with ``seed``; every miss when empty)."""
    context = run_service.run_context(session=session, run_id=run_id)
    fields = Fields()
    cut_k = fields.integer("k", k, default=DEFAULT_K, minimum=1, maximum=MAX_CUTOFF)
    cut_depth = fields.integer("depth", depth, default=DEFAULT_DEPTH, minimum=1, maximum=MAX_CUTOFF)
    per_miss = fields.integer("reviewers", reviewers, default=1, minimum=1, maximum=3)
    percent = fields.integer("share", share, default=100, minimum=1, maximum=100)
    sample_seed = fields.integer("seed", seed, default=0, minimum=0, maximum=2**31 - 1)
    try:
        if fields.errors:
            overlap_fields = {"reviewers", "share", "seed"}
            code = "invalid_overlap" if overlap_fields & set(fields.errors) else "invalid_cutoff"
            raise Invalid(next(iter(fields.errors.values())), code=code)
        triage = triage_service.create_triage(
            session=session,
            run=context.run,
            golden=context.golden,
            depth=cut_depth,
            k=cut_k,
            user=principal.user,
            overlap=Overlap(reviewers=per_miss, fraction=percent / 100, seed=sample_seed),
        )
    except ServiceError as exc:
        return _back_to_golden_set(
            request,
            context.golden.id,
            f"triage not created: {exc.message}",
            kind="error",
            params={"k": k[:20], "depth": depth[:20]},
            error_code=exc.code,
        )
    return redirect(
        request,
        request.url_for("triage_page", triage_id=triage.id).path,
        flash=f"triage created: depth {triage.depth}, k {triage.k}, {triage.misses:,} misses"
        + (
            f", {triage.reviewers} reviewers per miss"
            + (f" on {percent}% of them (seed {sample_seed})" if percent < 100 else "")
            if triage.reviewers > 1
            else ""
        ),
    )


@router.post("/golden-sets/{golden_set_id}/settings", name="golden_set_settings_form")
def golden_set_settings(
    request: Request,
    session: SessionDep,
    principal: LeadDep,
    golden_set_id: Id,
    causes: Annotated[str, Form()] = "",
    webhook_url: Annotated[str, Form()] = "",
    webhook_events: Annotated[list[str] | None, Form()] = None,
    webhook_remove: Annotated[bool, Form()] = False,
) -> Response:
    """Rename or add causes (until labelling starts) and choose the webhook events. The form
    never shows the webhook's URL (it may be its secret): an empty field keeps the URL set,
    a new one replaces it, ``webhook_remove`` turns the webhook off."""
    golden = golden_service.get_golden_set(session=session, golden_set_id=golden_set_id)
    typed = webhook_url.strip()
    try:
        wanted = [c.strip() for c in causes.split(",") if c.strip()]
        if wanted != list(golden.causes):
            golden = golden_service.set_causes(session=session, golden=golden, causes=wanted)
        events.configure(
            session=session,
            golden=golden,
            url=None if webhook_remove else (typed or golden.webhook_url),
            events=webhook_events or [],
            allow_local=request.app.state.settings.allow_local_network,
        )
    except ServiceError as exc:
        return _back_to_golden_set(
            request,
            golden.id,
            f"settings not saved: {exc.message}",
            kind="error",
            error_code=exc.code,
        )
    hook = "on" if golden.webhook_url else "off"
    return _back_to_golden_set(
        request,
        golden.id,
        f"settings saved: causes {', '.join(golden.causes)}; webhook {hook}",
    )
