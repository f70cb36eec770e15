"""doctor's checks of search: the embedding cache, the index, the embedding and rerank models."""

from __future__ import annotations

import os
from pathlib import Path

from memvault.formats.layout import CONFIG_FILE
from memvault.health.doctor import FAIL, OK, WARN, Check, Probe
from memvault.health.full import Full
from memvault.index import location
from memvault.index.generation import POINTER
from memvault.index.search import engine, index_status, model_spec, refill_embedding_cache, reindex, rerank_spec
from memvault.storage.store import Storage


def check_embedding_cache(storage: Storage) -> Check:
    """The cache's layout (reading its every page and vector is the full check `cache rows`)."""
    return _cache_check(storage, "embedding cache", whole=False)


def check_cache_rows(storage: Storage) -> Check:
    """sqlite's quick_check over the whole cache, and the length of every stored vector."""
    return _cache_check(storage, "cache rows", whole=True)


def _cache_check(storage: Storage, name: str, whole: bool) -> Check:
    from memvault.index.embedding_cache import cache_problem

    path = _embedding_cache(storage)
    problem = cache_problem(path, whole=whole)
    if problem is None:
        shown = path.relative_to(storage.root) if path.is_relative_to(storage.root) else path
        if not path.exists():
            return Check(name, OK, "empty (filled as texts are embedded)")
        return Check(name, OK, f"{shown}: every page and vector reads cleanly" if whole else f"{shown} opens cleanly")
    return Check(name, WARN, f"damaged ({problem}); the next command that reads it starts it again empty",
                 fix="delete it and refill it from the search index's verified vectors")


def _embedding_cache(storage: Storage) -> Path:
    return engine(storage).cache_path


def _kept_elsewhere(storage: Storage) -> str:
    """Where the index of a vault this user cannot write is kept, as doctor says it ("" if in the vault)."""
    state = engine(storage).state
    return f" (kept in {state}: this user cannot write the vault)" if location.is_users_copy(state) else ""


def repair_embedding_cache(storage: Storage) -> list[str]:
    from memvault.index.embedding_cache import cache_problem, delete_cache

    path = _embedding_cache(storage)
    if cache_problem(path) is None:
        return []
    with storage.index_turn:  # never under another thread's search
        index = storage.search_index
        if index is not None:
            index.close()  # its open cache connection would keep the deleted file
        delete_cache(path)
        refilled = refill_embedding_cache(storage)
    return [f"deleted the damaged embedding cache; refilled {refilled} vector(s) from the search index"]


def check_index(storage: Storage) -> Check:
    # Opening it finds a missing generation, an unreadable catalog or Tantivy directory, counts that
    # disagree; every vector row and catalog page is read by the full check `index rows`.
    return _index_check(storage, index_status(storage))


def check_index_rows(storage: Storage) -> Check:
    """Every vector row against its checksum and every catalog page (sqlite's quick_check): damage
    there is found here, not only by the next search."""
    opened = index_status(storage)
    if opened["missing"] or opened["unavailable"] or opened["damaged"]:
        return Check("index rows", OK, "nothing to read (see search index)")  # which says why, and repairs
    state = index_status(storage, verify=True)
    if state["damaged"]:
        return Check("index rows", WARN, f"damaged ({state['damaged']}); the next search rebuilds it",
                     fix="rebuild it from the vault files")
    return Check("index rows", OK, f"{state['documents']} document(s): every vector matches its checksum, "
                 "the catalog reads cleanly")


def index_files(storage: Storage) -> list[Path]:
    """The files `index rows` reads whole (what doctor's estimate weighs)."""
    root = engine(storage).root
    try:
        live = root / (root / POINTER).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return []
    return [live / "catalog.sqlite", *sorted(live.glob("vectors-*.f32"))]


def _index_check(storage: Storage, state: dict) -> Check:
    state = {"built": not state["missing"], **state}
    if not state["built"]:
        return Check("search index", WARN, "not built yet (the first search builds it)", fix="build it now")
    if state["unavailable"]:
        return Check("search index", WARN, f"cannot be opened: {state['unavailable']} (not damage: free some "
                     "space or make the vault writable)", fix="open it again")
    if state["damaged"]:
        return Check("search index", WARN, f"damaged ({state['damaged']}); the next search rebuilds it",
                     fix="rebuild it from the vault files")
    lag = []
    if state["drift"]:
        lag.append(f"{state['drift']} file(s) changed since indexing")
    summary = f"{state['documents']} document(s){_kept_elsewhere(storage)}"
    if state["pending_embeddings"] and not state["drift"] and not _model_on_disk(storage):
        # Only the model can give them one: a reindex would change nothing (see "embedding model").
        return Check("search index", WARN, f"{summary}; {state['pending_embeddings']} document(s) without a "
                     "vector until the embedding model is on this machine (search uses their words)")
    if state["pending_embeddings"]:
        lag.append(f"{state['pending_embeddings']} document(s) without a vector")
    if lag:
        return Check("search index", WARN, f"{summary}; " + ", ".join(lag) + " (the next search catches up)",
                     fix="reindex")
    return Check("search index", OK, f"{summary}, up to date")


def repair_index(storage: Storage) -> list[str]:
    damaged = index_status(storage, verify=True)["damaged"]
    result = reindex(storage, clear=bool(damaged))
    return [f"{'rebuilt' if damaged else 'reindexed'}: {result['facts']} fact(s), {result['sections']} page section(s)"]


def check_embedding_model(storage: Storage) -> Check:
    name = storage.config.embed_model
    path = storage.config.embed_model_path
    if path:
        origin = "MEMVAULT_EMBED_MODEL_PATH" if os.environ.get("MEMVAULT_EMBED_MODEL_PATH") else CONFIG_FILE
        model_dir = Path(path).expanduser()
        onnx = model_spec(storage).onnx_file
        assert onnx is not None  # a model path is configured
        if not onnx.is_file():
            return Check("embedding model", FAIL, f"{name}: no {onnx.name} in {model_dir} (from {origin}); "
                         "search falls back to words only")
        return _loadable(storage, f"{name} from {model_dir} (from {origin})")
    from memvault.index.embedder import model_cache_dir

    # Where `memvault reindex --download-model` puts the model and where search loads it from.
    cache = model_cache_dir()
    found = cached_model(cache, name)
    if found is not None:
        return _loadable(storage, f"{name} from the model cache ({found})")
    return Check("embedding model", WARN, f"{name} is not in the model cache ({cache}) and searches never "
                 "download it: search uses words only; run `memvault reindex --download-model` once, or set "
                 "MEMVAULT_EMBED_MODEL_PATH to a local ONNX model directory")


def _model_on_disk(storage: Storage) -> bool:
    """Is the embedding model's file where search loads it from (whether it loads is not asked)?"""
    path = storage.config.embed_model_path
    if path:
        onnx = model_spec(storage).onnx_file
        return onnx is not None and onnx.is_file()
    from memvault.index.embedder import model_cache_dir

    return cached_model(model_cache_dir(), storage.config.embed_model) is not None


def _loadable(storage: Storage, where: str) -> Check:
    """The file is there; load it for real (a second or two), since a damaged file looks the same."""
    from memvault.index.embedder import Embedder, ModelUnavailable

    try:
        Embedder(model_spec(storage), threads=1).load()
    except ModelUnavailable as e:
        return Check("embedding model", FAIL, f"{where} does not load: {e}; search falls back to words only")
    return Check("embedding model", OK, f"{where}, loads")


def check_rerank_model(storage: Storage) -> Check:
    """The cross-encoder search reranks with: off, loads, or not on this machine (search works without it)."""
    config = storage.config.rerank
    if not config.enabled:
        return Check("rerank model", OK, "off ([rerank] enabled = false or MEMVAULT_RERANK=0)")
    from memvault.index.embedder import ModelUnavailable, model_cache_dir
    from memvault.index.rerank import Reranker

    spec = rerank_spec(storage)
    if not spec.path and cached_model(model_cache_dir(), spec.name) is None:
        return Check("rerank model", WARN, f"{spec.name} is not in the model cache ({model_cache_dir()}): search "
                     "ranks without it; run `memvault reindex --download-model` once, or set "
                     "MEMVAULT_RERANK_MODEL_PATH to a local ONNX model directory")
    where = f"{spec.name} from {spec.path}" if spec.path else f"{spec.name} from the model cache"
    try:
        Reranker(spec).load()
    except ModelUnavailable as e:
        return Check("rerank model", FAIL, f"{where} does not load: {e}; search ranks without it")
    return Check("rerank model", OK, f"{where}, loads")


def cached_model(cache: Path, name: str) -> Path | None:
    """The cache directory holding this model's ONNX file (hub layout or fastembed's own), if any."""
    stem = name.rsplit("/", 1)[-1].lower()
    if not cache.is_dir():
        return None
    for folder in sorted(cache.iterdir()):
        if folder.is_dir() and stem in folder.name.lower() and next(folder.rglob("*.onnx"), None) is not None:
            return folder
    return None


EMBEDDING_CACHE = Probe(check_embedding_cache, repair_embedding_cache)
INDEX = Probe(check_index, repair_index)
# Gigabytes at a million facts: read by default only where the full checks are quick.
INDEX_ROWS = Probe(check_index_rows, repair_index, full=Full("index rows", files=index_files))
CACHE_ROWS = Probe(check_cache_rows, repair_embedding_cache,
                   full=Full("cache rows", files=lambda storage: [_embedding_cache(storage)]))
EMBEDDING_MODEL = Probe(check_embedding_model)
RERANK_MODEL = Probe(check_rerank_model)
