"""The rerank stage: a cross-encoder (fastembed's TextCrossEncoder) reads the query together with
each of the best fused candidates and judges how well the text answers it.

The model loads lazily, from local files only, once per process. Without it on the machine,
search ranks as before with one notice: it is a refinement, never a requirement.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memvault.base.config import DEFAULT_RERANK_MODEL
from memvault.index.catalog import Catalog
from memvault.index.documents import model_text
from memvault.index.embedder import (
    NOT_CACHED,
    ModelUnavailable,
    fetch_into_cache,
    model_cache_dir,
    not_cached,
    offline_environment,
    one_line,
)
from memvault.index.models import RerankModel, model_file, rerank_model
from memvault.index.ranking import Ranked

# What the model reads of a text: ms-marco passages are a paragraph, the model reads 512 tokens at
# most, and a pair costs in proportion to its tokens, so a long wiki section is judged by its start.
READS_CHARS = 1_500
BATCH_SIZE = 16  # a search's candidates in one run (texts sorted by length, so it pads little)
# One thread. Two cut the MCP server's warm p50 at 100k facts from 52.9 to 39.5 ms on a quiet
# machine, but with another program busy on the other core they doubled it (98.5 against 52.8 ms:
# each run waits for its slower thread), and the pool spins after a run (81 against 53 ms of CPU).
THREADS = 1
# Instead a search's pairs are judged in two halves at once, the second on a worker thread
# (onnxruntime runs without the GIL): 15 pairs took 19 ms instead of 35 for the same CPU time on two
# free cores, and 37 against 36 ms with the other core busy. One core: one part.
PARTS = 2
# What the reranker reads of the question a reply follows (its end: where the question is).
QUESTION_READ_CHARS = 500


@dataclass(frozen=True)
class RerankSpec:
    """Which cross-encoder reranks: its fastembed name and, for offline use, a local directory."""

    name: str = DEFAULT_RERANK_MODEL
    path: str | None = None

    @property
    def profile(self) -> RerankModel:
        return rerank_model(self.name)

    @property
    def onnx_file(self) -> Path | None:
        return model_file(self.path, self.profile.file) if self.path else None


# Loaded models by (name, path): a process searching several vaults loads each one once.
_loaded: dict[tuple[str, str | None], object] = {}


class Reranker:
    """Judges (query, text) pairs, one logit each; loaded on first use, never from the hub."""

    def __init__(self, spec: RerankSpec, notify: Callable[[str], None] | None = None):
        self.spec = spec
        self.notify = notify
        self._model = None
        self._error: str | None = None
        self._told = False
        self._loading = threading.Lock()

    def load_ahead(self) -> None:
        """Start loading the model on a thread of its own, if it is not loaded yet: a one-shot
        search then loads it while the index is checked and the query embedded (onnxruntime builds
        its session without the GIL), rather than after."""
        if self._model is None and self._error is None and not self._loading.locked():
            threading.Thread(target=self._load_quietly, name="memvault-rerank-load", daemon=True).start()

    def settle(self) -> None:
        """Wait for a load begun ahead (a process must not end while onnxruntime builds a session)."""
        with self._loading:
            pass

    def _load_quietly(self) -> None:
        with contextlib.suppress(ModelUnavailable):  # kept in _error; said when the model is wanted
            self.load()

    def available(self) -> bool:
        """Load the model if needed; without it, say so once (search then ranks without it)."""
        try:
            self.load()
        except ModelUnavailable as exc:
            if self.notify is not None and not self._told:
                self.notify(f"{exc}; search ranks without it (`memvault reindex --download-model` fetches it, "
                            "`--no-rerank` or [rerank] enabled = false turns it off)")
            self._told = True
            return False
        return True

    def missing_with(self, embedding_model: str, embedding_error: Exception) -> str | None:
        """One notice for both models when neither was ever downloaded (a newcomer's first
        searches): one cause, one remedy. None when this model loads or fails for another reason."""
        if self.spec.path or NOT_CACHED not in str(embedding_error):
            return None
        try:
            self.load()
        except ModelUnavailable as exc:
            if NOT_CACHED not in str(exc):
                return None
            self._told = True
            return (f"cannot load the embedding model {embedding_model} or the rerank model {self.spec.name}: "
                    f"neither is in the model cache ({model_cache_dir()}); search works by words only until "
                    "they load (run `memvault reindex --download-model` once, or set MEMVAULT_EMBED_MODEL_PATH "
                    "and MEMVAULT_RERANK_MODEL_PATH to local copies)")
        return None

    def load(self):
        with self._loading:  # one load; a caller arriving meanwhile waits for it
            return self._load()

    def _load(self):
        if self._model is not None:
            return self._model
        if self._error is not None:
            raise ModelUnavailable(self._error)
        key = (self.spec.name, self.spec.path)
        shared = _loaded.get(key)
        if shared is not None:
            self._model = shared
            return shared
        offline_environment()
        try:
            self._model = _load(self.spec)
        except ModelUnavailable as exc:
            self._error = str(exc)
            raise
        _loaded[key] = self._model
        return self._model

    def logits(self, query: str, texts: Sequence[str]) -> list[float]:
        """The model's logit for each (query, text) pair, higher = more relevant (models.py maps it to 0..1)."""
        model = self.load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        # Every other text by length, so each part pads as little as the whole would.
        count = _parts() if len(order) > 1 else 1
        parts = [order[k::count] for k in range(count)]

        def judge(part: list[int]) -> list[float]:
            return list(model.rerank(query, [texts[i][:READS_CHARS] for i in part], batch_size=BATCH_SIZE))

        helped = [_helper().submit(judge, part) for part in parts[1:]]
        judged = [judge(parts[0])] + [future.result() for future in helped]
        found = [0.0] * len(texts)
        for part, logits in zip(parts, judged, strict=True):
            for i, logit in zip(part, logits, strict=True):
                found[i] = float(logit)
        return found


_helper_pool = None
_helper_lock = threading.Lock()


def _parts() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(PARTS, cores))


def _helper():
    """The threads that judge a search's other parts, started on first use and kept."""
    global _helper_pool
    with _helper_lock:
        if _helper_pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _helper_pool = ThreadPoolExecutor(PARTS - 1, thread_name_prefix="memvault-rerank")
        return _helper_pool


def _load(spec: RerankSpec):
    from fastembed.rerank.cross_encoder import TextCrossEncoder
    from loguru import logger

    logger.disable("fastembed")  # its own failure lines; memvault says it once
    kwargs: dict = {"local_files_only": True}
    if spec.path:
        onnx = spec.onnx_file
        if not onnx.is_file():  # type: ignore[union-attr]
            raise ModelUnavailable(f"rerank model {spec.name}: no {spec.profile.file} in {spec.path}")
        kwargs["specific_model_path"] = spec.path
    else:
        kwargs["cache_dir"] = str(model_cache_dir())
    try:
        return TextCrossEncoder(spec.name, threads=THREADS, **kwargs)
    except Exception as exc:  # fastembed raises ValueError/OSError/onnx errors alike
        detail = one_line(exc) if spec.path else not_cached(one_line(exc))
        raise ModelUnavailable(f"cannot load rerank model {spec.name}: {detail}") from exc


def download_rerank_model(spec: RerankSpec) -> str:
    """Fetch the rerank model into the model cache (`reindex --download-model`); returns where it is."""
    if spec.path:
        return spec.path

    def make(target: str) -> None:
        from fastembed.rerank.cross_encoder import TextCrossEncoder

        TextCrossEncoder(spec.name, cache_dir=target)

    return fetch_into_cache(make, f"rerank model {spec.name}", "MEMVAULT_RERANK_MODEL_PATH")


def judgement(reranker: Reranker, catalog: Catalog, query: str, first: list[Ranked], candidates: dict,
              replies: bool = True) -> dict[str, tuple[float, float]]:
    """The reranker's (logit, relevance) for the first candidates; {} without its model."""
    if not first:
        reranker.settle()
        return {}
    if not reranker.available():
        return {}
    docs = catalog.by_keys([item.key for item in first] +
                           [candidates[item.key].prev for item in first if candidates[item.key].prev])
    keys = [item.key for item in first if item.key in docs]
    texts = [_as_read(docs[key], docs.get(candidates[key].prev or "") if replies else None) for key in keys]
    profile = reranker.spec.profile
    return {key: (logit, profile.relevance(logit)) for key, logit in zip(keys, reranker.logits(query, texts),
                                                                         strict=True)}


def _as_read(doc, prev) -> str:
    """What the reranker reads of a candidate: a reply to a question is read after the question,
    so "Yes, clarinet and violin" answers "What instruments does she play?" as the thread did."""
    text = model_text(doc.kind, doc.text, doc.title, doc.heading)
    if prev is not None and not prev.secret:
        asked = model_text(prev.kind, prev.text)
        if asked.rstrip().endswith("?"):
            return f"{asked[-QUESTION_READ_CHARS:]}\n{text}"
    return text
