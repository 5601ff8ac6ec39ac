"""The query page (one query under one run) and the document page (one document of a golden
set): where every query id and document id links.

An id is taken as a percent-encoded path segment (``{qid:path}``: ``a%2F..%2Fb`` is the id
``a/../b``), or as a query parameter (``/runs/1/queries?qid=..``), the form that reaches the
ids ``.`` and ``..``, which a browser drops from a path (app.http.links)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse

from app.http.deps import ReviewerDep, SessionDep
from app.http.params import Id
from app.models.golden import GoldenSetPublic
from app.models.runs import RunPublic
from app.services.views import lookup
from app.web.forms import View, read_view, refuse_bad_view
from app.web.render import render

router = APIRouter(include_in_schema=False)


@router.get("/runs/{run_id}/queries/{qid:path}", name="query_page")
def query_page(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    run_id: Id,
    qid: str,
    view: Annotated[View, Depends(read_view)],
) -> HTMLResponse:
    """The query's text, its measures and diagnosis under the run at the run page's k and
    depth, its judged documents with the rank the run gave each, and the run's head."""
    return _query(request, session, principal, run_id, qid, view)


@router.get("/runs/{run_id}/queries", name="query_page_by_parameter")
def query_page_by_parameter(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    run_id: Id,
    qid: Annotated[str, Query(min_length=1)],
    view: Annotated[View, Depends(read_view)],
) -> HTMLResponse:
    """The query page of the query id ``?qid=`` (any id, ``..`` too)."""
    return _query(request, session, principal, run_id, qid, view)


def _query(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    run_id: int,
    qid: str,
    view: View,
) -> HTMLResponse:
    refuse_bad_view(view)
    detail = lookup.query_detail(
        session=session, run_id=run_id, qid=qid, k=view.k, depth=view.depth, gain=view.gain
    )
    return render(
        request,
        "query.html",
        {
            "detail": detail,
            "run": RunPublic.of(detail.context.run),
            "golden": GoldenSetPublic.of(detail.context.golden),
        },
        principal=principal,
    )


@router.get("/golden-sets/{golden_set_id}/documents/{doc_id:path}", name="document_page")
def document_page(
    request: Request, session: SessionDep, principal: ReviewerDep, golden_set_id: Id, doc_id: str
) -> HTMLResponse:
    """The document's title and text, its place in the corpus, its judgments and the ranks
    the golden set's runs gave it."""
    return _document(request, session, principal, golden_set_id, doc_id)


@router.get("/golden-sets/{golden_set_id}/documents", name="document_page_by_parameter")
def document_page_by_parameter(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    golden_set_id: Id,
    doc_id: Annotated[str, Query(min_length=1)],
) -> HTMLResponse:
    """The document page of the document id ``?doc_id=`` (any id, ``..`` too)."""
    return _document(request, session, principal, golden_set_id, doc_id)


def _document(
    request: Request, session: SessionDep, principal: ReviewerDep, golden_set_id: int, doc_id: str
) -> HTMLResponse:
    detail = lookup.document_detail(session=session, golden_set_id=golden_set_id, doc_id=doc_id)
    return render(
        request,
        "document.html",
        {"detail": detail, "golden": GoldenSetPublic.of(detail.golden)},
        principal=principal,
    )
