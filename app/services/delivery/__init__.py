"""Delivery: the backlog pushed to issue trackers (one issue per cause, updated on re-export)
and the webhook outbox's deliveries.

Reads triages and their closure; writes only its own tables (exports, webhook deliveries).
"""
