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
    supersedes: str | None


class AsOf(TypedDict):
    """The commit that answered a question about the past, for what was asked."""

    asked: str
    commit: str
    at: str
    message: str


class ShownFact(Fact):
    """One fact, every field, with the chain of facts superseding one another (as `memvault show --json`)."""

    superseded_by: str | None
    chain: list[str]
    as_of: NotRequired[AsOf]


class Facts(TypedDict):
    """Facts, in the order asked for (as `memvault recent --json`, wrapped)."""

    facts: list[Fact]
    as_of: NotRequired[AsOf]


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
    supersedes: NotRequired[str | None]
    superseded_by: NotRequired[str | None]
    explain: NotRequired[dict[str, Any]]


class SearchResult(TypedDict):
    """The query and its hits, best first (a `SearchLine` of `memvault search --stdin --json` that ran)."""

    query: str
    hits: list[Hit]
    as_of: NotRequired[AsOf]


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
    superseded_by: str | None


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
    as_of: NotRequired[AsOf]


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
    as_of: NotRequired[AsOf]
    index: NotRequired[dict[str, Any]]
    remote: NotRequired[dict[str, Any] | None]
    lock: NotRequired[dict[str, Any] | None]
    git: NotRequired[dict[str, Any]]


class WhySection(TypedDict):
    id: str
    path: str
    heading: str
    text: str
    cites: list[str]


class WhySource(TypedDict):
    """One fact and the commits of its life."""

    id: str
    found: bool
    text: str | None
    at: str | None
    category: str | None
    source: str | None
    session: str | None
    path: str | None
    added: dict[str, Any] | None
    consolidated: dict[str, Any] | None
    cited_by: list[str]
    supersedes: str | None
    superseded_by: dict[str, Any] | None
    forgotten: dict[str, Any] | None


class Why(TypedDict):
    """A memory traced back to its sources (as `memvault why --json`)."""

    target: str
    kind: str
    memory_line: dict[str, Any] | None
    page: dict[str, Any] | None
    sections: list[WhySection]
    facts: list[WhySource]
