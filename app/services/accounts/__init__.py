"""Accounts: users, their roles and passwords, API tokens, logins and the token cache, and an
account's life cycle (role, activity, password resets) with its audit trail.

Owns the ``user_account``, ``api_token``, ``user_session``, ``login_attempt`` and
``account_event`` tables and how a credential becomes a user. Never
touches golden sets, runs, triages or their misses.
"""
