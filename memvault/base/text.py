"""Text helpers for messages: a few items of a long list, in one line."""

from __future__ import annotations

SHOWN = 5


def shown(items: list[str], limit: int = SHOWN) -> str:
    """The first few of a list of ids or paths for a one-line message, and how many more."""
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")
