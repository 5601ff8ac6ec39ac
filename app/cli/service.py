"""Commands that work on the service's database: serve, db, users, tokens, imports, triage."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from app.cli import workers as balanced_workers
from app.cli.params import (
    DEFAULT_DEPTH,
    DEFAULT_K,
    INT32_MAX,
    ORDERS,
    ROLES,
    TRACKERS,
    FiniteFloatRange,
)

if TYPE_CHECKING:
    from sqlmodel import Session

    from app.models import GoldenSet
    from app.settings import Settings

# The database, web and evaluation stacks are imported in the commands' bodies: a command's
# --help loads click and this module alone (tests/cli/test_cli_help.py, benchmarks/cli_help.py).

#: A row id option: within the database's integers, so a larger one is a usage error (exit 2).
ROW_ID = click.IntRange(1, INT32_MAX)
#: A TCP port.
PORT = click.IntRange(0, 65535)


def _fail(message: str, status: int = 1) -> NoReturn:
    click.echo(f"misstriage: error: {message}", err=True)
    sys.exit(status)


def _settings() -> Settings:
    from app.settings import get_settings

    try:
        return get_settings()
    except ValueError as exc:
        _fail(str(exc), 2)


def upgrade(settings: Settings) -> None:
    """Migrate the database to the latest schema (Alembic, imported only here)."""
    from app.migrate import upgrade as migrate

    migrate(settings)


@contextmanager
def database() -> Iterator[Session]:
    """A session on the migrated database; service errors become one line: exit 2 for bad
    input (a file, a value), 1 for the rest (a name taken, nothing found)."""
    from sqlmodel import Session

    from app.db import make_engine
    from app.eval import InputError
    from app.eval.textio import decompression_limit
    from app.services.errors import BadInput, Invalid, ServiceError

    settings = _settings()
    upgrade(settings)
    engine = make_engine(settings)
    try:
        with (
            decompression_limit(settings.decompression_limit()),
            Session(engine, expire_on_commit=False) as session,
        ):
            yield session
    except (BadInput, Invalid) as exc:
        _fail(exc.message, 2)
    except ServiceError as exc:
        _fail(exc.message)
    except InputError as exc:
        _fail(str(exc), 2)
    finally:
        engine.dispose()


def _emit(data: dict[str, Any], output: str, text: str) -> None:
    click.echo(json.dumps(data, indent=2) if output == "json" else text)


output_option = click.option(
    "--format", "output", type=click.Choice(["text", "json"]), default="text", show_default=True
)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=PORT)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--log-format",
    type=click.Choice(["json", "text"]),
    envvar="MISSTRIAGE_LOG_FORMAT",
    help="One JSON object per line (default outside development) or readable text "
    "(default in development). Env: MISSTRIAGE_LOG_FORMAT.",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
    envvar="MISSTRIAGE_LOG_LEVEL",
)
def serve(host: str, port: int, workers: int, log_format: str | None, log_level: str) -> None:
    """Migrate the database, then serve the web UI and the API."""
    import uvicorn

    from app.http.protocol import PROTOCOL
    from app.observability import logging_config
    from app.settings import follow_listening

    settings = _settings()
    # Unset, the public URL follows --host/--port (the workers inherit the environment).
    follow_listening(host, port)
    upgrade(settings)
    if log_format is None:
        log_format = "text" if settings.environment == "development" else "json"
    options: dict[str, Any] = {
        "app": "app.main:create_app",
        "factory": True,
        "host": host,
        "port": port,
        # X-Forwarded-* are read by the app, only from MISSTRIAGE_TRUSTED_PROXIES (uvicorn's
        # own default would believe any client on 127.0.0.1).
        "proxy_headers": False,
        # uvicorn's httptools protocol with bounds on each request's head (size, count, time),
        # enforced before the app; the workers of --workers import it by this name too.
        "http": PROTOCOL,
        "log_config": logging_config("json" if log_format == "json" else "text", log_level.upper()),
        # The app writes one line per request itself (request id, user, no query string).
        "access_log": False,
    }
    if workers > 1 and settings.database_url.startswith("sqlite"):
        # measured with benchmarks/queue_http.py, 32 reviewers: p99 103-116 ms with one process,
        # 387-471 ms with two (the second process's writers sleep in SQLite's busy handler)
        click.echo(
            f"misstriage: warning: SQLite writes one transaction at a time, so {workers} "
            "processes only wait on each other (the slowest queue answers take three to four "
            "times as long as with one). Use --workers 1 with SQLite, or PostgreSQL for "
            "several processes.",
            err=True,
        )
    if workers > 1 and balanced_workers.balances():
        # a listening socket per worker: the kernel spreads connections evenly (workers.py)
        try:
            sockets = balanced_workers.bind_group(host, port, workers)
        except (balanced_workers.PortInUse, OSError) as exc:
            _fail(f"cannot listen on {host}:{port}: {exc}")
        uvicorn.Config(**options)  # sets up logging in this process, as uvicorn.run would
        click.echo(f"misstriage: serving on http://{host}:{port}/ ({workers} workers)", err=True)
        sys.exit(balanced_workers.serve(options, sockets))
    click.echo(f"misstriage: serving on http://{host}:{port}/", err=True)
    uvicorn.run(**options, workers=workers)


@click.group()
def db() -> None:
    """Database schema commands."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply every migration (Alembic upgrade head)."""
    upgrade(_settings())
    click.echo("database is at the latest schema", err=True)


@click.command("create-user")
@click.option("--email", required=True)
@click.option("--password", required=True, prompt=True, hide_input=True)
@click.option("--role", type=click.Choice(ROLES), required=True)
@click.option("--adjudicator", is_flag=True, help="May decide disputed double-review misses.")
def create_user(email: str, password: str, role: str, adjudicator: bool) -> None:
    """Create an account (exit 1 if the email exists)."""
    from app.models import AccountVia, Role
    from app.services.accounts import users as user_service

    with database() as session:
        user = user_service.create_user(
            session=session,
            email=email,
            password=password,
            role=Role(role),
            adjudicator=adjudicator,
            via=AccountVia.CLI,  # the account's audit trail starts here, as from the pages
        )
    click.echo(f"created {user.role} {user.email}", err=True)


@click.command("create-token")
@click.option("--email", required=True)
@click.option("--name", default="cli", show_default=True)
def create_token(email: str, name: str) -> None:
    """Print a new API token for a user, alone on stdout (shown once)."""
    from app.services.accounts import users as user_service

    with database() as session:
        user = user_service.get_user_by_email(session=session, email=email)
        issued = user_service.create_token(session=session, user=user, name=name)
    click.echo(issued.secret)


@click.command("import-golden-set")
@click.option("--name", required=True)
@click.option(
    "--qrels",
    "qrels",
    required=True,
    type=click.Path(path_type=Path),
    help="TREC qrels, BEIR qrels TSV, or a BEIR folder (queries and corpus too).",
)
@click.option("--queries", type=click.Path(path_type=Path))
@click.option("--corpus", type=click.Path(path_type=Path))
@click.option(
    "--manifest",
    type=click.Path(path_type=Path),
    help="The document ids the index holds, one a line (default: manifest.txt of a BEIR folder).",
)
@click.option("--split", default="test", show_default=True)
@click.option("--min-grade", default=1, show_default=True, type=int)
@output_option
def import_golden_set(
    name: str,
    qrels: Path,
    queries: Path | None,
    corpus: Path | None,
    manifest: Path | None,
    split: str,
    min_grade: int,
    output: str,
) -> None:
    """Import a golden set (all or nothing)."""
    from app.eval import InputError
    from app.eval.sources import resolve_golden
    from app.models.golden import GoldenSetPublic
    from app.services.imports import golden_sets as golden_service

    try:
        paths = resolve_golden(qrels, queries=queries, split=split)
    except InputError as exc:
        _fail(str(exc), 2)
    with database() as session:
        golden = golden_service.import_golden_set(
            session=session,
            name=name,
            qrels=paths.qrels,
            queries=paths.queries,
            corpus=corpus or paths.corpus,
            manifest=manifest or paths.manifest,
            min_grade=min_grade,
        )
    _emit(
        GoldenSetPublic.of(golden).model_dump(mode="json"),
        output,
        f"golden set {golden.id} {golden.name!r}: {golden.queries} queries, "
        f"{golden.judgments} judgments, {golden.relevant} relevant, {golden.documents} documents",
    )


def _golden_by_ref(session: Session, ref: str) -> GoldenSet:
    from sqlmodel import select

    from app.models import GoldenSet
    from app.services.imports import golden_sets as golden_service

    if ref.isascii() and ref.isdigit() and len(ref) <= 9:  # "²" is a digit to isdigit()
        return golden_service.get_golden_set(session=session, golden_set_id=int(ref))
    golden = session.exec(select(GoldenSet).where(GoldenSet.name == ref)).first()
    if golden is None:
        _fail(f"no golden set named {ref!r}")
    return golden


@click.command("import-run")
@click.option("--golden-set", "golden_ref", required=True, help="Golden set id or name.")
@click.option("--name", required=True)
@click.option("--run", "run_path", required=True, type=click.Path(path_type=Path))
@click.option(
    "--run-format",
    type=click.Choice(["trec", "jsonl", "parquet", "cluster_profile"]),
    help="Detected when absent. cluster_profile (with --log): the per-query output of "
    "docs/sql/unique_clusters.sql, CSV or Parquet.",
)
@click.option("--order", type=click.Choice(ORDERS), default="trec_eval", show_default=True)
@click.option(
    "--columns",
    default="",
    help="A Parquet run's column of each field where not qid, doc_id, score, rank: "
    "'qid=query_id, doc_id=docid, score=bm25'.",
)
@click.option(
    "--log",
    "log_run",
    is_flag=True,
    help="A log run: production query-log results without judgments (every query kept; "
    "cluster measures only).",
)
@click.option(
    "--series",
    default=None,
    help="The configuration this run is one evaluation of (e.g. bm25-main, feature/login): "
    "its series. Not with --log (a log run takes no series).",
)
@click.option(
    "--meta",
    "meta_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Provenance, repeatable: --meta commit=abc123 --meta branch=main --meta time=...",
)
@output_option
def import_run(
    golden_ref: str,
    name: str,
    run_path: Path,
    run_format: str | None,
    order: str,
    columns: str,
    log_run: bool,
    series: str | None,
    meta_pairs: tuple[str, ...],
    output: str,
) -> None:
    """Import a run into a golden set (all or nothing)."""
    from app.eval import Order
    from app.models import JUDGED, LOG
    from app.models.runs import RunPublic
    from app.services.imports import profile_import
    from app.services.imports import runs as run_service
    from app.services.imports.series import parse_meta_pairs
    from app.settings import get_settings

    with database() as session:
        golden = _golden_by_ref(session, golden_ref)
        if profile_import.is_profile_upload(run_path, run_format):
            run = profile_import.import_cluster_profile(
                session=session,
                golden=golden,
                name=name,
                path=run_path,
                source_name=run_path.name,
                kind=LOG if log_run else JUDGED,
                series=series,
                meta=parse_meta_pairs(meta_pairs),
            )
            _emit(
                RunPublic.of(run).model_dump(mode="json"),
                output,
                f"run {run.id} {run.name!r}: {run.lines} rows, {run.queries} queries "
                "(a per-query cluster profile)",
            )
            return
        run = run_service.import_run(
            session=session,
            golden=golden,
            name=name,
            path=run_path,
            source_name=run_path.name,
            fmt=run_format,
            order=Order(order),
            keep_depth=get_settings().keep_depth,
            kind=LOG if log_run else JUDGED,
            series=series,
            meta=parse_meta_pairs(meta_pairs),
            columns=run_service.parse_columns(columns),
        )
    _emit(
        RunPublic.of(run).model_dump(mode="json"),
        output,
        f"run {run.id} {run.name!r}: {run.lines} lines, {run.queries} queries",
    )


@click.command("triage")
@click.option("--run", "run_id", required=True, type=ROW_ID)
@click.option("--depth", default=DEFAULT_DEPTH, show_default=True, type=click.IntRange(min=1))
@click.option("--k", default=DEFAULT_K, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--reviewers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 3),
    help="Distinct reviewers per sampled miss (double review).",
)
@click.option(
    "--fraction",
    default=1.0,
    show_default=True,
    type=FiniteFloatRange(0.0, 1.0),
    help="Share of the misses sampled for double review, stratified by the hints.",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=click.IntRange(0, INT32_MAX),
    help="The sample's seed.",
)
@output_option
def triage(
    run_id: int, depth: int, k: int, reviewers: int, fraction: float, seed: int, output: str
) -> None:
    """Create a triage: every miss of the run at the depth, on a work queue; with
    ``--reviewers`` 2 or 3, a sample (``--fraction``, ``--seed``) gets that many reviewers."""
    from app.eval.conventions import CutoffError, check_cutoffs
    from app.models.triage_public import Overlap, TriagePublic
    from app.services.imports import runs as run_service
    from app.services.triage import triages as triage_service

    try:
        check_cutoffs(k=k, depth=depth)
    except CutoffError as exc:
        raise click.BadParameter(str(exc), param_hint="--k") from None
    with database() as session:
        context = run_service.run_context(session=session, run_id=run_id)
        run = context.run
        created = triage_service.create_triage(
            session=session,
            run=run,
            golden=context.golden,
            depth=depth,
            k=k,
            user=None,
            overlap=Overlap(reviewers=reviewers, fraction=fraction, seed=seed),
        )
    _emit(
        TriagePublic.of(created).model_dump(mode="json"),
        output,
        f"triage {created.id}: {created.misses} misses of {run.name!r} at depth {depth}",
    )


@click.command("export")
@click.option("--triage", "triage_id", required=True, type=ROW_ID)
@click.option("--tracker", required=True, type=click.Choice(TRACKERS))
@click.option(
    "--target",
    required=True,
    help="owner/repo (GitHub), project (GitLab), project key (Jira), team id "
    "(Linear) or URL (webhook).",
)
@click.option("--dry-run", is_flag=True, help="Print the requests instead of sending them.")
def export(triage_id: int, tracker: str, target: str, dry_run: bool) -> None:
    """Push the triage's backlog to an issue tracker: one issue per cause, updated on the
    next export. Credentials come from the MISSTRIAGE_<TRACKER>_* settings."""
    from app.exporters import Tracker
    from app.models.exports import ExportAction
    from app.services.delivery import exports
    from app.settings import get_settings

    with database() as session:
        outcome = exports.export(
            session=session,
            settings=get_settings(),
            triage_id=triage_id,
            tracker=Tracker(tracker),
            target=target,
            dry_run=dry_run,
        )
    click.echo(json.dumps(outcome.model_dump(mode="json"), indent=2, ensure_ascii=False))
    if any(r.action is ExportAction.FAILED for r in outcome.results):
        sys.exit(1)
