"""``misstriage agreement``: how often the reviewers of a double-reviewed triage agreed, the
figures of ``GET /api/v1/triages/{id}/agreement``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from app.cli.service import ROW_ID, database, output_option

if TYPE_CHECKING:
    from app.models.agreement_public import AgreementPublic


def agreement_table(found: AgreementPublic) -> str:
    """The figures as a person reads them: overall, per cause, the confusion matrix."""
    lines = [
        f"triage {found.triage_id}: {found.compared_units} of {found.units} misses with labels "
        f"from two reviewers or more ({found.reviewers} reviewers)",
        f"  percent agreement    {found.percent_agreement.shown}",
        f"  Fleiss' kappa        {found.fleiss_kappa.shown}",
        f"  Krippendorff's alpha {found.krippendorff_alpha.shown}",
    ]
    if found.cohen_kappa is not None:
        lines.append(f"  Cohen's kappa        {found.cohen_kappa.shown}")
    if found.per_cause:
        width = max(len(cause) for cause in found.per_cause)
        lines.append("per cause (this cause or not): Fleiss' kappa [95% interval]")
        lines += [
            f"  {cause:<{width}}  {row.fleiss_kappa.shown}  ({row.labels} labels)"
            for cause, row in found.per_cause.items()
        ]
    if found.causes:
        width = max(len(cause) for cause in found.causes)
        lines.append("confusion (pairs of labels on one miss):")
        lines.append(" " * (width + 2) + "  ".join(found.causes))
        for row in found.causes:
            cells = "  ".join(
                f"{found.confusion[row][column]:>{len(column)}}" for column in found.causes
            )
            lines.append(f"  {row:<{width}}{cells}")
    return "\n".join(lines)


@click.command("agreement")
@click.option("--triage", "triage_id", required=True, type=ROW_ID)
@output_option
def agreement(triage_id: int, output: str) -> None:
    """How often the reviewers of a double-reviewed triage agreed: percent agreement,
    Cohen's kappa (two reviewers), Fleiss' kappa, Krippendorff's alpha, with 95% bootstrap
    intervals, per cause, and the confusion between causes."""
    from app.services.triage import agreement as agreement_service
    from app.services.triage import triages as triage_service

    with database() as session:
        ctx = triage_service.triage_context(session=session, triage_id=triage_id)
        found = agreement_service.triage_agreement(
            session=session, triage=ctx.triage, causes=ctx.causes
        )
    if output == "json":
        click.echo(json.dumps(found.model_dump(mode="json"), indent=2))
    else:
        click.echo(agreement_table(found))
