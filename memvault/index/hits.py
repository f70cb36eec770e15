"""A search result, as the Python API returns it and `--json` prints it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Hit:
    """One fact, or one section of a wiki page (then `id` is `<path>#<heading-slug>`)."""

    id: str
    kind: str  # "fact" | "page"
    text: str
    score: float
    at: str | None = None
    category: str | None = None
    tags: list[str] = field(default_factory=list)
    source: str | None = None
    path: str | None = None
    heading: str | None = None
    session: str | None = None
    secret: bool = False
    supersedes: str | None = None     # a fact: the older fact it replaces
    superseded_by: str | None = None  # a fact: the newer fact that replaces it (listed above it)
    explain: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            "score": round(self.score, 6),
            "at": self.at,
            "category": self.category,
            "tags": list(self.tags),
            "source": self.source,
            "path": self.path,
            "session": self.session,
            "secret": self.secret,
        }
        if self.kind == "page":
            data["heading"] = self.heading
        else:
            data["supersedes"] = self.supersedes
            data["superseded_by"] = self.superseded_by
        if self.explain is not None:
            data["explain"] = self.explain
        return data
