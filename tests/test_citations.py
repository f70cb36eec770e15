"""Which pages cite which facts, and page text without the statements of forgotten facts.

Bad inputs tried: an id that only appears in plain words (not a citation), an id listed only in
the frontmatter `sources`, a footnote definition of a forgotten id, nested list items under a
dropped item, ids with surrounding whitespace, an empty id list.
"""

from __future__ import annotations

from memvault.formats.citations import strip_forgotten_statements
from memvault.storage.wiki import pages_citing

GONE = "0123456789abcdef"
LIVE = "fedcba9876543210"
OTHER = "aaaaaaaaaaaaaaaa"


def write_page(root, path, sources, body):
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"---\ntitle: T\nsources: [{', '.join(sources)}]\n---\n\n{body}\n")


def test_pages_citing_finds_body_and_sources_but_not_plain_mentions(vault):
    write_page(vault.root, "wiki/people/alice.md", [LIVE, GONE], f"Likes tea [^{LIVE}]. Hates coffee [^{GONE}].")
    write_page(vault.root, "wiki/people/bob.md", [LIVE, GONE], f"Bob is tall [^{LIVE}].")       # sources only
    write_page(vault.root, "wiki/people/carol.md", [LIVE], f"Carol wrote {GONE} on a wall [^{LIVE}].")
    write_page(vault.root, "wiki/people/dan.md", [OTHER], f"Dan [^{OTHER}].")

    found = pages_citing(vault.storage, [GONE, f" {OTHER} "])
    assert found == {"wiki/people/alice.md": [GONE], "wiki/people/bob.md": [GONE], "wiki/people/dan.md": [OTHER]}
    assert pages_citing(vault.storage, []) == {}
    assert pages_citing(vault.storage) == {}  # nothing forgotten in this vault


def test_strip_drops_cited_lines_items_and_their_children_only():
    text = "\n".join([
        "## Drinks",
        "",
        f"Alice prefers green tea [^{LIVE}].",
        f"She hates coffee [^{GONE}].",
        "",
        f"- tea in the morning [^{LIVE}]",
        f"- coffee never [^{LIVE}][^{GONE}]",
        "  which she said loudly",
        f"  - nested detail [^{LIVE}]",
        f"- water [^{LIVE}]",
        "",
        f"| coffee | [^{GONE}] |",
        "",
        f"[^{GONE}]: 2026-11-01 fact · logs/2026/2026-11-01.md",
        f"[^{LIVE}]: 2026-11-01 fact · logs/2026/2026-11-01.md",
    ]) + "\n"
    out = strip_forgotten_statements(text, {GONE})
    assert GONE not in out
    assert out == "\n".join([
        "## Drinks",
        "",
        f"Alice prefers green tea [^{LIVE}].",
        "",
        f"- tea in the morning [^{LIVE}]",
        f"- water [^{LIVE}]",
        "",
        f"[^{LIVE}]: 2026-11-01 fact · logs/2026/2026-11-01.md",
    ]) + "\n"


def test_strip_leaves_text_without_forgotten_citations_identical():
    text = f"Carol wrote {GONE} on a wall [^{LIVE}].\n\n\n- kept [^{OTHER}]"
    assert strip_forgotten_statements(text, {GONE}) == text
    assert strip_forgotten_statements(text, []) == text
