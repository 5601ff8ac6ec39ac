"""The triage dashboard's page: what it shows and the links it repeats per row.

A link built with ``url_for`` walks the application's routes (0.1-0.3 ms each): at 300 links a
page that was most of the dashboard's time. The links repeated per row are built as a prefix
(and suffix) around the one part that changes, once per application (``path_for``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fastapi import Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from app.exporters import REGISTRY, Tracker, missing_credentials
from app.http.deps import Principal
from app.http.links import in_path, path_segment
from app.models import Role
from app.models.agreement_public import AgreementPublic
from app.models.exports import ExportOutcome, ExportRecord
from app.models.triage_public import ClosureReport, HintReport, TriageContext
from app.services.delivery import exports as export_service
from app.services.queue.lifecycle import Stage
from app.services.queue.skips import Skip
from app.services.triage import agreement, carry, closure, dashboard, dashboard_lists, kept
from app.services.triage.dashboard import BacklogRow, Lease, Throughput
from app.settings import Settings
from app.web.render import (
    BY_PARAMETER,
    context_of,
    is_fragment_request,
    path_for,
    read_flash,
    render,
)

#: Stands for the changing part of a link while its prefix is built: digits only (an integer
#: path parameter takes it) and long enough to appear nowhere else in a path.
_SENTINEL = 987_654_321_987


@dataclass(frozen=True)
class ExportPanel:
    """The export form on the dashboard: what was entered, why it was refused, or what a
    dry run would send."""

    tracker: str = Tracker.GITHUB.value
    target: str = ""
    error: str | None = None
    outcome: ExportOutcome | None = None
    #: What a push did, in a sentence shown in the panel; ``failed`` when a cause failed.
    message: str | None = None
    failed: bool = False


#: The flash form field that marks a push's message as the export panel's (its sentence is
#: shown in the panel, where the redirect's ``#export`` scrolls, not at the top of the page).
EXPORT_FLASH = "export_tracker"


def export_flash(tracker: str, target: str) -> dict[str, str]:
    """What a push's redirect carries in its flash to fill the form in again."""
    return {EXPORT_FLASH: tracker, "export_target": target}


def export_from_flash(request: Request) -> ExportPanel | None:
    """The export panel a push's redirect left for the dashboard: the tracker and target
    entered and the sentence saying what happened; None when the flash is not a push's."""
    flash = read_flash(request)
    if flash is None or EXPORT_FLASH not in flash.form:
        return None
    return ExportPanel(
        tracker=flash.form[EXPORT_FLASH],
        target=flash.form.get("export_target", ""),
        message=flash.text,
        failed=flash.kind == "error",
    )


@dataclass(frozen=True)
class ExportPanelPage:
    """What the ``export_panel`` block of ``triage.html`` receives (an HTMX export answer)."""

    ctx: TriageContext
    trackers: list[Tracker]
    tracker_names: dict[Tracker, str]
    exports: list[ExportRecord]
    export: ExportPanel
    credentials: dict[Tracker, tuple[str, ...]]
    missing: dict[Tracker, list[str]]


def export_panel(
    request: Request,
    session: Session,
    settings: Settings,
    now: datetime,
    principal: Principal,
    ctx: TriageContext,
    *,
    export: ExportPanel,
    status: int = 200,
    error_code: str | None = None,
) -> HTMLResponse:
    """An export's answer: for HTMX the panel alone (swapped in place, so the result is in
    view), otherwise the whole dashboard with the panel filled in."""
    if not is_fragment_request(request):
        return dashboard_page(
            request,
            session,
            settings,
            now,
            principal,
            ctx,
            export=export,
            status=status,
            error_code=error_code,
        )
    page = ExportPanelPage(
        ctx=ctx,
        trackers=list(Tracker),
        tracker_names={t: REGISTRY[t].title for t in Tracker},
        exports=export_service.stored(session=session, triage=ctx.triage),
        export=export,
        credentials={t: REGISTRY[t].credentials for t in Tracker},
        missing={t: missing_credentials(t, settings) for t in Tracker},
    )
    return render(
        request,
        "triage.html",
        context_of(page),
        principal=principal,
        status=status,
        error_code=error_code,
        block="export_panel",
    )


@dataclass(frozen=True)
class Around:
    """A link with one changing part: ``prefix + part + suffix``; for a name people gave, the
    route's query-parameter form too (``by_parameter + part``), for the names a browser
    drops from a path (app.http.links)."""

    prefix: str
    suffix: str = ""
    by_parameter: str = ""

    def link(self, name: str) -> str:
        """The link to the page of ``name``, percent-encoded (``render.name_path``'s rule)."""
        if in_path(name) or not self.by_parameter:
            return f"{self.prefix}{path_segment(name)}{self.suffix}"
        return f"{self.by_parameter}{path_segment(name)}"


def around(request: Request, name: str, part: str, /, **params: object) -> Around:
    """The link of route ``name`` split around its path parameter ``part`` (the others in
    ``params``). The changing part is given to it already quoted by the template
    (``|segment``, or ``Around.link``), as ``url_for`` takes it."""
    path = path_for(request, name, **params, **{part: _SENTINEL})
    prefix, found, suffix = path.rpartition(str(_SENTINEL))
    if not found:  # a route that changes its parameter: no prefix to reuse
        raise ValueError(f"the route {name} does not keep its {part} as given")
    return Around(prefix, suffix)


def around_name(request: Request, name: str, part: str, /, **params: object) -> Around:
    """``around`` for a route that takes a name people gave (``{part:path}``), with its
    query-parameter form ``name + "_by_parameter"``."""
    found = around(request, name, part, **params)
    by_parameter = path_for(request, name + BY_PARAMETER, **params)
    return Around(found.prefix, found.suffix, f"{by_parameter}?{path_segment(part)}=")


@dataclass(frozen=True)
class Links:
    """The dashboard's repeated links, each built once per page."""

    query: Around
    document: Around
    miss: Around
    release: Around
    backlog: str


def dashboard_links(request: Request, ctx: TriageContext) -> Links:
    """The links the dashboard repeats per row, for this triage's run and golden set."""
    return Links(
        query=around_name(request, "query_page", "qid", run_id=ctx.run.id),
        document=around_name(request, "document_page", "doc_id", golden_set_id=ctx.golden.id),
        miss=around(request, "miss_page", "miss_id"),
        release=around(request, "release_lease_form", "miss_id", triage_id=ctx.triage.id),
        backlog=path_for(request, "backlog_page", triage_id=ctx.triage.id),
    )


@dataclass(frozen=True)
class DashboardPage:
    """What ``triage.html`` receives: every count on it comes from the queue's tally (the
    closure report is made from it)."""

    #: The triage, its run and golden set (``triage``, ``run``, ``golden`` in the template).
    ctx: TriageContext
    summary: ClosureReport
    largest: int
    residue: list[BacklogRow]
    residue_total: int
    texts: dict[str, str]
    throughput: list[Throughput]
    hints: HintReport
    #: Leads only: it names reviewers and their disagreements.
    agreement: AgreementPublic | None
    agreement_current: bool
    covered_on_queue: int
    #: The triage whose labels this one carries (with its run), when it carries some.
    carried_origin: TriageContext | None
    leases: list[Lease]
    labelled: int
    queued: int
    reviewing: int
    is_lead: bool
    adjudicates: bool
    links: Links
    trackers: list[Tracker]
    tracker_names: dict[Tracker, str]
    exports: list[ExportRecord]
    export: ExportPanel
    credentials: dict[Tracker, tuple[str, ...]]
    missing: dict[Tracker, list[str]]
    skipped: list[Skip]
    skipped_total: int


def dashboard_page(
    request: Request,
    session: Session,
    settings: Settings,
    now: datetime,
    principal: Principal,
    ctx: TriageContext,
    *,
    export: ExportPanel | None = None,
    status: int = 200,
    error_code: str | None = None,
) -> HTMLResponse:
    """The dashboard of ``ctx``'s triage: the closure, counts per cause, the residue, skips,
    hints, agreement (leads), reviewers, live leases and the export panel (leads)."""
    context: dict[str, object] = {}
    if export is None and (export := export_from_flash(request)) is not None:
        context["flash"] = None  # the push's sentence is shown in the panel instead
    page = dashboard_context(request, session, settings, now, principal, ctx, export=export)
    return render(
        request,
        "triage.html",
        context_of(page) | context,
        principal=principal,
        status=status,
        error_code=error_code,
    )


def dashboard_context(
    request: Request,
    session: Session,
    settings: Settings,
    now: datetime,
    principal: Principal,
    ctx: TriageContext,
    *,
    export: ExportPanel | None = None,
) -> DashboardPage:
    """``DashboardPage`` of ``ctx``'s triage for ``principal``."""
    triage = ctx.triage
    tally = closure.tally_of(session=session, triage=triage, causes=ctx.causes)
    key = kept.label_key(session, triage, tally)
    # asked for once: the closure sentence quotes it, the lead's panel shows it
    measured, current = (
        agreement.dashboard_agreement(session=session, triage=triage, causes=ctx.causes, key=key)
        if triage.reviewers > 1
        else (None, True)
    )
    panels = dashboard.label_panels(session=session, triage=triage, key=key)
    summary = closure.closure_report(
        session=session,
        triage=triage,
        causes=ctx.causes,
        agreement=True,
        measured=measured,
        tally=tally,
    )
    lists = dashboard_lists.label_lists(session=session, triage=triage, golden=ctx.golden, key=key)
    largest = max([*summary.counts.values(), summary.other, summary.unlabelled, 1])
    return DashboardPage(
        ctx=ctx,
        summary=summary,
        largest=largest,
        residue=lists.residue,
        residue_total=tally.residue,
        texts=lists.texts,
        throughput=panels.throughput,
        hints=panels.hints,
        agreement=measured if principal.role.allows(Role.LEAD) else None,
        agreement_current=current,
        covered_on_queue=panels.covered_on_queue,
        carried_origin=carry.origin_context(session=session, triage=triage)
        if summary.carried
        else None,
        leases=dashboard.live_leases(session=session, triage=triage, now=now),
        labelled=tally.labelled,
        queued=tally.queued,
        reviewing=tally.stages[Stage.REVIEWING],
        is_lead=principal.role.allows_lead,
        adjudicates=principal.user.adjudicates,
        links=dashboard_links(request, ctx),
        trackers=list(Tracker),
        tracker_names={t: REGISTRY[t].title for t in Tracker},
        exports=export_service.stored(session=session, triage=triage),
        export=export or ExportPanel(),
        credentials={t: REGISTRY[t].credentials for t in Tracker},
        missing={t: missing_credentials(t, settings) for t in Tracker},
        skipped=lists.skipped,
        skipped_total=lists.skipped_total,
    )
