"""Golden sets and runs: importing them (all or nothing), their stored form (judgments, query
texts, the corpus manifest, the ranks of judged documents, the kept heads), their clusters and
the metrics measured on them.

Owns the golden-set, query, judgment, document and run tables. Never touches a triage, its
misses or their labels.
"""
