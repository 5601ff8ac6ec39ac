"""Triages: putting a run's misses on a queue (with their hints and the double-review sample),
and what is read about a triage as a whole: its closure report, the dashboard's panels, the
backlog download, the reviewers' agreement.

Reads the queue's tally (``app.services.queue.lifecycle``) and never writes a miss's label,
lease or skip: that is the queue's.
"""
