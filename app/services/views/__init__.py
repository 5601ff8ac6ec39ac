"""Views: what the pages show that no other capability owns: the review card's evidence, the
query and document look-ups, the comparison of runs, a series' history and the gate of a
stored run.

Reads only; never writes a row.
"""
