"""The embedding model (fastembed, loaded lazily and only from local files) and its vector cache."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memvault.base.config import DEFAULT_EMBED_MODEL
from memvault.index.models import EmbeddingModel, embedding_model, model_file

if TYPE_CHECKING:
    import numpy as np

DIMENSIONS = 384
BATCH_SIZE = 256
# The model reads a text's first 256 tokens, and a token spans at most about a hundred characters
# (a longer word is one unknown token), so nothing past this many characters changes a vector. The
# tokenizer, though, would split all of it first: a 60 MB fact (a log hand-edited or pulled from
# a remote; `add` takes 1 MiB) cost 4.7 GB of memory before it was cut here.
MODEL_READS_CHARS = 32_768


class ModelUnavailable(Exception):
    """The embedding model could not be loaded from local files; search falls back to lexical."""


@dataclass(frozen=True)
class ModelSpec:
    """Which model embeds the vault: its fastembed name and, for offline use, a local directory."""

    name: str = DEFAULT_EMBED_MODEL
    path: str | None = None

    @property
    def profile(self) -> EmbeddingModel:
        return embedding_model(self.name)

    @property
    def onnx_file(self) -> Path | None:
        """The ONNX file of the local copy, when the model is read from a path."""
        return model_file(self.path, self.profile.file) if self.path else None

    @property
    def identity(self) -> str:
        """A key that changes when the vectors would change (name, and which ONNX file at the path).

        Two builds of one model (fp32 and int8) share a name but not their vectors, so the
        size of the local model file is part of the key; reading it costs one stat.
        """
        if not self.path:
            return self.name
        try:
            size = self.onnx_file.stat().st_size  # type: ignore[union-attr]
        except OSError:
            size = 0
        return f"{self.name}@{size}"


# How memvault says a model was never downloaded (fastembed says "could not load ... from any source").
NOT_CACHED = "it is not in the model cache"


def not_cached(detail: str) -> str:
    """fastembed's failure to find a model, said with the cache it looked in."""
    return f"{NOT_CACHED} ({model_cache_dir()})" if "from any source" in detail else detail


def model_cache_dir() -> Path:
    """Where downloaded models live: FASTEMBED_CACHE_PATH, else memvault's user cache directory."""
    configured = os.environ.get("FASTEMBED_CACHE_PATH")
    if configured:
        return Path(configured)
    from platformdirs import user_cache_path

    return user_cache_path("memvault", appauthor=False) / "models"


def download_model(spec: ModelSpec) -> str:
    """Fetch the model from the hub into the model cache, once; returns where it is.

    Searches never download (offline they would hang on retries); this is the one explicit step.
    """
    if spec.path:
        return spec.path

    def make(target: str) -> None:
        from fastembed import TextEmbedding

        TextEmbedding(spec.name, cache_dir=target)

    return fetch_into_cache(make, f"embedding model {spec.name}", "MEMVAULT_EMBED_MODEL_PATH")


def fetch_into_cache(make: Callable[[str], None], what: str, variable: str) -> str:
    """Run `make(cache folder)`, a fastembed constructor that downloads, with the hub allowed."""
    target = model_cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    os.environ.pop("HF_HUB_OFFLINE", None)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # (see offline_environment)
    try:
        from loguru import logger

        logger.disable("fastembed")  # its retry chatter; the caller reports the outcome
        make(str(target))
    except Exception as exc:
        raise ModelUnavailable(f"could not download {what}: {_one_line(exc)}; without the hub, set {variable} "
                               "to a local copy (an ONNX model directory)") from exc
    finally:
        os.environ["HF_HUB_OFFLINE"] = "1"
    return str(target)


def offline_environment() -> None:
    """Settings for loading a model: local files only, and no telemetry (unless the user set them)."""
    # The hub would retry for tens of seconds with no network; memvault only uses local files.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    # onnxruntime's import keeps a telemetry device id under ~/.cache/Microsoft, and where it
    # cannot (a read-only home) prints a coloured warning on stderr in every process.
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


def one_line(exc: BaseException) -> str:
    """An exception's first line, without a closing stop (callers go on with "; ..." or ": ...")."""
    return _one_line(exc)


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


# Loaded models by (name, path, threads): a process searching several vaults loads each model once.
_loaded: dict[tuple[str, str | None, int | None], object] = {}


class Embedder:
    """Turns texts into unit-length float32 vectors; the model loads on first use, never from the hub."""

    def __init__(self, spec: ModelSpec, threads: int | None = None):
        self.spec = spec
        self.threads = threads
        self._model = None
        self._error: str | None = None

    @property
    def loaded(self) -> bool:
        """Whether `load` returns at once (this model is in memory already)."""
        return self._model is not None or (self.spec.name, self.spec.path, self.threads) in _loaded

    def load(self):
        if self._model is not None:
            return self._model
        if self._error is not None:
            raise ModelUnavailable(self._error)
        shared = _loaded.get((self.spec.name, self.spec.path, self.threads))
        if shared is not None:
            self._model = shared
            return shared
        offline_environment()
        try:
            from fastembed import TextEmbedding
            from loguru import logger

            # fastembed logs its own failures on stderr; memvault prints one notice instead.
            logger.disable("fastembed")
            kwargs: dict = {"local_files_only": True}
            onnx = self.spec.onnx_file  # set exactly when the model is read from a path
            if onnx is not None:
                if not onnx.is_file():
                    raise ModelUnavailable(
                        f"cannot load embedding model {self.spec.name}: no {onnx.name} in {self.spec.path}")
                kwargs["specific_model_path"] = self.spec.path
            else:
                kwargs["cache_dir"] = str(model_cache_dir())
            model = TextEmbedding(self.spec.name, threads=self.threads, **kwargs)
            width = _dimensions(model)
            if width != DIMENSIONS:
                raise ModelUnavailable(f"cannot use embedding model {self.spec.name}: it makes {width}-dimension "
                                       f"vectors and the index stores {DIMENSIONS}")
            self._model = model
            _loaded[(self.spec.name, self.spec.path, self.threads)] = self._model
        except ModelUnavailable as exc:
            self._error = str(exc)
            raise
        except Exception as exc:  # fastembed raises ValueError/OSError/onnx errors alike
            hint = "" if self.spec.path else (
                " (run `memvault reindex --download-model` once, or set MEMVAULT_EMBED_MODEL_PATH to a local"
                " ONNX model)"
            )
            detail = _one_line(exc) if self.spec.path else not_cached(_one_line(exc))
            self._error = f"cannot load embedding model {self.spec.name}{hint}: {detail}"
            raise ModelUnavailable(self._error) from exc
        return self._model

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Embed texts in batches; `progress(n)` is called after each batch with its size."""
        import numpy as np

        model = self.load()
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(texts), BATCH_SIZE):
            chunk = [text[:MODEL_READS_CHARS] for text in texts[start : start + BATCH_SIZE]]
            vectors = list(model.embed(chunk, batch_size=BATCH_SIZE))
            out[start : start + len(chunk)] = np.asarray(vectors, dtype=np.float32)
            if progress:
                progress(len(chunk))
        return _normalize(out)

    def embed_ahead(self, batches: Sequence[Sequence[str]],
                    progress: Callable[[int], None] | None = None) -> Generator[np.ndarray, None, None]:
        """Each batch's vectors in turn, the next batch embedding on a worker thread meanwhile.

        The model's run releases the GIL, so what the caller does with a batch (writing it to the
        cache) overlaps the model instead of leaving the cores idle. An interrupted caller gets
        control back at once; the batch in flight finishes in the background before the process ends.
        """
        if len(batches) <= 1:
            yield from (self.embed(batch, progress) for batch in batches)
            return
        import threading
        from concurrent.futures import ThreadPoolExecutor

        given_up = threading.Event()

        def report(count: int) -> None:
            # Not once the caller has stopped: a notice after its error line would read as the last word.
            if progress is not None and not given_up.is_set():
                progress(count)

        pool = ThreadPoolExecutor(1, thread_name_prefix="memvault-embed")
        try:
            future = pool.submit(self.embed, batches[0], report)
            for following in [*batches[1:], None]:
                vectors = future.result()
                if following is not None:
                    future = pool.submit(self.embed, following, report)
                yield vectors
        finally:
            given_up.set()
            pool.shutdown(wait=False, cancel_futures=True)

    def embed_query(self, text: str) -> np.ndarray:
        import numpy as np

        # A model trained with an instruction before queries (bge) needs it to place them well.
        query = self.spec.profile.query_prefix + text[:MODEL_READS_CHARS]
        vector = next(iter(self.load().query_embed([query])))
        return _normalize(np.asarray(vector, dtype=np.float32)[None, :])[0]


def _dimensions(model) -> int:
    """The width of the model's vectors, from fastembed's description of it (0 when unknown)."""
    try:
        return int(model.embedding_size)
    except (ValueError, AttributeError, KeyError):  # a custom model fastembed describes without a size
        return DIMENSIONS


def _normalize(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    # The caller goes on with its own "; ..." or ": ...": a trailing stop would read ".;".
    return text[0].rstrip(".") if text else type(exc).__name__
