"""detector runs: where cluster ids come from, the pair-review queue and its audit

Revision ID: e5b7a1c9d402
Revises: d81f3a6c5e92
Create Date: 2026-12-02 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.models.base import UTCDateTime

revision: str = "e5b7a1c9d402"
down_revision: str | Sequence[str] | None = "d81f3a6c5e92"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _user_fk(name: str) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(
        name, sa.Integer(), sa.ForeignKey("user_account.id", ondelete="SET NULL"), nullable=True
    )


def upgrade() -> None:
    op.create_table(
        "detector_run",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "golden_set_id",
            sa.Integer(),
            sa.ForeignKey("golden_set.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=False),
        sa.Column("low", sa.Float(), nullable=True),
        sa.Column("documents", sa.Integer(), nullable=False),
        sa.Column("pairs", sa.Integer(), nullable=False),
        sa.Column("candidate_recall", sa.JSON(), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        _user_fk("created_by_id"),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("clusters", sa.Integer(), nullable=True),
        sa.Column("clustered_documents", sa.Integer(), nullable=True),
        sa.Column("precision", sa.JSON(), nullable=True),
        sa.Column("recall", sa.JSON(), nullable=True),
        sa.Column("applied_at", UTCDateTime(timezone=True), nullable=True),
        _user_fk("applied_by_id"),
        sa.Column("applications", sa.JSON(), nullable=True),
    )
    op.create_index("ix_detector_run_golden_set_id", "detector_run", ["golden_set_id"])
    op.create_table(
        "doc_pair",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "detector_run_id",
            sa.Integer(),
            sa.ForeignKey("detector_run.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("doc_a", sa.String(300), nullable=False),
        sa.Column("doc_b", sa.String(300), nullable=False),
        sa.Column("similarity", sa.Float(), nullable=False),
        sa.Column("band", sa.Integer(), nullable=False),
        sa.Column("sampled", sa.Boolean(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("labelled", sa.Boolean(), nullable=False),
        sa.Column("same", sa.Boolean(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        _user_fk("lease_holder_id"),
        sa.Column("lease_expires_at", UTCDateTime(timezone=True), nullable=True),
        _user_fk("labelled_by_id"),
        sa.Column("labelled_at", UTCDateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("detector_run_id", "doc_a", "doc_b"),
    )
    op.create_index(
        "ix_doc_pair_queue", "doc_pair", ["detector_run_id", "sampled", "labelled", "position"]
    )
    op.create_index("ix_doc_pair_similarity", "doc_pair", ["detector_run_id", "similarity"])
    op.create_table(
        "pair_event",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "pair_id",
            sa.Integer(),
            sa.ForeignKey("doc_pair.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "detector_run_id",
            sa.Integer(),
            sa.ForeignKey("detector_run.id", ondelete="CASCADE"),
            nullable=False,
        ),
        _user_fk("user_id"),
        sa.Column("at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("before", sa.JSON(), nullable=False),
        sa.Column("after", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
    )
    op.create_index("ix_pair_event_pair_id", "pair_event", ["pair_id"])
    op.create_table(
        "pair_skip",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "pair_id",
            sa.Integer(),
            sa.ForeignKey("doc_pair.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "detector_run_id",
            sa.Integer(),
            sa.ForeignKey("detector_run.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "user_id",
            sa.Integer(),
            sa.ForeignKey("user_account.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("at", UTCDateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("pair_id", "user_id"),
    )
    op.create_index("ix_pair_skip_run", "pair_skip", ["detector_run_id", "user_id", "pair_id"])
    with op.batch_alter_table("golden_set", schema=None) as batch_op:
        batch_op.add_column(sa.Column("detector_run_id", sa.Integer(), nullable=True))
    with op.batch_alter_table("triage", schema=None) as batch_op:
        batch_op.add_column(sa.Column("detector_run_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("detector_threshold", sa.Float(), nullable=True))
    with op.batch_alter_table("run_cluster_totals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("detector_run_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("traced_depth", sa.Integer(), nullable=True))
    # Cluster ids already stored came with the corpus: each such golden set gets its
    # "imported, not calibrated" detector run, and what was measured with them names it.
    op.execute(
        """
        INSERT INTO detector_run (golden_set_id, source, parameters, documents, pairs, seconds,
                                  created_at, threshold, clusters, clustered_documents,
                                  applied_at)
        SELECT g.id, 'imported', '{"with": "corpus"}', g.documents, 0, 0, g.created_at, NULL,
               (SELECT count(DISTINCT d.cluster_id) FROM document d
                WHERE d.golden_set_id = g.id AND d.cluster_id IS NOT NULL),
               (SELECT count(*) FROM document d
                WHERE d.golden_set_id = g.id AND d.cluster_id IS NOT NULL),
               g.created_at
        FROM golden_set g
        WHERE EXISTS (SELECT 1 FROM document d
                      WHERE d.golden_set_id = g.id AND d.cluster_id IS NOT NULL)
        """
    )
    op.execute(
        """
        UPDATE golden_set SET detector_run_id = (
            SELECT max(r.id) FROM detector_run r WHERE r.golden_set_id = golden_set.id
        )
        """
    )
    op.execute(
        """
        UPDATE triage SET detector_run_id = (
            SELECT g.detector_run_id FROM run JOIN golden_set g ON g.id = run.golden_set_id
            WHERE run.id = triage.run_id
        )
        """
    )
    op.execute(
        """
        UPDATE run_cluster_totals SET detector_run_id = (
            SELECT g.detector_run_id FROM run JOIN golden_set g ON g.id = run.golden_set_id
            WHERE run.id = run_cluster_totals.run_id
        )
        """
    )


def downgrade() -> None:
    with op.batch_alter_table("run_cluster_totals", schema=None) as batch_op:
        batch_op.drop_column("traced_depth")
        batch_op.drop_column("detector_run_id")
    with op.batch_alter_table("triage", schema=None) as batch_op:
        batch_op.drop_column("detector_threshold")
        batch_op.drop_column("detector_run_id")
    with op.batch_alter_table("golden_set", schema=None) as batch_op:
        batch_op.drop_column("detector_run_id")
    op.drop_table("pair_skip")
    op.drop_table("pair_event")
    op.drop_table("doc_pair")
    op.drop_table("detector_run")
