"""clusterings: a golden set's cluster ids as sets written before they are made live.

Each set of cluster ids (a detector run applied at a threshold, ids imported with the corpus
or from a side file) is a ``clustering`` row and its documents' ids ``document_cluster``
rows, written in bulk while nobody reads them; the golden set's ``clustering_id`` is switched
to it in one short transaction. ``document.cluster_id`` (rewritten by one UPDATE per cluster
inside one transaction, holding the write lock throughout) goes: the ids it holds become the
golden set's live clustering. A run's cluster figures name the clustering they were measured
with (``run_cluster_totals.clustering_id``; NULL for figures measured before: the golden
set's clustering of that detector run, as before).

Revision ID: 6d2a9f4e8b51
Revises: 3f8d2a7c9b14
Create Date: 2026-12-07 23:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "6d2a9f4e8b51"
down_revision: str | Sequence[str] | None = "3f8d2a7c9b14"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "clustering",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("golden_set_id", sa.Integer(), nullable=False),
        sa.Column("detector_run_id", sa.Integer(), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("clustered_documents", sa.Integer(), nullable=False),
        sa.Column("clusters", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("live_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["golden_set_id"],
            ["golden_set.id"],
            name=op.f("fk_clustering_golden_set_id_golden_set"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["detector_run_id"],
            ["detector_run.id"],
            name=op.f("fk_clustering_detector_run_id_detector_run"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_clustering")),
    )
    op.create_index(op.f("ix_clustering_golden_set_id"), "clustering", ["golden_set_id"])
    op.create_index(op.f("ix_clustering_detector_run_id"), "clustering", ["detector_run_id"])
    op.create_table(
        "document_cluster",
        sa.Column("clustering_id", sa.Integer(), nullable=False),
        sa.Column("doc_id", sa.String(length=300), nullable=False),
        sa.Column("cluster_id", sa.String(length=300), nullable=False),
        sa.ForeignKeyConstraint(
            ["clustering_id"],
            ["clustering.id"],
            name=op.f("fk_document_cluster_clustering_id_clustering"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("clustering_id", "doc_id", name=op.f("pk_document_cluster")),
    )
    op.create_index(
        "ix_document_cluster_members", "document_cluster", ["clustering_id", "cluster_id"]
    )
    op.add_column("golden_set", sa.Column("clustering_id", sa.Integer(), nullable=True))
    op.add_column("run_cluster_totals", sa.Column("clustering_id", sa.Integer(), nullable=True))
    # the ids the corpus carries now: the live clustering of its detector run
    op.execute(
        """
        INSERT INTO clustering (golden_set_id, detector_run_id, threshold, clustered_documents,
                                clusters, created_at, live_at)
        SELECT g.id, g.detector_run_id, r.threshold,
               (SELECT count(*) FROM document d
                 WHERE d.golden_set_id = g.id AND d.cluster_id IS NOT NULL
                   AND d.cluster_id <> ''),
               (SELECT count(DISTINCT d.cluster_id) FROM document d
                 WHERE d.golden_set_id = g.id AND d.cluster_id IS NOT NULL
                   AND d.cluster_id <> ''),
               CURRENT_TIMESTAMP, CURRENT_TIMESTAMP
          FROM golden_set g JOIN detector_run r ON r.id = g.detector_run_id
        """
    )
    op.execute(
        """
        UPDATE golden_set SET clustering_id =
               (SELECT c.id FROM clustering c WHERE c.golden_set_id = golden_set.id)
         WHERE detector_run_id IS NOT NULL
        """
    )
    op.execute(
        """
        INSERT INTO document_cluster (clustering_id, doc_id, cluster_id)
        SELECT g.clustering_id, d.doc_id, d.cluster_id
          FROM document d JOIN golden_set g ON g.id = d.golden_set_id
         WHERE g.clustering_id IS NOT NULL AND d.cluster_id IS NOT NULL AND d.cluster_id <> ''
        """
    )
    op.execute(
        """
        UPDATE run_cluster_totals SET clustering_id =
               (SELECT g.clustering_id FROM golden_set g JOIN run r ON r.golden_set_id = g.id
                 WHERE r.id = run_cluster_totals.run_id
                   AND g.detector_run_id = run_cluster_totals.detector_run_id)
         WHERE detector_run_id IS NOT NULL
        """
    )
    op.execute("ALTER TABLE document DROP COLUMN cluster_id")


def downgrade() -> None:
    op.add_column("document", sa.Column("cluster_id", sa.String(length=300), nullable=True))
    op.execute(
        """
        UPDATE document SET cluster_id =
               (SELECT dc.cluster_id FROM document_cluster dc
                  JOIN golden_set g ON g.clustering_id = dc.clustering_id
                 WHERE g.id = document.golden_set_id AND dc.doc_id = document.doc_id)
        """
    )
    op.execute("ALTER TABLE run_cluster_totals DROP COLUMN clustering_id")
    op.execute("ALTER TABLE golden_set DROP COLUMN clustering_id")
    op.drop_index("ix_document_cluster_members", table_name="document_cluster")
    op.drop_table("document_cluster")
    op.drop_index(op.f("ix_clustering_detector_run_id"), table_name="clustering")
    op.drop_index(op.f("ix_clustering_golden_set_id"), table_name="clustering")
    op.drop_table("clustering")
