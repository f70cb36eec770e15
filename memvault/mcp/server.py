"""The MCP server: memvault's tools and MEMORY.md, over stdio or streamable HTTP, on one warm Vault.

Each tool calls one Vault method on a worker thread (reads on one, writes on another: worker.py)
and answers with the `--json` shape as structured content (and the same JSON as text for the
model). A memvault error becomes a tool error with the CLI's one-line message; the server itself
never stops over a bad call.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at runtime, and
# the tools are closures whose annotation names live in this module.

import inspect
import json
import os
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from contextlib import asynccontextmanager, suppress
from typing import Annotated, Any, get_args

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.types import CallToolResult, ContentBlock, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from memvault import __version__
from memvault.errors import (
    ExitCode,
    InternalError,
    InvalidInput,
    MemvaultError,
    Terminated,
    error_detail,
    error_json,
    unwritable_in,
)
from memvault.mcp import schemas
from memvault.mcp.worker import VaultWorker
from memvault.recall.context import memory_for_prompts
from memvault.storage.gitstore import failure_detail
from memvault.vault import Vault

HOST = "127.0.0.1"  # no authentication: never listen beyond this machine
MEMORY_URI = "memvault://vault/MEMORY.md"

INSTRUCTIONS = """\
memvault is this user's long-term memory: facts in daily logs, consolidated nightly into wiki pages.
Search it before answering questions about the user, their people, projects and past decisions;
`context` gives a prompt-ready bundle within a token budget. Add durable facts as you learn them
(preferences, decisions, events, corrections): one fact per call, in plain words, with a category.
Nothing is merged or overwritten: to correct a fact, add the new one with `supersedes` set to the old
one's id; to retract a fact, `forget` it by id with a reason. `why` traces a memory to its sources."""

# (the SDK's field names; the wire carries them in camelCase: readOnlyHint, ...)
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
FORGETS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

Text = Annotated[str, Field(description="What to remember, in plain words (any length, newlines kept).")]
Query = Annotated[str, Field(description="What to look for, in plain words; matched by words and meaning.")]
Id = Annotated[str, Field(description="A fact id, as `add`, `search` or `recent` return it (16 characters).")]
Tag = Annotated[str | None, Field(description="Only facts (and pages) with this tag.")]
Source = Annotated[str | None, Field(description="Only facts from this source (agent or tool name).")]
Since = Annotated[str | None, Field(description="From this time on: 2026-11-01, 2026-11-01T09:00, yesterday, "
                                                 "7d, 12h.")]
Until = Annotated[str | None, Field(description="Up to this time (a date includes the whole day); same forms as "
                                                 "since.")]
Session = Annotated[str | None, Field(description="Only facts of this session: a conversation, in order.")]
IncludeAll = Annotated[bool, Field(description="Also search facts already consolidated into the wiki (by default: "
                                                "wiki pages and facts not yet consolidated).")]
AsOf = Annotated[str | None, Field(description="The memory as it stood then, read from git: a date or time "
                                               "(2026-06-01, 2026-06-01T09:30, yesterday, 7d), a commit, or HEAD~N "
                                               "(N commits back); the answer's `as_of` names the commit "
                                               "that answered.")]


class MemvaultServer(MCPServer):
    """MCPServer whose argument errors are one line, like every other memvault error."""

    _arguments: dict[str, dict[str, dict]] | None = None  # tool -> argument -> its JSON schema

    async def call_tool(self, name, arguments, context=None):
        if self._arguments is None:
            self._arguments = {t.name: t.input_schema.get("properties", {}) for t in await self.list_tools()}
        if name not in self._arguments:
            return error_result(InvalidInput(f"unknown tool {name!r}; use {', '.join(self._arguments)}"))
        # The SDK would drop a misspelt argument silently, and a search would quietly lose its filter.
        unknown = sorted(set(arguments or {}) - set(self._arguments[name]))
        if unknown:
            takes = ", ".join(sorted(self._arguments[name])) or "no arguments"
            return error_result(InvalidInput(f"unknown argument(s) for {name}: {', '.join(unknown)}; it takes {takes}"))
        mistyped = _mistyped(self._arguments[name], arguments or {})
        if mistyped:
            return error_result(InvalidInput(f"invalid arguments for {name}: {mistyped}"))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if not isinstance(e.__cause__, ValidationError):
                raise
            problems = "; ".join(f"{'.'.join(str(part) for part in err['loc']) or 'arguments'}: {err['msg']}"
                                 for err in e.__cause__.errors())
            return error_result(InvalidInput(f"invalid arguments for {name}: {problems}"))


class _StringsAsSent(FuncMetadata):
    """The SDK decodes every string argument that parses as a JSON list, object or null, unless its
    parameter is exactly `str` (Claude Desktop sends lists as their JSON text). Our optional string
    parameters are `str | None`: `source: "null"` became no filter (a search quietly answered from
    every source) and `reason: "[1]"` was refused as not a string. A string stays as sent wherever
    the parameter takes a string; the rest is decoded as the SDK does."""

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        parsed = super().pre_parse_json(data)
        for key, value in data.items():
            field = self.arg_model.model_fields.get(key)
            if isinstance(value, str) and field is not None and str in (field.annotation, *get_args(field.annotation)):
                parsed[key] = value
        return parsed


def _mistyped(schemas: dict[str, dict], arguments: dict) -> str | None:
    """The first argument whose JSON type the tool's schema does not allow, said in one line.

    The SDK validates in pydantic's lax mode, which reads "10" as 10 and "yes" or "true" as true:
    an `allow_secret: "true"` would store a credential. The schema's types are held to strictly."""
    from jsonschema import Draft202012Validator

    checker = Draft202012Validator.TYPE_CHECKER  # JSON's types: true is no integer, "10" no number
    for key, value in arguments.items():
        schema = schemas.get(key, {})
        allowed = [schema["type"]] if "type" in schema else [s["type"] for s in schema.get("anyOf", []) if "type" in s]
        allowed = [t for types in allowed for t in (types if isinstance(types, list) else [types])]
        if isinstance(value, str) and {"array", "object"} & set(allowed):
            # Some clients (Claude Desktop) send a list as its JSON text; the SDK decodes it.
            with suppress(ValueError):
                value = json.loads(value)
        if allowed and not any(checker.is_type(value, t) for t in allowed):
            given = json.dumps(value, ensure_ascii=False)
            given = given if len(given) <= 40 else given[:39] + "…"
            return f"{key}: must be {' or '.join(allowed)}, got {given}"
    return None


def error_result(error: Exception) -> CallToolResult:
    """A tool error: the one-line message for the model, and `{"error": ...}` as with `--json`."""
    # A full disk, a read-only file system or a denied write, wherever it was raised: one line naming
    # the file, exit 9, as the CLI says it (sqlite's "database or disk is full" was an internal error).
    if not isinstance(error, MemvaultError):
        error = unwritable_in(error) or error
    if not isinstance(error, MemvaultError):
        if os.environ.get("MEMVAULT_DEBUG"):
            traceback.print_exception(error, file=sys.stderr)
        error = InternalError(f"unexpected error: {failure_detail(error)} (set MEMVAULT_DEBUG=1 for details)")
    envelope = error_json(error)
    return CallToolResult(content=[TextContent(type="text", text=str(error_detail(error)["message"]))],
                          structured_content=envelope, is_error=True)


def build_server(worker: VaultWorker) -> MemvaultServer:
    """The server with its tools and resource, answering from `worker`'s vault."""
    categories = ", ".join(worker.vault.config.categories)
    server = MemvaultServer("memvault", title="memvault", version=__version__, instructions=INSTRUCTIONS,
                            log_level="DEBUG" if os.environ.get("MEMVAULT_DEBUG") else "WARNING",
                            lifespan=_stdout_is_stderr)

    async def answer(call: Callable[[Any], Any], render: Callable[[Any], str] | None = None, *,
                     write: bool = False) -> CallToolResult:
        try:
            data, notices = await worker.run(call, write=write)
        except Exception as e:  # noqa: BLE001 - the boundary: a bad call never stops the server
            return error_result(e)
        # What `--json` prints (dates and the like as strings), as data and, compact, as the model's text.
        dumped = json.dumps(data, ensure_ascii=False, default=str)
        content: list[ContentBlock] = [TextContent(type="text", text=render(data) if render else dumped)]
        content += [TextContent(type="text", text=f"memvault: {notice}") for notice in notices]
        return CallToolResult(content=content, structured_content=json.loads(dumped))

    @server.tool(annotations=ADDS)
    async def add(
        text: Text,
        category: Annotated[str, Field(description=f"One of: {categories}.")] = "fact",
        tags: Annotated[list[str] | None, Field(description="Tags: single words, no spaces, commas or '#'.")] = None,
        source: Annotated[str | None, Field(description="Who or what said it: your agent's name.")] = None,
        session: Annotated[str | None, Field(description="Conversation or session id, to read a thread back.")] = None,
        importance: Annotated[float | None, Field(description="0..1; raises the fact in search and MEMORY.md.")] = None,
        at: Annotated[str | None, Field(description="When it happened, if not now: ISO 8601 date or datetime, "
                                                   "or yesterday, 3d, 12h.")] = None,
        allow_secret: Annotated[bool, Field(description="Store a text holding a credential (key, token, password) "
                                                        "anyway; it is then never sent to an LLM. Default: refuse it."
                                            )] = False,
        supersedes: Annotated[str | None, Field(description="The id of an older fact this one replaces (a "
                                                            "correction, a new state); both stay, and search lists "
                                                            "this one first.")] = None,
        key: Annotated[str | None, Field(description="Your name for this fact (one line), e.g. a request id: if a "
                                                     "fact was stored under it already, nothing is added and that "
                                                     "fact is returned. Give one when you may retry the call.")] = None,
    ) -> Annotated[CallToolResult, schemas.Fact]:
        """Remember one fact: appended to its day's log and committed to git. Returns the fact with its id.

        Nothing is merged or deduplicated: the same text twice is two facts, unless both calls give
        the same key (a retry): the second adds nothing and returns the first. A text holding a
        credential is refused unless allow_secret. To correct or update a fact, add the new one with
        `supersedes` set to the old one's id.
        """
        return await answer(lambda vault: vault.add(text, category=category, tags=tags or (), source=source,
                                                    session=session, importance=importance, at=at,
                                                    allow_secret=allow_secret, supersedes=supersedes,
                                                    key=key).to_dict(), write=True)

    @server.tool(annotations=READS)
    async def search(
        query: Query,
        limit: Annotated[int, Field(description="How many hits at most (1-1000).")] = 10,
        category: Annotated[str | None, Field(description=f"Only facts of this category: {categories}.")] = None,
        tag: Tag = None,
        source: Source = None,
        session: Session = None,
        since: Since = None,
        until: Until = None,
        include_all: IncludeAll = False,
        min_score: Annotated[float | None, Field(description="Relevance floor: hits scoring below it are left out "
                                                             "(default 0.05; 0 returns every match).")] = None,
        as_of: AsOf = None,
    ) -> Annotated[CallToolResult, schemas.SearchResult]:
        """Find facts and wiki sections by their words and their meaning, newest-aware; best first.

        Nothing really matching gives no hits (a relevance floor), not the nearest noise. Sees what
        other processes wrote (adds, a nightly dream, a sync) without a restart. A fact another
        supersedes has `superseded_by`, its successor listed above it.
        """
        def run(vault):
            memory = vault.as_of(as_of) if as_of is not None else vault
            hits = memory.search(query, limit=limit, category=category, tag=tag, source=source, session=session,
                                 since=since, until=until, include_all=include_all, min_score=min_score)
            return {"query": query, "hits": [hit.to_dict() for hit in hits], **_moment(memory)}

        return await answer(run)

    @server.tool(annotations=READS)
    async def recent(
        limit: Annotated[int, Field(description="How many facts at most (at least 1).")] = 20,
        since: Since = None,
        until: Until = None,
        category: Annotated[str | None, Field(description=f"Only facts of this category: {categories}.")] = None,
        tag: Tag = None,
        source: Source = None,
        session: Session = None,
        oldest_first: Annotated[bool | None, Field(description="Order; default: oldest first with source or "
                                                                "session (a thread), else newest first.")] = None,
        as_of: AsOf = None,
    ) -> Annotated[CallToolResult, schemas.Facts]:
        """List the newest facts (forgotten ones never appear); with source or session, a thread in order."""
        def run(vault):
            memory = vault.as_of(as_of) if as_of is not None else vault
            facts = memory.recent(limit, since=since, until=until, category=category, tag=tag, source=source,
                                  session=session, oldest_first=oldest_first)
            return {"facts": [fact.to_dict() for fact in facts], **_moment(memory)}

        return await answer(run)

    @server.tool(annotations=READS)
    async def show(id: Id, as_of: AsOf = None) -> Annotated[CallToolResult, schemas.ShownFact]:
        """Show one fact with all its fields, and its chain of supersedes links. A forgotten fact is an
        error that says when and why."""
        def run(vault):
            memory = vault.as_of(as_of) if as_of is not None else vault
            view = memory.show(id)
            view.live()  # a forgotten fact: FactForgotten says when and why
            return {**{k: v for k, v in view.to_dict().items() if k != "forgotten"}, **_moment(memory)}

        return await answer(run)

    @server.tool(annotations=FORGETS)
    async def forget(
        id: Id,
        reason: Annotated[str | None, Field(description="Why, for the audit trail (one line).")] = None,
    ) -> Annotated[CallToolResult, schemas.ForgetResult]:
        """Forget a fact: a committed tombstone hides it from search, listings and consolidation for good.

        The log line stays in git history. Forgetting twice changes nothing. Wiki pages citing the
        fact (`cited_by`) are hidden from search at once and rewritten by the next dream.
        """
        return await answer(lambda vault: vault.forget(id, reason).to_dict(), write=True)

    @server.tool(annotations=READS)
    async def context(
        query: Annotated[str | None, Field(description="What the prompt is about; without it: MEMORY.md and the "
                                                       "most recent facts.")] = None,
        budget: Annotated[int, Field(description="Most tokens the bundle may take (cl100k_base).")] = 2000,
        recent: Annotated[int, Field(description="How many recent facts to consider (0: none).")] = 20,
        relevant: Annotated[int, Field(description="How many search hits to consider (0: none).")] = 20,
        as_of: AsOf = None,
    ) -> Annotated[CallToolResult, schemas.Bundle]:
        """A prompt-ready memory bundle, never over the token budget: MEMORY.md, then what is relevant to
        the query, then the latest facts, each with its id or page and date. The text is the markdown."""
        def run(vault):
            memory = vault.as_of(as_of) if as_of is not None else vault
            return {**memory.context(query, budget=budget, recent=recent, relevant=relevant).to_dict(),
                    **_moment(memory)}

        return await answer(run, render=_bundle_text)

    @server.tool(annotations=READS)
    async def status(as_of: AsOf = None) -> Annotated[CallToolResult, schemas.Status]:
        """Where the vault stands: facts, days, pages, dream progress, search index, remote, lock (with
        as_of: its facts, pages and dream progress then)."""
        return await answer(lambda vault: vault.status(as_of=as_of))

    @server.tool(annotations=READS)
    async def why(
        target: Annotated[str, Field(description="A line of MEMORY.md (its number, or words it holds), a page "
                                                 "section (wiki/<zone>/<page>.md#<heading-slug>, as search gives "
                                                 "it) or a fact id.")],
    ) -> Annotated[CallToolResult, schemas.Why]:
        """Trace a memory back to its sources: the page and sections, the facts they cite, and for each
        fact the commits that added, consolidated, superseded or forgot it."""
        return await answer(lambda vault: vault.why(target).to_dict())

    @server.resource(MEMORY_URI, name="MEMORY.md", title="What the vault remembers", mime_type="text/markdown",
                     description="The vault's bounded summary for prompts, rewritten by the nightly dream.")
    async def memory() -> str:
        try:
            # what a prompt may read of it: memvault.recall.context leaves out the lines it must not show
            text, _ = await worker.run(lambda vault: memory_for_prompts(vault.storage) or "")
        except MemvaultError as e:
            # The reason, in the one line the CLI would print; anything else the SDK reports as a crash.
            raise ResourceError(" ".join(str(e).split())) from None
        return text

    for tool in server._tool_manager.list_tools():  # (the SDK offers no public way to reach them)
        tool.fn_metadata = _StringsAsSent.model_construct(**dict(tool.fn_metadata))
        # The SDK sends the docstring as written, its source indentation included; a paragraph is
        # one line, which the client wraps.
        tool.description = "\n\n".join(" ".join(part.split()) for part in inspect.cleandoc(tool.description or "")
                                        .split("\n\n"))
    return server


def _moment(memory) -> dict:
    """`{"as_of": ...}` for an answer from the vault as of a moment, else nothing."""
    found = getattr(memory, "moment", None)
    return {"as_of": found.to_dict()} if found is not None else {}


def _bundle_text(bundle: dict) -> str:
    """The bundle's markdown; for an empty one, why (as the CLI says it), never an empty answer."""
    if bundle["markdown"].strip():
        return bundle["markdown"]
    if bundle["omitted"]:
        return f"nothing to show: {bundle['omitted']} item(s) did not fit in {bundle['budget']} tokens"
    return "nothing to show"


@asynccontextmanager
async def _stdout_is_stderr(_server):
    # By now the stdio transport holds its own copy of stdout and has pointed file descriptor 1 at
    # stderr. Rebinding sys.stdout as well sends a stray print() of any library to stderr even
    # from an unflushed buffer at exit, when the transport has given descriptor 1 back.
    sys.stdout.flush()
    sys.stdout = sys.stderr
    yield {}


def serve(worker: VaultWorker, port: int | None = None) -> None:
    """Run the server until the client goes away: stdio, or streamable HTTP on 127.0.0.1:`port`."""
    Vault.search_on_one_thread()  # a steady search beside the client, rather than a pool's bursts
    server = build_server(worker)
    try:
        if port is None:
            # Ctrl-C raises as SIGTERM does (memvault.cli): asyncio's own handler, installed only
            # over Python's default one, would cancel the server quietly and leave the exit to wait
            # for the stdin reader below.
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, _interrupt)
            if sys.stdin.isatty():  # typed in a terminal, where it would otherwise sit there silently
                sys.stderr.write(f"memvault: serving {worker.vault.root} over MCP on stdin and stdout, for an MCP "
                                 "client to start (see `memvault mcp --help`); Ctrl-C stops it\n")
                sys.stderr.flush()
            try:
                server.run("stdio")
            except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM (memvault.errors.Terminated)
                _exit_now(worker, stop)
        else:
            _check_port(port)
            # a server in a terminal says where it is (one a client starts on a pipe needs no word)
            sys.stderr.write(f"memvault: serving {worker.vault.root} over MCP at http://{HOST}:{port}/mcp "
                             "(Ctrl-C stops it)\n")
            sys.stderr.flush()
            server.run("streamable-http", host=HOST, port=port)
    finally:
        worker.close()
        if port is None:
            # Whatever runs at exit (atexit hooks, finalizers) writes to stderr, never to the client.
            os.dup2(sys.stderr.fileno(), 1)


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def _exit_now(worker: VaultWorker, stop: KeyboardInterrupt) -> None:
    """End a stdio server at once once its vault is closed. The SDK reads stdin on a thread that
    stays blocked in read() until the client writes or closes the pipe, and a normal exit waits
    for it: after SIGTERM a server lingered, answering nothing, until its client gave up (120 s)."""
    worker.close()  # after the call under way, if any: a write is finished, never cut
    os.dup2(sys.stderr.fileno(), 1)
    terminated = isinstance(stop, Terminated)
    sys.stderr.write(f"memvault: {'terminated' if terminated else 'interrupted'}\n")
    sys.stderr.flush()
    os._exit(int(ExitCode.TERMINATED if terminated else ExitCode.INTERRUPTED))


def _check_port(port: int) -> None:
    """A port already taken is one line and exit 1, not uvicorn's exit 3 (memvault's NOT_FOUND)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((HOST, port))
        except OSError as e:
            raise MemvaultError(f"cannot serve on {HOST}:{port}: {e.strerror or e}") from None
