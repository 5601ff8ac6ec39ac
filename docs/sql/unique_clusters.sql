-- unique-clusters@k, the per-query part: u_q(k) for every query of a log and every cutoff k.
--
-- The same figures as misstriage's own code (app/eval/cluster_profile.py, `misstriage
-- clusters`, a log run imported into the service), written once in standard SQL that runs
-- unchanged on DuckDB, Spark SQL and Trino (docs/sql/README.md: how to run it, how to load
-- its output into misstriage).
--
-- Input tables (or views) under these names:
--   results(qid, doc_id, score)   a log's lines: one result a row (other columns are ignored)
--   documents(doc_id, cluster_id) the corpus: a document's duplicate cluster, NULL or '' for none
--   ks(k)                         the cutoffs, one integer a row (e.g. VALUES (10), (20), (50))
--
-- Conventions (misstriage's, docs/api.md "cluster measures without judgments"):
--   * order: trec_eval's: score descending as a double, ties broken by doc_id descending
--     (byte order of the UTF-8 text, as all three engines compare strings by default);
--   * a document repeated within one query counts once: its first occurrence is kept. A
--     table has no line order, so "first" is the best-ranked occurrence (the highest score).
--     That is misstriage's first line whenever a log writes each ranking best first, as
--     retrieval logs do; with a `line` column, order the dedup by it instead (README);
--   * a document without a cluster_id, or absent from `documents`, is its own cluster;
--   * a query with fewer than k results counts the distinct clusters among what it returned.
--
-- Output, one row per (query, k), ordered by qid and k:
--   qid, k,
--   distinct_clusters  u_q(k): distinct clusters among the first k results,
--   results            min(k, results of the query),
--   clustered          the results among those that have a cluster_id.

WITH
first_occurrence AS (
    -- One row per (qid, doc_id): the best-ranked of its occurrences.
    SELECT qid, doc_id, score
    FROM (
        SELECT
            qid,
            doc_id,
            CAST(score AS DOUBLE) AS score,
            ROW_NUMBER() OVER (
                PARTITION BY qid, doc_id
                ORDER BY CAST(score AS DOUBLE) DESC NULLS LAST
            ) AS occurrence
        FROM results
    ) AS occurrences
    WHERE occurrence = 1
),
ranked AS (
    SELECT
        qid,
        doc_id,
        ROW_NUMBER() OVER (
            PARTITION BY qid
            ORDER BY score DESC NULLS LAST, doc_id DESC
        ) AS result_rank
    FROM first_occurrence
),
clusters AS (
    -- One row per document; '' is no cluster, as in misstriage's corpus import.
    SELECT doc_id, MAX(NULLIF(cluster_id, '')) AS cluster_id
    FROM documents
    GROUP BY doc_id
),
windowed AS (
    -- Only the ranks some k reaches are joined with the corpus.
    SELECT ranked.qid, ranked.result_rank, clusters.cluster_id
    FROM ranked
    LEFT JOIN clusters ON clusters.doc_id = ranked.doc_id
    WHERE ranked.result_rank <= (SELECT MAX(k) FROM ks)
)
SELECT
    windowed.qid AS qid,
    ks.k AS k,
    -- A result without a cluster is its own: each adds one (the documents of a query are
    -- distinct after the dedup), which no made-up key could collide with.
    COUNT(DISTINCT windowed.cluster_id)
        + SUM(CASE WHEN windowed.cluster_id IS NULL THEN 1 ELSE 0 END) AS distinct_clusters,
    COUNT(*) AS results,
    COUNT(windowed.cluster_id) AS clustered
FROM windowed
CROSS JOIN ks
WHERE windowed.result_rank <= ks.k
GROUP BY windowed.qid, ks.k
ORDER BY qid, k
