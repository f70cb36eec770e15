"""The leaves: settings, dates, tokens, credentials and text helpers that every layer may use.

Nothing here imports another memvault package but `memvault.errors`.
"""
