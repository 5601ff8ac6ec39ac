"""Near-duplicate detector runs of a golden set and their pair-review queue."""
