"""The shapes of the tools' structured results: the `--json` types of docs/json.md, as output schemas.

Clients read them from `tools/list`; the SDK checks every result against them before it leaves.
Lists are wrapped in an object (`{"facts": [...]}`) because structured content is a JSON object.
"""

from typing import Any, NotRequired

from typing_extensions import TypedDict  # pydantic reads only this TypedDict before Python 3.12


class Fact(TypedDict):
    """One fact, every field (as `memvault show --json`)."""

    id: str
    text: str
    at: str
    category: str
    tags: list[str]
    source: str | None
    session: str | None
    importance: float | None
    secret: bool
    key: str | None
    path: str


class Facts(TypedDict):
    """Facts, in the order asked for (as `memvault recent --json`, wrapped)."""

    facts: list[Fact]


class Hit(TypedDict):
    """A fact, or a wiki section (`id` is `<page path>#<heading-slug>`); higher scores are better."""

    id: str
    kind: str
    text: str
    score: float
    at: str | None
    category: str | None
    tags: list[str]
    source: str | None
    session: str | None
    secret: bool
    path: str | None
    heading: NotRequired[str | None]
    explain: NotRequired[dict[str, Any]]


class SearchResult(TypedDict):
    """The query and its hits, best first (a `SearchLine` of `memvault search --stdin --json` that ran)."""

    query: str
    hits: list[Hit]


class Tombstone(TypedDict):
    id: str
    at: str
    reason: str | None
    hash: str
    purged: bool


class ForgetResult(TypedDict):
    """The tombstone, whether the fact was already forgotten, and the pages still citing it."""

    id: str
    already_forgotten: bool
    tombstone: Tombstone
    cited_by: list[str]


class BundleItem(TypedDict):
    kind: str
    reason: str
    id: str
    path: str
    at: str | None
    heading: str | None
    category: str | None
    tags: list[str]
    source: str | None
    session: str | None
    score: float | None
    cites: list[str]
    truncated: bool
    tokens: int
    text: str


class Bundle(TypedDict):
    """A prompt-ready memory bundle within the token budget; `markdown` is the text to paste."""

    query: str | None
    budget: int
    tokens: int
    tokenizer: str
    searched: bool
    omitted: int
    items: list[BundleItem]
    markdown: str


class Status(TypedDict):
    """Where the vault stands (as `memvault status --json`)."""

    path: str
    facts: dict[str, int]
    days: int
    pages: int
    watermark: str | None
    pending: dict[str, int]
    last_dream: dict[str, Any] | None
    failed_attempts: int
    failing: dict[str, Any] | None
    stopped: str | None
    index: dict[str, Any]
    remote: dict[str, Any] | None
    lock: dict[str, Any] | None
    git: dict[str, Any]
