"""Accounts: users, their roles and passwords, API tokens, logins and the token cache.

Owns the ``user_account`` and ``api_token`` tables and how a credential becomes a user. Never
touches golden sets, runs, triages or their misses.
"""
