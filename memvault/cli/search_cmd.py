"""Search commands: search, reindex."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from memvault.base import jsonline
from memvault.cli.output import (
    CATEGORY,
    ID,
    NO_MATCHES,
    TAGS,
    WHEN,
    AsOfOption,
    Column,
    FullOption,
    JsonOption,
    VaultOption,
    echo,
    emit_json,
    emit_jsonl,
    nothing,
    notice,
    open_vault,
    progress_bar,
    reader,
    score_style,
    table,
    terminal,
)
from memvault.cli.terminal import current
from memvault.errors import ExitCode, InvalidInput, MemvaultError, error_detail
from memvault.formats.drafts import BOM

# Keys a --stdin JSON line may carry (the CLI option names), mapped to SearchQuery fields.
_STDIN_KEYS = {
    "query": "query", "limit": "limit", "category": "category", "tag": "tag", "source": "source",
    "session": "session", "since": "since", "until": "until", "all": "include_all", "lexical": "lexical_only",
    "explain": "explain", "min-score": "min_score", "rerank": "rerank", "as-of": "as_of",
}


def search(
    query: Annotated[str | None, typer.Argument(help="What to look for, in plain words.", show_default=False)] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many hits to print (1-1000).")] = 10,
    category: Annotated[str | None, typer.Option("--category", "-c", help="Only facts of this category.")] = None,
    tag: Annotated[str | None, typer.Option("--tag", "-t", help="Only facts and pages with this tag.")] = None,
    source: Annotated[str | None, typer.Option("--source", help="Only facts from this source.")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Only facts of this session (one conversation).")] = None,
    since: Annotated[str | None, typer.Option("--since", help="From this time on: 2026-11-01, yesterday, 7d, 12h.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Up to this time (a date includes the whole day).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Also search facts already consolidated into the wiki.")] = False,
    lexical: Annotated[bool, typer.Option("--lexical", help="Match words only; loads no model (no embedding, no reranker).")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show each ranking signal's contribution per hit, and the relevance floor.")] = False,
    min_score: Annotated[float | None, typer.Option("--min-score", help="Relevance floor: hide hits scoring below it (default 0.05; 0 shows every match).", show_default=False)] = None,
    no_rerank: Annotated[bool, typer.Option("--no-rerank", help="Rank without the reranker (faster, less often right first).")] = False,
    as_of: AsOfOption = None,
    full: FullOption = False,
    stdin: Annotated[bool, typer.Option("--stdin", help="One query per input line (text or JSON object); one result line each.")] = False,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Find facts and wiki sections by their words and their meaning, newest-aware.

    By default searches wiki pages and the facts not yet consolidated by dream; --all adds the
    consolidated facts. Hits below the relevance floor are hidden: a query nothing really matches
    prints "no matches" (exit 0). A fact another fact supersedes is marked, its successor listed
    above it (unless the question is about the past). --as-of searches the vault as it stood then
    (built once per moment, aside; --since/--until still filter by the facts' own times).
    With --stdin each line is a query or {"query", "limit", "category", "tag", "source",
    "session", "since", "until", "all", "lexical", "explain", "min-score", "rerank", "as-of"};
    the models load once for all of them.

    Example: memvault search "what does Alice drink" --limit 5 --json
    """
    if stdin and query is not None:
        raise InvalidInput("give either QUERY or --stdin, not both")
    if not stdin and query is None:
        raise InvalidInput("missing QUERY (or use --stdin)")
    vault = open_vault(vault_path)
    options: dict[str, Any] = dict(
        limit=limit, category=category, tag=tag, source=source, session=session, since=since, until=until,
        include_all=all_, lexical_only=lexical, explain=explain, min_score=min_score, rerank=not no_rerank,
        as_of=as_of)
    if query is None:  # (--stdin, as checked above)
        if current().stdin_isatty:
            notice("reading queries from the terminal, one per line; press Ctrl-D on an empty line to end")
        failed = _search_stdin(vault, options, json_, full)
        if failed:
            raise typer.Exit(int(ExitCode.USAGE))
        return
    memory = reader(vault, options.pop("as_of"), tell=not json_)
    request = _query(vault, query, options)
    with progress_bar() as progress:
        hits = memory.search(request, progress=progress)
    if json_:
        found = [hit.to_dict() for hit in hits]
        emit_json({"query": query, "hits": found, "as_of": memory.moment.to_dict()} if as_of else found)
    else:
        _print_hits(vault, request, hits, full)


def _query(vault: Any, text: str, options: dict):
    """The one SearchQuery of a request: dates read in the vault's time zone, category checked."""
    from memvault.index.query import SearchQuery

    return SearchQuery.parse(text, tz=vault.tz, categories=vault.config.categories, **options)


def _search_stdin(vault: Any, defaults: dict, as_json: bool, full: bool) -> int:
    """Answer each input line; a bad line gets an error result and the rest still run."""
    failed = 0
    for number, raw in enumerate(current().stdin, start=1):
        line = raw.rstrip("\r\n").removeprefix(BOM)  # (a Windows tool's byte-order mark)
        if not line.strip():
            continue
        options = dict(defaults)
        # Until a JSON line is known to be good, errors echo the line itself as the query.
        query = line
        try:
            if line.lstrip().startswith("{"):
                request = _parse_request(line)
                query = request.pop("query")
                options.update(request)
            memory = reader(vault, options.pop("as_of"), tell=False)
            search_query = _query(vault, query, options)
            with progress_bar() as progress:
                hits = memory.search(search_query, progress=progress)
        except MemvaultError as e:
            failed += 1
            error = error_detail(e, f"line {number}: {e}")
            if as_json:
                emit_jsonl({"query": query, "error": error})
            else:
                notice(str(error["message"]))
            continue
        past = getattr(memory, "moment", None)
        if as_json:
            emit_jsonl({"query": query, "hits": [hit.to_dict() for hit in hits],
                        **({"as_of": past.to_dict()} if past else {})})
        else:
            echo(f"# {query}")
            if past:
                notice(past.describe())
            _print_hits(vault, search_query, hits, full)
            echo()
    return failed


def _parse_request(line: str) -> dict:
    try:
        item = jsonline.loads(line)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"invalid JSON ({e.msg} at column {e.colno})") from None
    except jsonline.TooDeep as e:
        raise InvalidInput(f"invalid JSON ({e})") from None
    if not isinstance(item, dict):
        raise InvalidInput("expected a JSON object")
    unknown = sorted(set(item) - set(_STDIN_KEYS))
    if unknown:
        raise InvalidInput(f"unknown field(s) {', '.join(unknown)}; use {', '.join(_STDIN_KEYS)}")
    if not isinstance(item.get("query"), str):
        raise InvalidInput('a JSON line needs "query", a string')
    for flag in ("all", "lexical", "explain", "rerank"):
        if flag in item and not isinstance(item[flag], bool):
            raise InvalidInput(f'"{flag}" must be true or false')
    return {_STDIN_KEYS[k]: v for k, v in item.items()}


HIT_COLUMNS = (Column("score", score_style, justify="right"), Column("date", WHEN), Column("category", CATEGORY, optional=True),
               Column("text", text=True), Column("id", ID), Column("tags", TAGS, optional=True))
SIGNALS = ("lexical", "dense", "thread", "date", "recency", "importance", "rerank", "newer_state", "current_state")


def _print_hits(vault: Any, query: Any, hits: list, full: bool = False) -> None:
    from memvault.index.lexical import matching_spans
    from memvault.index.ranking import MIN_SCORE

    floor = MIN_SCORE if query.min_score is None else query.min_score
    if not hits:
        if not vault.index_status().get("documents"):
            nothing(f"{NO_MATCHES}: the vault holds no facts yet (`memvault add` remembers one)")
        else:
            nothing(f"{NO_MATCHES} (relevance floor {floor:g}; --min-score 0 shows every match)")
        return
    rows: list[list[str]] = []
    focus: list[Sequence[tuple[int, int]]] = []
    wrapped: set[int] = set()
    for hit in hits:
        text = hit.text.strip()
        if getattr(hit, "superseded_by", None):  # marked as `context` marks it: the text stays whole
            text = f"(superseded by {hit.superseded_by}) {text}"
        # A page section's id is <path>#<heading-slug>, the same as in --json.
        rows.append([f"{hit.score:.3f}", (hit.at or "")[:10] or "-", hit.category or hit.kind, text, hit.id,
                     " ".join(f"#{tag}" for tag in hit.tags)])
        focus.append(matching_spans(text, query.text))  # what matched shows, even deep in a long text
        if query.explain and hit.explain:
            wrapped.add(len(rows))
            rows.append(["", "", "", _signals(hit.explain), "", ""])
            focus.append(())
    table(HIT_COLUMNS, rows, full=full, empty=NO_MATCHES, focus=focus, wrapped=frozenset(wrapped))
    if len(hits) < query.limit and floor > 0 and not query.explain and terminal() is not None:
        notice(f"hits scoring under {floor:g} (the relevance floor) are left out; --min-score 0 shows them")


def _signals(explain: dict) -> str:
    parts = []
    for name in SIGNALS:
        signal = explain.get(name)
        if signal is None:
            continue
        rank = f" #{signal['rank']}" if "rank" in signal else ""
        parts.append(f"{name}{rank} +{signal['contribution']:.4f}")
    return ", ".join(parts) + f"  (floor {explain['min_score']:g})"


def reindex(
    clear: Annotated[bool, typer.Option("--clear", help="Rebuild from scratch, aside, then swap it in (searches keep working).")] = False,
    download_model: Annotated[bool, typer.Option("--download-model", help="First fetch the embedding and rerank models from the hub into the user cache (searches never download).")] = False,
    json_: JsonOption = False,
    vault_path: VaultOption = None,
) -> None:
    """Bring the search index up to date with the vault files, or rebuild it with --clear.

    Unchanged text is never embedded twice: vectors are cached by model and content.

    Example: memvault reindex --clear
    """
    vault = open_vault(vault_path)
    if download_model:
        _download_models(vault)
    with progress_bar() as progress:
        report = vault.reindex(clear=clear, progress=progress)
    if json_:
        emit_json(report)
        return
    echo(
        f"indexed {report['facts']} facts and {report['sections']} page sections in {report['seconds']:.2f} s "
        f"(embedded {report['embedded']}, reused {report['reused']} cached, removed {report['removed']})"
    )
    if report.get("pending_embeddings"):
        notice(f"{report['pending_embeddings']} documents have no vector yet (embedding model unavailable)")


def _download_models(vault: Any) -> None:
    from memvault.index.models import embedding_model, rerank_model

    name = vault.config.embed_model
    notice(f"downloading embedding model {name} (about {embedding_model(name).download_mb} MB, once; offline this "
           "fails after about 40 s of retries)…")
    notice(f"model {name} is in {vault.download_model()}")
    rerank = vault.config.rerank
    if rerank.enabled:
        notice(f"downloading rerank model {rerank.model} (about {rerank_model(rerank.model).download_mb} MB, once)…")
        notice(f"model {rerank.model} is in {vault.download_rerank_model()}")


def register(app: typer.Typer) -> None:
    from memvault.cli.freetext import FreeTextCommand

    app.command(cls=FreeTextCommand)(search)
    app.command()(reindex)
