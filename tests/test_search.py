"""Search as a user sees it: finding facts by words and meaning, filters, scope, ranking, CLI."""

from __future__ import annotations

import json
import textwrap

import pytest
from support.cli import run_memvault
from support.git import commit_count, is_clean

from memvault.errors import InvalidInput


def ids(hits):
    return [h.id for h in hits]


@pytest.mark.real_model
def test_finds_a_fact_by_its_words_and_by_its_meaning(vault):
    tea = vault.add("Alice prefers green tea in the morning", category="preference", tags=["alice"])
    vault.add("The team moved the database to Postgres", category="decision")
    vault.add("Bob is allergic to peanuts", tags=["bob"])

    assert ids(vault.search("green tea"))[0] == tea.id
    # No word in common with the fact: only the embedding can find it.
    assert ids(vault.search("which beverage does she like to drink"))[0] == tea.id
    # Lexical-only mode answers by words and does not rank unrelated facts.
    assert ids(vault.search("peanuts", lexical_only=True)) == [ids(vault.search("peanuts"))[0]]


def test_stemming_matches_other_forms_of_a_word(vault):
    fact = vault.add("Carol went hiking in the Alps last summer")
    assert ids(vault.search("hikes", lexical_only=True)) == [fact.id]


def test_hits_carry_the_contract_fields(vault):
    fact = vault.add("Dana moved to Lyon", category="event", tags=["dana", "move"], source="agent-7",
                     at="2025-03-04T10:00")
    hit = vault.search("Lyon")[0]
    data = hit.to_dict()
    assert data["id"] == fact.id and data["kind"] == "fact" and data["text"] == "Dana moved to Lyon"
    assert data["category"] == "event" and data["tags"] == ["dana", "move"] and data["source"] == "agent-7"
    assert data["at"].startswith("2025-03-04T10:00") and data["path"] == "logs/2025/2025-03-04.md"
    assert isinstance(data["score"], float) and "heading" not in data


def test_filters_narrow_results_in_both_halves(vault):
    vault.add("Coffee with Erin about the garden", category="moment", tags=["erin"], source="chat",
              at="2025-01-10")
    vault.add("Coffee beans are stored in the pantry", category="fact", tags=["home"], source="notes",
              at="2025-06-10")
    vault.add("Erin likes strong coffee", category="preference", tags=["erin"], source="chat",
              at="2025-09-10")

    def texts(**filters):
        return {h.text for h in vault.search("coffee", **filters)}

    assert texts(category="preference") == {"Erin likes strong coffee"}
    assert texts(tag="erin") == {"Coffee with Erin about the garden", "Erin likes strong coffee"}
    assert texts(source="notes") == {"Coffee beans are stored in the pantry"}
    assert texts(since="2025-06-01", until="2025-06-30") == {"Coffee beans are stored in the pantry"}
    assert texts(until="2025-01-10") == {"Coffee with Erin about the garden"}
    # Filters hold for the dense half too (a query sharing no word with the facts, only letters,
    # which is what the tiny test model calls meaning).
    pantry = {"Coffee beans are stored in the pantry"}
    assert {h.text for h in vault.search("kofee beanz pantree", tag="home")} == pantry
    assert vault.search("kofee beanz pantree", tag="erin") == []


def test_bad_search_input_is_refused_with_a_clear_error(vault):
    """Bad inputs tried: empty query, blank query, limit 0, limit 5000, limit as text, unknown
    category, unparseable --since, --since after --until, empty tag."""
    vault.add("anything at all")
    for kwargs in ({"query": ""}, {"query": "   "}, {"query": "x", "limit": 0}, {"query": "x", "limit": 5000},
                   {"query": "x", "limit": "3"}, {"query": "x", "category": "nonsense"},
                   {"query": "x", "since": "last tuesday-ish"},
                   {"query": "x", "since": "2025-02-01", "until": "2025-01-01"}, {"query": "x", "tag": ""}):
        query = kwargs.pop("query")
        with pytest.raises(InvalidInput):
            vault.search(query, **kwargs)


def test_default_scope_is_pages_and_facts_after_the_watermark(vault):
    old = vault.add("Frank adopted a cat named Miso", at="2025-01-05")
    new = vault.add("Frank's cat Miso likes the balcony", at="2025-02-20")
    # Before the watermark but carried by no page (a late or skipped fact): stays in scope.
    stranded = vault.add("Frank's cat Miso was ill in January", at="2025-01-20")
    page = vault.root / "wiki" / "people" / "frank.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(textwrap.dedent("""\
        ---
        title: Frank
        zone: people
        tags: [frank, pets]
        created: 2025-01-31
        updated: 2025-01-31
        sources: []
        ---
        # Frank

        ## Pets
        Frank has a cat called Miso, adopted in January 2025.[^OLD]
        """).replace("OLD", old.id))
    with open(vault.root / "log.md", "a", encoding="utf-8") as log:
        log.write("\n- 2025-02-01 dream: batch consolidated watermark=2025-01-31\n")

    scoped = ids(vault.search("Miso the cat"))
    assert old.id not in scoped and "wiki/people/frank.md#pets" in scoped
    assert new.id in scoped and stranded.id in scoped
    assert old.id not in ids(vault.search("Miso adopted", lexical_only=True))
    assert stranded.id in ids(vault.search("Miso ill", lexical_only=True))
    assert old.id in ids(vault.search("Miso the cat", include_all=True))
    # Facts brought into scope by id still obey the other filters, in the dense half too (a query
    # sharing no word with the fact).
    assert stranded.id in ids(vault.search("Mizo was sik in Janury", since="2025-01-15"))
    assert stranded.id not in ids(vault.search("Mizo was sik in Janury", until="2025-01-10"))
    assert stranded.id not in ids(vault.search("Mizo was sik in Janury", category="event"))


def test_page_sections_are_hits_with_heading_and_tags_and_no_frontmatter(vault):
    page = vault.root / "wiki" / "topics" / "gardening.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(textwrap.dedent("""\
        ---
        title: Gardening
        zone: topics
        tags: [garden, hobby]
        created: 2025-04-01
        updated: 2025-05-02
        sources: [aaaa]
        ---
        # Gardening

        ## Tomatoes
        Grace grows cherry tomatoes on the balcony.[^aaaa]

        ## Roses
        The roses need pruning in March.
        """))
    hits = vault.search("cherry tomatoes balcony")
    top = hits[0]
    assert top.id == "wiki/topics/gardening.md#tomatoes" and top.kind == "page"
    assert top.heading == "Tomatoes" and top.tags == ["garden", "hobby"] and top.path == "wiki/topics/gardening.md"
    assert "zone:" not in top.text and top.to_dict()["heading"] == "Tomatoes"
    assert top.at.startswith("2025-05-02")
    assert ids(vault.search("hobby", lexical_only=True, tag="garden"))  # tags are searchable and filterable


def test_recency_prefers_the_newer_of_two_conflicting_facts(vault):
    older = vault.add("Hana's phone number is 0612 445 901", at="2024-01-15")
    newer = vault.add("Hana's phone number is 0699 120 378", at="2025-08-01")
    assert ids(vault.search("what is Hana's phone number"))[:2] == [newer.id, older.id]


def test_old_events_are_not_buried_by_newer_facts(vault):
    trip = vault.add("Ivan travelled to Japan and climbed Mount Fuji", category="event", at="2019-07-01")
    vault.add_many([{"text": f"Ivan had a routine team meeting number {i}", "at": "2025-10-01"} for i in range(30)])
    assert ids(vault.search("when did Ivan climb Fuji in Japan"))[0] == trip.id


def test_importance_breaks_a_tie(vault):
    vault.add("Jun's locker code is 4411", at="2025-05-01T10:00")
    important = vault.add("Jun's locker code is 4411", at="2025-05-01T10:00", importance=1.0)
    assert ids(vault.search("Jun locker code"))[0] == important.id


def test_explain_shows_each_signal(vault):
    vault.add("Kim bakes sourdough bread on Sundays")
    hit = vault.search("sourdough", explain=True)[0]
    assert set(hit.explain) >= {"lexical", "dense", "recency", "importance", "total"}
    parts = sum(hit.explain[s]["contribution"] for s in ("lexical", "dense", "recency", "importance"))
    assert parts == pytest.approx(hit.score, abs=1e-4)
    assert vault.search("sourdough")[0].explain is None


def test_cli_search_json_and_text(cli):
    cli("add", "Lena plays the cello in an orchestra", "--tag", "lena")
    result = cli("search", "cello", "--json")
    assert result.exit_code == 0
    hits = json.loads(result.stdout)
    assert hits[0]["text"] == "Lena plays the cello in an orchestra"
    assert set(hits[0]) == {"id", "kind", "text", "score", "at", "category", "tags", "source", "path", "session",
                            "secret", "supersedes", "superseded_by"}
    text = cli("search", "cello", "--explain")
    assert "Lena plays the cello" in text.stdout and "lexical #1" in text.stdout and "(floor 0.05)" in text.stdout


def test_cli_search_stdin_answers_one_line_per_query(cli):
    """Bad lines tried: limit 0, an object without "query", a number as query, a Python-style
    option name (`lexical_only`)."""
    cli("add", "Mia's birthday is on 3 March")
    cli("add", "Noah drives a red bicycle to work")
    queries = ('birthday\n{"query": "bicycle", "limit": 1, "lexical": true}\n\n{"query": "x", "limit": 0}\n'
               '{"limit": 3}\n{"query": 7}\n{"query": "bicycle", "lexical_only": true}\n')
    result = cli("search", "--stdin", "--json", input=queries)
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 6
    assert lines[0]["query"] == "birthday" and lines[0]["hits"][0]["text"] == "Mia's birthday is on 3 March"
    assert [h["text"] for h in lines[1]["hits"]] == ["Noah drives a red bicycle to work"]
    assert lines[2]["error"]["type"] == "InvalidInput"
    # A line without a string query, or with a name that is not a CLI option, is refused; the
    # error echoes the line as read, so `query` is always a string.
    assert lines[3] == {"query": '{"limit": 3}', "error": {**lines[3]["error"], "type": "InvalidInput"}}
    assert '"query"' in lines[3]["error"]["message"] and "line 5" in lines[3]["error"]["message"]
    assert lines[4]["query"] == '{"query": 7}' and "error" in lines[4]
    assert "lexical_only" in lines[5]["error"]["message"]
    assert result.exit_code == 2  # some lines failed; the others were still answered


def test_cli_bad_input_exits_non_zero_and_changes_nothing(cli, vault_dir):
    """Bad inputs tried: missing query, query plus --stdin, --limit 0, unknown --category, bad --until,
    a --stdin line that is not JSON, a --stdin object with an unknown field."""
    cli("add", "Olivia collects stamps")
    before = commit_count(vault_dir)
    for args, stdin in ((("search",), None), (("search", "x", "--stdin"), ""), (("search", "x", "--limit", "0"), None),
                        (("search", "x", "--category", "nope"), None), (("search", "x", "--until", "soonish"), None),
                        (("search", "--stdin", "--json"), "{not json\n"),
                        (("search", "--stdin", "--json"), '{"query": "x", "colour": "red"}\n')):
        result = cli(*args, input=stdin)
        assert result.exit_code == 2, args
    assert commit_count(vault_dir) == before and is_clean(vault_dir)


QUERY_SYNTAX = ["(" * 3000 + "protocol" + ")" * 3000, "(" * 10_000, "what is http:* ?", "text:*", "tag:*",
                "protocol NOT http", '"protocol', "http protocol^-2", "[protocol TO z]", "-protocol", "protocol~", "\\"]


def test_query_syntax_is_searched_as_plain_text(vault_dir):
    """Bad input tried, in real processes (a crash would take the test runner with it): 3000 and
    10000 nested parentheses (these overflowed the query parser's stack: exit 139; the longest
    query taken is 10000 characters), words followed
    by `:*` (an unknown field, a field that is not a fast field), an operator word, an unclosed
    quote, a boost, a range, an exclusion, a fuzzy marker and a lone backslash. Each is searched as
    the words it holds; in a --stdin stream a `field:*` line is answered like any other."""
    from memvault import Vault

    Vault.open(vault_dir).add("The http protocol carries text and tag lines")
    assert run_memvault("reindex", "--vault", str(vault_dir)).returncode == 0  # no index notice below
    for query in QUERY_SYNTAX:
        result = run_memvault("search", "--lexical", "--json", "--vault", str(vault_dir), "--", query)
        assert result.returncode == 0 and result.stderr == "", (query[:20], result.returncode, result.stderr)
        hits = [h["text"] for h in json.loads(result.stdout)]
        words = "protocol" in query or "http" in query or "text" in query or "tag" in query
        assert hits == (["The http protocol carries text and tag lines"] if words else []), query[:20]
    lines = '{"query": "foo:*"}\n{"query": "http:*"}\n' + "(" * 10_000 + "\n"
    result = run_memvault("search", "--stdin", "--json", "--lexical", "--vault", str(vault_dir), input=lines)
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [len(a["hits"]) for a in answers] == [0, 1, 0]


def test_without_the_model_search_answers_by_words_with_one_notice(vault_dir, tmp_path):
    """Bad input tried: MEMVAULT_EMBED_MODEL_PATH pointing at a directory with no model."""
    from memvault import Vault

    Vault.open(vault_dir).add("Paula repairs vintage radios")
    env = {"MEMVAULT_EMBED_MODEL_PATH": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    result = run_memvault("search", "vintage radios", "--json", "--vault", str(vault_dir), env=env)
    assert result.returncode == 0
    assert json.loads(result.stdout)[0]["text"] == "Paula repairs vintage radios"
    notices = [line for line in result.stderr.splitlines() if "embedding model" in line]
    assert len(notices) == 1 and "words only" in notices[0]


def test_python_api_and_cli_return_the_same_hits(cli, vault_dir):
    from memvault import Vault

    for text in ("Quinn runs marathons", "Quinn's marathon best is 3h10", "Rita swims in the lake"):
        cli("add", text)
    api = [h.to_dict() for h in Vault.open(vault_dir).search("marathon running", limit=3)]
    assert json.loads(cli("search", "marathon running", "--limit", "3", "--json").stdout) == api


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_search_and_dream_read_a_page_header_alike(vault, newline):
    """Search shows the title, tags and date dream reads from the same header (Windows line ends
    too); a header that is not YAML (bad input) hides nothing of the body from either."""
    from memvault.storage.wiki import read_page

    zone = vault.root / "wiki" / "places"
    zone.mkdir(parents=True, exist_ok=True)
    good = "---\ntitle: Lisbon trip\ntags: [travel, portugal]\ncreated: 2025-03-01\nupdated: 2025-03-09\n---\n" \
           "Trams climb the hills of Alfama every morning.\n"
    (zone / "lisbon.md").write_bytes(good.replace("\n", newline).encode())
    (zone / "porto.md").write_text("---\ntitle: [unclosed\n---\nPort wine cellars line the river in Gaia.\n")

    hit = vault.search("trams Alfama hills")[0]
    page = read_page(vault.root, "wiki/places/lisbon.md")
    if newline == "\n":
        assert (hit.heading, hit.tags, hit.at) == (page.title, page.tags, page.updated)
    assert (hit.id, hit.heading, hit.tags, hit.at) == (
        "wiki/places/lisbon.md#lisbon-trip", "Lisbon trip", ["travel", "portugal"], "2025-03-09")
    assert "title:" not in hit.text
    broken = vault.search("port wine cellars")[0]
    assert broken.path == "wiki/places/porto.md" and broken.text == "Port wine cellars line the river in Gaia."
    assert read_page(vault.root, "wiki/places/porto.md").body == broken.text


def test_scores_are_comparable_across_queries(vault):
    """Scores mean the same for every query: a match by words and meaning scores high, a match by
    meaning alone (no shared word) at most the meaning share, words alone (--lexical) on their own
    scale; a query that matches nothing answers []. Before, each list was divided by its best
    score, so any query's best hit looked like a perfect match."""
    vault.add("plain line")
    vault.add("Alice prefers green tea")
    both = vault.search("green tea")[0]
    meaning_only = vault.search("grean tee")[0]  # no word in common: only the embedding sees it
    assert meaning_only.text == both.text == "Alice prefers green tea"
    assert both.score > 0.55  # more than words alone can give (half): the meaning agrees
    assert meaning_only.score < both.score and meaning_only.score <= 0.5 * 1.07  # recency, importance
    assert vault.search("green tea", lexical_only=True)[0].score > 0.9  # one half asked: full scale
    assert vault.search("quantum chromodynamics") == []


@pytest.mark.real_model
def test_a_lexical_candidate_below_the_dense_cut_keeps_its_meaning_part(vault, monkeypatch):
    import memvault.index.search as search_module

    # Seven facts nearer the query's meaning fill the dense half's list (5 candidates per half here);
    # the fact holding the query's word is found by words and must still get its cosine.
    monkeypatch.setattr(search_module, "CANDIDATES_MIN", 5)
    monkeypatch.setattr(search_module, "CANDIDATES_PER_HIT", 0)
    for text in ("Kim bakes rye loaves every weekend", "Kim kneads bread dough on Saturdays",
                 "Kim makes fresh baguettes at home", "Kim baked a loaf of whole wheat bread",
                 "Kim loves baking bread in her oven", "Kim bakes banana bread for her neighbours",
                 "Kim took a bread baking class"):
        vault.add(text)
    target = vault.add("The quarterly budget review mentioned sourdough once")
    hits = {h.id: h for h in vault.search("Kim baking sourdough bread", limit=10, min_score=0, explain=True)}
    hit = hits[target.id]
    assert hit.explain["dense"]["rank"] > 5
    assert hit.explain["dense"]["contribution"] > 0


@pytest.mark.real_model
@pytest.mark.parametrize("passes", [1, 2])
def test_a_warm_process_scoring_a_projection_first_returns_the_full_products_hits(vault, monkeypatch, passes):
    """The coarse first pass (a long-lived process's second search onwards) must give the hits and
    scores of scoring every row, including rows appended after the projection was made; in two
    passes too (the projection's first directions, then the rest for the rows those keep), as a
    vault of 200k facts or more is scored (here every vault counts as one)."""
    import memvault.index.vectors as vectors_module
    from memvault.index.search import engine

    topics = ["green tea", "a used bicycle", "the Lisbon trip", "jazz concerts", "Rust lessons", "the garden",
              "a chess club", "sourdough bread", "the dentist", "a mountain hike"]
    vault.add_many([{"text": f"{name} talked about {topic} on day {n}"}
                    for n in range(12) for name in ("Ana", "Ben", "Caro") for topic in topics])
    queries = ["what does Ana drink", "cycling", "holiday in Portugal", "music night", "learning a language",
               "who bakes bread", "teeth", "walking in the mountains"]
    exact = {q: [(h.id, round(h.score, 6)) for h in vault.search(q, limit=10, min_score=0)] for q in queries}

    monkeypatch.setattr(vectors_module, "COARSE_MIN_ROWS", 100)
    monkeypatch.setattr(vectors_module, "SHORTLIST_MIN", 60)
    monkeypatch.setattr(vectors_module, "SHORTLIST_PER_HIT", 1)
    if passes == 2:
        monkeypatch.setattr(vectors_module, "TWO_PASS_MIN_ROWS", 100)
        monkeypatch.setattr(vectors_module, "FIRST_PASS_PER_SHORTLIST", 3)  # 180 rows of 360 kept
    for q in queries:  # the first of these makes the projection, every later one scores it first
        assert [(h.id, round(h.score, 6)) for h in vault.search(q, limit=10, min_score=0)] == exact[q]
    vectors = engine(vault.storage).open().vectors
    assert vectors._coarse is not None and vectors._coarse.rows == 360

    late = vault.add("Ana switched from green tea to matcha this spring")
    hits = vault.search("Ana matcha green tea", limit=3, min_score=0)
    assert hits[0].id == late.id  # a row appended after the projection is scored exactly
    assert vectors._coarse.rows == 360


def test_a_search_writes_nothing_in_the_home_and_says_nothing_of_it_when_the_cache_cannot_be_written(
        vault_dir, tmp_path):
    """onnxruntime keeps a telemetry device id under ~/.cache/Microsoft: with a read-only home (or an
    XDG_CACHE_HOME it cannot make) every search printed its warning, in colour, on stderr."""
    assert run_memvault("add", "Alice drinks green tea", "--vault", str(vault_dir)).returncode == 0
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    done = run_memvault("search", "tea", "--json", "--vault", str(vault_dir),
                        env={"XDG_CACHE_HOME": str(blocked / "cache")})  # root too cannot make it
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["text"] == "Alice drinks green tea"
    assert "telemetry" not in done.stderr and "\x1b" not in done.stderr, done.stderr

    cache = tmp_path / "cache"
    assert run_memvault("search", "tea", "--vault", str(vault_dir), env={"XDG_CACHE_HOME": str(cache)}).returncode == 0
    assert not (cache / "Microsoft").exists()


def test_a_word_every_fact_holds_is_still_found_after_a_forget(vault):
    """Fault tried: 40 facts holding "tea", one forgotten. The index still counted the forgotten
    fact for the word but not among the facts, so the word weighed less than nothing and every
    match fell under the floor, until `reindex --clear`."""
    added = vault.add_many([f"note {i}: Bob drinks tea in the morning" for i in range(40)])
    assert len(vault.search("tea", lexical_only=True, limit=50)) == 40
    vault.forget(added[0].id)
    found = vault.search("tea", lexical_only=True, limit=50)
    assert len(found) == 39 and added[0].id not in {hit.id for hit in found}
    assert min(hit.score for hit in found) > 0.5
