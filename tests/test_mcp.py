"""`memvault mcp`: the real server process, spoken to with the MCP SDK's own client (and raw JSON-RPC).

One server runs for the whole module on one vault, as an agent's host would keep it running;
the tests that need a server of their own (a leaky library, HTTP) start one each.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from support.cli import run_memvault
from support.git import IDENTITY, commit_count, git, is_clean
from test_docs_json import parse_doc, problems

TOOLS = {"add", "search", "recent", "show", "forget", "context", "status", "why"}


def server_env(home: Path, model_path: str) -> dict[str, str]:
    """A hermetic environment for processes started outside the function-scoped fixtures."""
    (home / "gitconfig").write_text("")
    env = {**os.environ, **IDENTITY, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "GIT_CONFIG_GLOBAL": str(home / "gitconfig"), "GIT_CONFIG_NOSYSTEM": "1", "TZ": "UTC",
           "MEMVAULT_EMBED_MODEL_PATH": model_path, "MEMVAULT_RERANK": "0"}
    for key in ("MEMVAULT_VAULT", "MEMVAULT_MODEL", "MEMVAULT_EMBED_MODEL", "FASTEMBED_CACHE_PATH",
                "MEMVAULT_RERANK_MODEL", "MEMVAULT_RERANK_MODEL_PATH"):
        env.pop(key, None)
    return env


def new_vault(path: Path, env: dict) -> Path:
    subprocess.run([sys.executable, "-m", "memvault", "init", str(path)], env=env, check=True, capture_output=True)
    return path


@asynccontextmanager
async def connect(args: list[str], env: dict, errlog):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "memvault", "mcp", *args], env=env)
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=120) as session:
            await session.initialize()
            yield session


class Server:
    """A running `memvault mcp` and a connected ClientSession, driven from plain (sync) tests."""

    def __init__(self, portal, session, vault: Path, env: dict, stderr: Path):
        self.portal, self.session, self.vault, self.env, self.stderr = portal, session, vault, env, stderr

    def call(self, tool: str, **arguments):
        return self.portal.call(self.session.call_tool, tool, arguments)

    def ok(self, tool: str, **arguments) -> dict:
        result = self.call(tool, **arguments)
        assert not result.is_error, result.content[0].text
        return result.structured_content

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return run_memvault(*args, "--vault", str(self.vault), env=self.env)


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_model_path):
    home = tmp_path_factory.mktemp("mcp")
    env = server_env(home, tiny_model_path)
    vault = new_vault(home / "vault", env)
    stderr = home / "server.stderr"
    with open(stderr, "w") as errlog, start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(connect(["--vault", str(vault)], env, errlog)) as session:
        yield Server(portal, session, vault, env, stderr)


def test_lists_its_tools_with_described_schemas_and_memory_md_as_a_resource(server):
    """An agent sees every tool with a description, described arguments and an output schema."""
    tools = {t.name: t for t in server.portal.call(server.session.list_tools).tools}
    assert set(tools) == TOOLS
    # ... and `memvault mcp --help` names each of them (it had left out `why`)
    from memvault.cli.mcp_cmd import mcp

    listed = mcp.__doc__.split("Tools: ", 1)[1].split(";", 1)[0]
    assert set(listed.split(", ")) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.output_schema, tool.name
        for name, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"
    assert tools["add"].input_schema["required"] == ["text"]
    assert "preference" in tools["add"].input_schema["properties"]["category"]["description"]
    assert tools["search"].annotations.read_only_hint and tools["forget"].annotations.destructive_hint
    # Seen: the descriptions carried the docstrings' indentation. Each paragraph is one line.
    for tool in tools.values():
        paragraphs = tool.description.split("\n\n")
        assert all("\n" not in p and p == p.strip() and "  " not in p for p in paragraphs), tool.description
    assert tools["forget"].description.startswith("Forget a fact: a committed tombstone hides it")
    assert len(tools["forget"].description.split("\n\n")) == 2

    resources = server.portal.call(server.session.list_resources).resources
    assert [r.name for r in resources] == ["MEMORY.md"]
    read = server.portal.call(server.session.read_resource, resources[0].uri)
    assert read.contents[0].text == (server.vault / "MEMORY.md").read_text()


def test_output_schemas_name_the_documented_json_fields():
    """The published output schemas and docs/json.md list the same fields (a rename breaks this)."""
    from typing import get_type_hints

    from memvault.mcp import schemas

    _, types = parse_doc()
    for name in ("Fact", "ShownFact", "Facts", "AsOf", "Hit", "Tombstone", "ForgetResult", "Bundle", "BundleItem",
                 "Status", "Why", "WhySection", "WhySource"):
        shape = getattr(schemas, name)
        documented = {field.rstrip("?") for field in types[name]}
        assert set(get_type_hints(shape)) == documented, name
        optional = {field.rstrip("?") for field in types[name] if field.endswith("?")}
        assert shape.__optional_keys__ == optional, name


def test_add_search_show_forget_through_the_protocol(server):
    """The round trip an agent makes: each result carries the documented --json fields; writes are
    one commit each, like the CLI's; a forgotten fact is gone from search and `show`."""
    _, types = parse_doc()
    before = commit_count(server.vault)
    fact = server.ok("add", text="Alice prefers green tea\nand no sugar", category="preference",
                     tags=["alice"], source="test-agent", session="chat-1", importance=0.8, at="2026-03-01")
    assert problems(fact, "Fact", types) == []
    assert fact["text"] == "Alice prefers green tea\nand no sugar" and fact["at"].startswith("2026-03-01")
    assert commit_count(server.vault) == before + 1 and is_clean(server.vault)
    assert fact["id"] in (server.vault / fact["path"]).read_text()

    found = server.ok("search", query="green tea", limit=5, tag="alice")
    assert problems(found, "SearchLine", types) == []
    assert [hit["id"] for hit in found["hits"]] == [fact["id"]]
    assert server.ok("search", query="green tea", until="2026-02-01")["hits"] == []
    assert [hit["id"] for hit in server.ok("search", query="green tea", session="chat-1")["hits"]] == [fact["id"]]
    assert server.ok("search", query="green tea", session="chat-2")["hits"] == []
    # ids read as people type them
    assert server.ok("show", id=fact["id"].upper()) == {**fact, "superseded_by": None, "chain": [fact["id"]]}
    thread = server.ok("recent", session="chat-1")["facts"]
    assert [f["id"] for f in thread] == [fact["id"]]

    gone = server.ok("forget", id=fact["id"], reason="wrong person")
    assert problems(gone, "ForgetResult", types) == []
    assert gone["already_forgotten"] is False and gone["tombstone"]["reason"] == "wrong person"
    assert f"forget: {fact['id']}" in git(server.vault, "log", "-1", "--format=%s")
    assert server.ok("search", query="green tea")["hits"] == []
    shown = server.call("show", id=fact["id"])
    assert shown.is_error and "was forgotten" in shown.content[0].text and "wrong person" in shown.content[0].text
    assert server.ok("forget", id=fact["id"])["already_forgotten"] is True


def test_an_add_retried_with_its_key_returns_the_first_fact_and_writes_nothing(server):
    """The client crashed right after an `add` and retried it: with a key, the fact is stored once."""
    first = server.ok("add", text="Hana starts on Monday", key="req-5f2c")
    before = commit_count(server.vault)
    retried = server.call("add", text="Hana starts on Monday", key="req-5f2c")
    assert not retried.is_error and retried.structured_content == first
    assert f"key 'req-5f2c' (fact {first['id']}) is already stored" in retried.content[-1].text
    assert commit_count(server.vault) == before and first["key"] == "req-5f2c"
    bad = server.call("add", text="Hana starts on Monday", key="two\nlines")
    assert bad.is_error and "key must be one line" in bad.content[0].text


def test_context_and_status_carry_their_documented_shapes(server):
    """context's text is the markdown bundle within budget; status reports the vault."""
    _, types = parse_doc()
    server.ok("add", text="Deploys happen on Tuesdays", category="decision", tags=["ops"])
    result = server.call("context", query="when do deploys happen", budget=400)
    bundle = result.structured_content
    assert problems(bundle, "Bundle", types) == []
    assert result.content[0].text == bundle["markdown"] and bundle["tokens"] <= 400
    assert "Deploys happen on Tuesdays" in bundle["markdown"]
    # a budget nothing fits in (bad input tried): the text says why, never an empty answer
    tiny = server.call("context", query="when do deploys happen", budget=1)
    assert tiny.structured_content["markdown"] == "" and tiny.structured_content["omitted"] >= 1
    assert tiny.content[0].text.startswith("nothing to show: ") and "did not fit in 1 tokens" in tiny.content[0].text
    status = server.ok("status")
    assert problems(status, "Status", types) == []
    assert status["path"] == str(server.vault.resolve()) and status["facts"]["live"] >= 1


def test_supersedes_and_questions_about_the_past_through_the_protocol(server):
    """An agent corrects a fact with `supersedes`, then asks what the memory held before the correction."""
    _, types = parse_doc()
    old = server.ok("add", text="The standup is at 9:30 in room Juniper")
    before = git(server.vault, "rev-parse", "HEAD").strip()
    new = server.ok("add", text="The standup moved to 10:00 in room Juniper", supersedes=old["id"])
    assert new["supersedes"] == old["id"] and problems(new, "Fact", types) == []
    found = server.ok("search", query="standup room Juniper")
    assert [(h["id"], h["superseded_by"]) for h in found["hits"][:2]] == [(new["id"], None), (old["id"], new["id"])]
    then = server.ok("search", query="standup room Juniper", as_of=before[:10])
    assert then["as_of"]["commit"] == before and problems(then, "SearchLine", types) == []
    assert [(h["id"], h["superseded_by"]) for h in then["hits"]] == [(old["id"], None)]
    shown = server.ok("show", id=old["id"])
    assert shown["superseded_by"] == new["id"] and problems(shown, "ShownFact", types) == []
    assert server.ok("show", id=old["id"], as_of=before)["superseded_by"] is None
    listed = server.ok("recent", limit=1, as_of=before)
    assert [f["id"] for f in listed["facts"]] == [old["id"]] and problems(listed, "Facts", types) == []
    status = server.ok("status", as_of=before)
    assert status["as_of"]["commit"] == before and "index" not in status and problems(status, "Status", types) == []
    bundle = server.ok("context", query="standup", as_of=before)
    assert bundle["as_of"]["commit"] == before and new["id"] not in bundle["markdown"]
    commits = commit_count(server.vault)
    for arguments, words in (({"supersedes": old["id"]}, f"already superseded by {new['id']}"),
                             ({"supersedes": "zzzzzzzzzzzzzzzz"}, "no fact with that id")):
        refused = server.call("add", text="The standup is cancelled", **arguments)
        assert refused.is_error and words in refused.content[0].text
    trail = server.ok("why", target=new["id"])
    assert [f["id"] for f in trail["facts"]] == [old["id"], new["id"]] and problems(trail, "Why", types) == []
    assert trail["facts"][0]["superseded_by"]["id"] == new["id"]
    unknown = server.call("why", target="999")
    assert unknown.is_error and "MEMORY.md has no line 999" in unknown.content[0].text
    bad = server.call("search", query="standup", as_of="someday")
    assert bad.is_error and "neither a date" in bad.content[0].text
    assert commit_count(server.vault) == commits and is_clean(server.vault)


BAD_CALLS = [
    # (tool, arguments, the message, or a part of it, and the exit code the CLI would use)
    ("add", {"text": "  "}, "fact text is empty", 2),
    ("add", {"text": "x", "category": "gossip"}, "unknown category 'gossip'", 2),
    ("add", {"text": "x", "importance": 2}, "importance must be between 0 and 1", 2),
    ("add", {"text": "x", "at": "next tuesday"}, "next tuesday", 2),
    ("add", {"text": "x", "tags": ["two words"]}, "invalid tag 'two words'", 2),
    ("add", {"text": "x\x00y"}, "NUL", 2),
    ("add", {"text": "x", "source": "agent\u2028two"}, "source must be one line: it holds a line break ('\\u2028')", 2),
    ("add", {"text": "x", "session": "chat\x8542"}, "session must be one line: it holds a line break ('\\x85')", 2),
    ("add", {"text": "x", "tags": ["a\u2029b"]}, "invalid tag", 2),
    ("add", {}, "invalid arguments for add: text: Field required", 2),
    ("add", {"text": "x", "importance": "high"}, "invalid arguments for add: importance", 2),
    ("search", {"query": "tea", "limit": 0}, "limit must be a whole number from 1 to 1000", 2),
    ("search", {"query": "tea", "limit": "ten"}, "invalid arguments for search: limit", 2),
    # JSON's own types, not the SDK's lax reading of strings: "true" must not opt into storing a secret
    ("add", {"text": "x", "allow_secret": "true"}, "invalid arguments for add: allow_secret: must be boolean", 2),
    ("add", {"text": "x", "importance": "0.5"}, "importance: must be number or null, got \"0.5\"", 2),
    ("search", {"query": "tea", "limit": "10"}, "invalid arguments for search: limit: must be integer", 2),
    ("search", {"query": "tea", "include_all": "yes"}, "include_all: must be boolean", 2),
    ("search", {"query": "tea", "limit": True}, "limit: must be integer, got true", 2),
    ("recent", {"oldest_first": 1}, "oldest_first: must be boolean or null, got 1", 2),
    ("search", {"query": "tea", "sesion": "chat-1"}, "unknown argument(s) for search: sesion", 2),
    ("search", {"query": "tea", "since": "2026-05-01", "until": "2026-01-01"}, "is after until", 2),
    ("search", {"query": ""}, "search query is empty", 2),
    ("search", {"query": "word " * 2001}, "search query is too long (10005 characters, at most 10000)", 2),
    ("recent", {"limit": -1}, "limit must be a whole number of at least 1", 2),
    ("show", {"id": "0000000000000000"}, "no fact with id '0000000000000000'", 3),
    ("show", {"id": "x" * 100_000}, "characters left out) …", 3),  # not a 100 KB error line
    ("forget", {"id": "nonsense"}, "nonsense", 3),
    ("forget", {"id": "0000000000000000", "reason": "a\nb"}, "reason must be one line", 2),
    ("context", {"budget": 0}, "budget must be a whole number", 2),
    ("dream", {}, "unknown tool 'dream'", 2),
]


def test_the_strict_types_still_take_what_real_clients_send(server):
    """Valid calls the type check must not refuse: a list sent as its JSON text (Claude Desktop
    does), a whole number for a float field, null for an optional one."""
    added = server.ok("add", text="tea is good", tags='["drinks", "tea"]', importance=1)
    assert added["tags"] == ["drinks", "tea"] and added["importance"] == 1
    assert server.ok("search", query="tea", min_score=0, since=None)["hits"]


def test_a_string_that_looks_like_json_stays_the_string_sent(server):
    """Bad input tried: string arguments whose text is JSON (`"null"`, `"[1, 2]"`, `"{}"`). The SDK
    decoded them: `source: "null"` dropped the filter (every source answered), `session: "[1, 2]"`
    and a reason of `["a"]` were refused as not strings. They are the strings sent now."""
    fact = server.ok("add", text="kept under a json-looking session", session="[1, 2]", source="{}")
    assert fact["session"] == "[1, 2]" and fact["source"] == "{}"
    assert server.ok("search", query="json-looking session", source="null")["hits"] == []
    assert [hit["id"] for hit in server.ok("search", query="json-looking session", source="{}")["hits"]] == [fact["id"]]
    assert server.ok("forget", id=fact["id"], reason='["a"]')["tombstone"]["reason"] == '["a"]'


def test_bad_calls_are_one_line_tool_errors_and_change_nothing(server):
    """Every bad argument (empty text, unknown category, importance out of range, a date memvault
    cannot read, a bad tag, a NUL byte, a line break in a source or session or tag, a missing or
    mistyped argument, a misspelt argument name,
    an inverted range, a query over 10000 characters, unknown ids (one of 100,000 characters), a
    multi-line reason, a zero budget, an unknown tool) is an MCP tool error with one line and the
    CLI's exit code; nothing is written and the server stays up."""
    before, files = commit_count(server.vault), git(server.vault, "ls-files")
    for tool, arguments, message, code in BAD_CALLS:
        result = server.call(tool, **arguments)
        text = result.content[0].text
        assert result.is_error, (tool, arguments)
        assert message in text and "\n" not in text, (tool, arguments, text)
        assert result.structured_content["error"]["exit_code"] == code, (tool, arguments)
        assert result.structured_content["error"]["message"] == text
    assert commit_count(server.vault) == before and git(server.vault, "ls-files") == files
    assert is_clean(server.vault)
    assert server.ok("status")["path"]  # still serving
    assert "Traceback" not in server.stderr.read_text()  # handled, not crashes logged by the SDK


def test_query_syntax_is_searched_as_plain_text(server):
    """Bad input tried: 10000 open parentheses (20000 crashed the whole server process; a query
    that long is now refused) and words followed by `:*` (an internal error): both are searched
    as their words, and the server stays up."""
    server.ok("add", text="The gopher protocol predates the web")
    assert server.ok("search", query="(" * 10_000)["hits"] == []
    for query in ("what is gopher:* ?", "protocol:*", "(" * 3000 + "gopher" + ")" * 3000):
        hits = server.ok("search", query=query)["hits"]
        assert [hit["text"] for hit in hits] == ["The gopher protocol predates the web"], query[:20]
    assert server.ok("status")["path"]


def test_a_git_repository_broken_while_serving_is_said_as_the_cli_says_it(server):
    """Fault tried: .git/HEAD overwritten with garbage while the server runs. add, forget and
    status answered "unexpected error: GitCommandError …" until a restart; now the CLI's line
    (exit code 3, pointing to `doctor --fix`), and everything works again once HEAD is back."""
    head = server.vault / ".git" / "HEAD"
    saved = head.read_bytes()
    head.write_bytes(b"\x00garbage\n")
    try:
        cli = server.cli("status")
        for tool, arguments in (("add", {"text": "while .git was broken"}), ("status", {})):
            error = server.call(tool, **arguments).structured_content["error"]
            assert error["type"] == "NotAVault" and error["exit_code"] == 3, error
            assert "its git repository (.git) is broken" in error["message"] and "doctor --fix" in error["message"]
        assert cli.returncode == 3
    finally:
        head.write_bytes(saved)
    assert server.ok("add", text="after .git was mended")["text"] == "after .git was mended"
    assert is_clean(server.vault)


def as_argument(cli_line: str) -> str:
    """A CLI error line as MCP words it: the CLI names an option (`--min-score`), MCP its argument."""
    line = cli_line.strip().removeprefix("memvault: ")
    return re.sub(r"^--([\w-]+)", lambda found: found.group(1).replace("-", "_"), line)


def test_vault_errors_read_exactly_as_the_cli_says_them(server):
    """The same bad input gives the same one-line message through MCP as on the command line, which
    names the option where MCP names the argument (`--at` there, `at` here)."""
    for tool, arguments, cli_args in [
        ("add", {"text": "x", "category": "gossip"}, ["add", "x", "--category", "gossip"]),
        ("add", {"text": "x", "at": "next tuesday"}, ["add", "x", "--at", "next tuesday"]),
        ("show", {"id": "0000000000000000"}, ["show", "0000000000000000"]),
        ("search", {"query": "tea", "since": "tomorrow-ish"}, ["search", "tea", "--since", "tomorrow-ish"]),
    ]:
        cli = server.cli(*cli_args)
        assert cli.returncode != 0
        assert server.call(tool, **arguments).content[0].text == as_argument(cli.stderr)


def test_memory_md_that_cannot_be_read_says_why_in_one_line(tmp_path, tiny_model_path):
    """Fault tried: MEMORY.md replaced by a symlink to a file outside the vault (a hostile pull).
    The client hears memvault's reason, as the CLI words it; the server logs no traceback."""
    from mcp.shared.exceptions import MCPError

    env = server_env(tmp_path, tiny_model_path)
    vault = new_vault(tmp_path / "vault", env)
    (tmp_path / "elsewhere.md").write_text("not the vault's")
    (vault / "MEMORY.md").unlink()
    (vault / "MEMORY.md").symlink_to(tmp_path / "elsewhere.md")
    stderr = tmp_path / "server.stderr"
    with open(stderr, "w") as errlog, start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(connect(["--vault", str(vault)], env, errlog)) as session:
        with pytest.raises(MCPError) as refused:
            portal.call(session.read_resource, "memvault://vault/MEMORY.md")
        cli = run_memvault("context", "--vault", str(vault), env=env)
    assert "symlink" in str(refused.value) and "\n" not in str(refused.value)
    assert cli.returncode != 0 and str(refused.value) == cli.stderr.strip().removeprefix("memvault: ")
    assert "Traceback" not in stderr.read_text()


def test_a_vault_moved_away_while_serving_is_one_line_and_nothing_is_recreated(tmp_path, tiny_model_path):
    """Fault tried: the vault folder renamed under a running server. Every tool answers the same
    one-line error with exit code 3 (it used to answer an empty list, or a git error), nothing
    appears at the old path, and the vault at its new path is untouched."""
    env = server_env(tmp_path, tiny_model_path)
    vault = new_vault(tmp_path / "vault", env)
    stderr = tmp_path / "server.stderr"
    with open(stderr, "w") as errlog, start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(connect(["--vault", str(vault)], env, errlog)) as session:
        added = portal.call(session.call_tool, "add", {"text": "Deploys happen on Tuesdays"}).structured_content
        vault.rename(tmp_path / "moved")
        for tool, arguments in (("recent", {}), ("search", {"query": "deploys"}), ("add", {"text": "lost?"}),
                                ("status", {}), ("show", {"id": added["id"]})):
            result = portal.call(session.call_tool, tool, arguments)
            assert result.is_error, (tool, result.content[0].text)
            assert result.content[0].text.startswith(f"{vault.resolve()} is no longer a memvault vault"), tool
            assert result.structured_content["error"]["exit_code"] == 3
    assert not vault.exists()
    assert [f["text"] for f in json.loads(run_memvault("recent", "--json", "--vault", str(tmp_path / "moved"),
                                                       env=env).stdout)] == ["Deploys happen on Tuesdays"]


def test_sees_what_other_processes_write_without_a_restart(server):
    """A CLI add and a CLI forget in another process, and a hand-committed edit, are seen by the
    warm server's next search and listing."""
    server.ok("search", query="warm up the index")
    added = server.cli("add", "Bob repairs bicycles on Saturdays", "--tag", "bob", "--json")
    assert added.returncode == 0, added.stderr
    bob = json.loads(added.stdout)["id"]
    assert bob in [hit["id"] for hit in server.ok("search", query="bicycles saturdays")["hits"]]
    assert server.ok("recent", limit=1)["facts"][0]["id"] == bob

    assert server.cli("forget", bob).returncode == 0
    assert bob not in [hit["id"] for hit in server.ok("search", query="bicycles saturdays")["hits"]]

    page = server.vault / "wiki" / "topics" / "kayaks.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("---\ntitle: Kayaks\nupdated: 2026-11-01\n---\n# Kayaks\n\nCarol owns two red kayaks.\n")
    git(server.vault, "add", "wiki")
    git(server.vault, "commit", "-qm", "a page by hand")
    hits = server.ok("search", query="red kayaks")["hits"]
    assert hits and hits[0]["kind"] == "page" and hits[0]["path"] == "wiki/topics/kayaks.md"


def test_a_nightly_dream_in_another_process_is_seen_without_a_restart(server):
    """`memvault dream` run by cron (a scripted local model) consolidates a backdated fact into a
    page: the warm server's next search finds the page, the fact leaves the default scope (the
    watermark moved) but `include_all` still finds it, and MEMORY.md reads as rewritten."""
    from support.fake_llm import FakeLLM, consolidate_everything

    fact = server.ok("add", text="Grace keeps bees on her roof", at="2025-06-01")
    with FakeLLM(default=consolidate_everything("wiki/topics/bees.md", "Bees")) as fake:
        dream = run_memvault("dream", "--vault", str(server.vault), env={
            **server.env, "MEMVAULT_MODEL": "openai/fake-dream", "MEMVAULT_API_BASE": fake.api_base,
            "OPENAI_API_KEY": "sk-test"})
    assert dream.returncode == 0, dream.stderr
    hits = server.ok("search", query="Grace keeps bees")["hits"]
    assert hits[0]["path"] == "wiki/topics/bees.md" and fact["id"] not in [h["id"] for h in hits]
    everything = server.ok("search", query="Grace keeps bees", include_all=True)["hits"]
    assert fact["id"] in [h["id"] for h in everything]
    memory = server.portal.call(server.session.read_resource, "memvault://vault/MEMORY.md").contents[0].text
    assert memory == (server.vault / "MEMORY.md").read_text() and "Grace keeps bees on her roof" in memory
    # a line a hand edit gave a credential is not handed to the agent; the file keeps it
    path = server.vault / "MEMORY.md"
    before = path.read_text()
    path.write_text(before + "- Staging DB_PASSWORD=hunter2 (wiki/topics/bees.md)\n")
    memory = server.portal.call(server.session.read_resource, "memvault://vault/MEMORY.md").contents[0].text
    assert "hunter2" not in memory and "Grace keeps bees on her roof" in memory and "hunter2" in path.read_text()
    path.write_text(before)  # the server is shared by the tests that follow


def test_concurrent_calls_are_answered_and_each_add_is_one_commit(server):
    """Many calls in flight at once on one connection (adds and searches interleaved) all succeed:
    the vault's thread serialises them, and each add is still exactly one commit."""
    before = commit_count(server.vault)

    async def burst():
        results = {}

        async def one(n: int):
            if n % 2:
                results[n] = await server.session.call_tool("add", {"text": f"parallel fact number {n}"})
            else:
                results[n] = await server.session.call_tool("search", {"query": f"parallel fact {n}"})

        async with anyio.create_task_group() as group:
            for n in range(12):
                group.start_soon(one, n)
        return results

    results = server.portal.call(burst)
    assert not [r.content[0].text for r in results.values() if r.is_error]
    assert commit_count(server.vault) == before + 6 and is_clean(server.vault)
    texts = {f["text"] for f in server.ok("recent", limit=6)["facts"]}
    assert texts == {f"parallel fact number {n}" for n in range(1, 12, 2)}


def test_a_write_waiting_for_the_lock_holds_up_no_search(server):
    """Fault tried: another process (a dream, a sync, another agent's CLI) holds the write lock
    while an agent's add waits for it and the agent searches meanwhile. The search waited behind
    the add (one thread for every call) until the lock's holder let go or the add gave up after
    `lock_timeout`. Now the search answers while the add waits; the add lands once the lock frees."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys; from memvault.vault import Vault; v = Vault(sys.argv[1]); "
        "cm = v.storage.write_lock(); cm.__enter__(); print('held', flush=True); sys.stdin.read()"),
        str(server.vault)], env=server.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"

        async def agent():
            async with anyio.create_task_group() as group:
                added = {}

                async def add():
                    added["result"] = await server.session.call_tool("add", {"text": "Ivan waits for the lock"})

                group.start_soon(add)
                await anyio.sleep(1)  # the add is queued, waiting for the lock
                found = await server.session.call_tool("search", {"query": "bicycles"})
                add_waiting = "result" not in added
                holder.stdin.close()  # the holder lets go only now
            return found, add_waiting, added["result"]

        found, add_waiting, added = server.portal.call(agent)
    finally:
        holder.kill()
        holder.wait()
    assert not found.is_error and add_waiting  # answered while the add still waited
    assert not added.is_error, added.content[0].text
    assert "Ivan waits for the lock" in [f["text"] for f in server.ok("recent", limit=3)["facts"]]
    assert is_clean(server.vault)


LEAKY_LIBRARY = '''
import atexit, os, sys

def _leak(event, args):
    # A library that talks on stdout when it loads: Python print, a C-level write, and at exit.
    if event == "import" and args[0] == "fastembed":
        print("LEAK print on import")
        os.write(1, b"LEAK fd write on import\\n")
        atexit.register(print, "LEAK print at exit")

sys.addaudithook(_leak)
'''


def test_stdout_carries_nothing_but_the_protocol(tmp_path):
    """Raw JSON-RPC against a server whose process holds a library that prints on stdout when
    it loads (print, a write to file descriptor 1, a print at exit) and a damaged embedding model
    (onnxruntime and fastembed fail loudly): every line on stdout is a JSON-RPC message, the noise
    lands on stderr, and search still answers, by words, telling the agent so."""
    (tmp_path / "leaky").mkdir()
    (tmp_path / "leaky" / "sitecustomize.py").write_text(LEAKY_LIBRARY)
    damaged = tmp_path / "model"
    damaged.mkdir()
    (damaged / "model.onnx").write_bytes(b"not an onnx model")
    env = server_env(tmp_path, str(damaged))
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "leaky"), env.get("PYTHONPATH", "")])
    vault = new_vault(tmp_path / "vault", env)
    assert run_memvault("add", "Alice prefers green tea", "--vault", str(vault), env=env).returncode == 0

    server = subprocess.Popen([sys.executable, "-m", "memvault", "mcp", "--vault", str(vault)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    messages = []

    def request(number: int, method: str, params: dict) -> dict:
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}) + "\n")
        server.stdin.flush()
        while True:
            message = json.loads(server.stdout.readline())  # a stray line fails right here
            messages.append(message)
            if message.get("id") == number:
                return message

    try:
        request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "raw", "version": "0"}})
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        found = request(2, "tools/call", {"name": "search", "arguments": {"query": "green tea"}})["result"]
        failed = request(3, "tools/call", {"name": "show", "arguments": {"id": "0000000000000000"}})["result"]
    finally:
        rest, stderr = server.communicate(timeout=60)  # closes stdin: the client leaves
    assert [hit["text"] for hit in found["structuredContent"]["hits"]] == ["Alice prefers green tea"]
    assert any("embedding model" in block["text"] for block in found["content"][1:])  # the notice
    assert failed["isError"] and failed["content"][0]["text"] == "no fact with id '0000000000000000'"
    messages += [json.loads(line) for line in rest.splitlines()]  # whatever came after: JSON-RPC too
    assert all(m["jsonrpc"] == "2.0" for m in messages)
    assert stderr.count("LEAK") == 3  # the noise happened, on stderr
    assert server.returncode == 0


def test_numbers_that_are_not_finite_are_refused_as_the_cli_refuses_them(server):
    """Bad input tried, as raw JSON-RPC (the Python SDK's client turns NaN and infinities into null,
    which is the default, before they leave): NaN, Infinity, -Infinity, 1e999 and -1 as min_score,
    NaN as importance, 1e999 as limit and budget. Each is a one-line tool error with exit code 2,
    min_score's worded as the CLI words `--min-score nan`, and nothing is written."""
    cli = server.cli("search", "tea", "--min-score", "nan")
    assert cli.returncode == 2
    refused = as_argument(cli.stderr)
    before = commit_count(server.vault)
    process = subprocess.Popen([sys.executable, "-m", "memvault", "mcp", "--vault", str(server.vault)],
                               env=server.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)

    def call(number: int, tool: str, arguments: str) -> dict:
        params = f'{{"name": "{tool}", "arguments": {arguments}}}'
        process.stdin.write(f'{{"jsonrpc": "2.0", "id": {number}, "method": "tools/call", "params": {params}}}\n')
        process.stdin.flush()
        while (message := json.loads(process.stdout.readline())).get("id") != number:
            pass
        return message["result"]

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}) + "\n")
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        for number, value in enumerate(["NaN", "Infinity", "-Infinity", "1e999", "-1"], start=1):
            result = call(number, "search", f'{{"query": "tea", "min_score": {value}}}')
            assert result["isError"] and result["content"][0]["text"] == refused, value
            assert result["structuredContent"]["error"]["exit_code"] == 2
        for number, (tool, arguments) in enumerate([("add", '{"text": "x", "importance": NaN}'),
                                                    ("search", '{"query": "tea", "limit": 1e999}'),
                                                    ("context", '{"budget": 1e999}')], start=10):
            result = call(number, tool, arguments)
            assert result["isError"] and result["structuredContent"]["error"]["exit_code"] == 2, arguments
            assert "\n" not in result["content"][0]["text"]
    finally:
        process.communicate(timeout=60)
    assert process.returncode == 0
    assert commit_count(server.vault) == before and is_clean(server.vault)


def test_sigterm_ends_a_stdio_server_whose_client_keeps_the_pipe_open(server):
    """Fault tried: SIGTERM (and Ctrl-C) to a stdio server after an acknowledged add, its client
    still holding stdin open. It lingered, answering nothing, until the client wrote again or gave
    up (120 s): the SDK's stdin reader thread, blocked in read(), held up the exit. Now it closes
    the vault and exits at once with 143 (130), and the fact is there."""
    for sig, code, word in ((signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")):
        process = subprocess.Popen([sys.executable, "-m", "memvault", "mcp", "--vault", str(server.vault)],
                                   env=server.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        params = {"name": "add", "arguments": {"text": f"stored before the {word} server stopped"}}
        for message in ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
                        {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}):
            process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        while (answer := json.loads(process.stdout.readline())).get("id") != 1:
            pass
        assert not answer["result"]["isError"]
        started = time.monotonic()
        process.send_signal(sig)
        try:
            process.wait(timeout=20)
        finally:
            process.kill()
        assert process.returncode == code and time.monotonic() - started < 20
        assert process.stderr.read().splitlines()[-1] == f"memvault: {word}"
        assert f"stored before the {word} server stopped" in server.cli("recent").stdout
    assert is_clean(server.vault)


def test_a_full_disk_under_a_tool_call_reads_as_the_cli_says_it():
    """Fault tried (as the index's sqlite raises it when a search fills the disk): the tool error
    was "unexpected error: OperationalError: database or disk is full", exit 1; the CLI says
    "disk full while writing …", exit 9. Both say the latter now."""
    import sqlite3

    from memvault.mcp.server import error_result

    result = error_result(sqlite3.OperationalError("database or disk is full"))
    assert result.is_error and result.structured_content["error"] == {
        "type": "VaultUnwritable", "exit_code": 9,
        "message": "disk full while writing .memvault (the search index or its cache)"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_http_serves_the_same_tools_on_localhost(tmp_path, tiny_model_path):
    """`--http` serves streamable HTTP on 127.0.0.1 and says where: an add and a search through
    it; a second server on the same port fails at once with one line (exit 1)."""
    from mcp import Client

    env = server_env(tmp_path, tiny_model_path)
    vault = new_vault(tmp_path / "vault", env)
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "memvault", "mcp", "--http", "--port", str(port),
                                "--vault", str(vault)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    async def use() -> tuple[dict, dict]:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            added = await client.call_tool("add", {"text": "Erin plays the cello"})
            found = await client.call_tool("search", {"query": "cello"})
            return added.structured_content, found.structured_content

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
                time.sleep(0.1)
        added, found = anyio.run(use)
        taken = run_memvault("mcp", "--http", "--port", str(port), "--vault", str(vault), env=env)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert [hit["id"] for hit in found["hits"]] == [added["id"]]
    assert commit_count(vault) == 2
    said = process.stderr.read().decode()  # where it serves, said once at the start
    assert said.startswith(f"memvault: serving {vault} over MCP at http://127.0.0.1:{port}/mcp"), said
    assert taken.returncode == 1 and taken.stderr == f"memvault: cannot serve on 127.0.0.1:{port}: " \
        "Address already in use\n"


@pytest.mark.parametrize("before", [False, True], ids=["after the command", "before the command"])
def test_a_missing_vault_fails_at_start_with_one_line(tmp_path, before):
    """A path that is not a vault: exit 3, one line on stderr, nothing on stdout, nothing created;
    `memvault --vault PATH mcp` too, never serving the default vault instead."""
    (tmp_path / "home").mkdir()
    env = server_env(tmp_path / "home", "")
    where = ["--vault", str(tmp_path / "nowhere")]
    result = run_memvault(*(where + ["mcp"] if before else ["mcp"] + where), env=env, input="")
    assert result.returncode == 3, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("memvault: ") and result.stderr.count("\n") == 1
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "home" / "data").exists()
