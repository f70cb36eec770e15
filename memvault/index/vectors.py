"""The dense half of the index: unit vectors in one append-only float32 file, scored by brute force.

At 100k documents x 384 dimensions the file is ~150 MB and one memory-mapped matrix-vector
product takes ~7 ms, bound by reading 150 MB. A process that searches again (the MCP server, an
agent holding a Vault; never a one-shot CLI search) first scores a projection of the rows on
their 128 principal directions, a third of the bytes, and then scores exactly a shortlist of
1,000 rows it picks: the hits and their cosines are the full product's unless a true neighbour
falls outside the shortlist (`bench/coarse.py` measures how often). A document keeps the row
("slot") it was given; rows of deleted documents stay as dead space until the next full rebuild.

The catalog records how many rows the file holds and the CRC-32 of those rows (a running CRC,
extended by each append in the same transaction that gives out the slots). Rows are verified
before they are first scored in a process (about 40 ms at 100k rows, a tenth of reading them
from disk cold; from 20k rows on a thread of their own while the search loads the model: 0.3 s
at 1M), and only the new rows after another process appended; a mismatch raises
`VectorsDamaged`, and the index recomputes the vectors rather than return wrong scores. Bytes
past the recorded rows (an append whose transaction never committed) are never read and are
overwritten by the next append.
"""

from __future__ import annotations

import stat
import threading
import zlib
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from memvault.index.embedder import DIMENSIONS

if TYPE_CHECKING:
    import numpy as np

ROW_BYTES = DIMENSIONS * 4

# The coarse first pass: below COARSE_MIN_ROWS the full product takes a millisecond or so anyway.
COARSE_MIN_ROWS = 20_000
COARSE_DIMENSIONS = 128
COARSE_SAMPLE = 8_192  # rows whose second moments choose the directions (a fixed seed: reproducible)
SHORTLIST_MIN = 1_000  # rows scored exactly after the first pass (at least SHORTLIST_PER_HIT per hit)
SHORTLIST_PER_HIT = 20
# From this many rows the projection is scored in two passes: its first HEAD_DIMENSIONS directions
# for every row, the rest only for the rows those keep (FIRST_PASS_PER_SHORTLIST per shortlisted
# row, or a FIRST_PASS_SHARE-th of the rows). At 1M rows: 9.8 ms against 20.1 for the whole
# projection, recall@50 of the exact top 50 0.9990 against 0.9996 (LoCoMo questions; worst 0.92 both).
TWO_PASS_MIN_ROWS = 200_000
HEAD_DIMENSIONS = 32
FIRST_PASS_PER_SHORTLIST = 20
FIRST_PASS_SHARE = 50
# From this many rows a process's first search verifies them on a thread of its own, while the model
# loads and the words are searched: 0.3 s of CRC-32 at 1M rows, a quarter of a cold search.
AHEAD_MIN_ROWS = 20_000


def products_on_one_thread() -> None:
    """From now on, numpy's products in this process run on the calling thread alone (threadpoolctl).

    For a long-lived process answering searches on a machine it shares, as the MCP server does with
    the agent talking to it. A search's products are memory-bound and take milliseconds; OpenBLAS's
    pool (a thread per core) splits them only while every core is idle, and its threads, spinning
    on after each product, wait on busy ones. `bench/mcp.py` at 100k facts, 2 cores: on a quiet
    machine the pool's warm p50 is 15 ms against 18 on one thread (p95 26-31 against 23-27); with
    one core busy (`--busy 1`) 20-31 ms against 15-19. Making the coarse projection took 2.7 s on
    the pool, 0.14 s on one thread. Set once: limiting around each search instead made OpenBLAS
    wake its pool after every one, slower than either.
    """
    import numpy  # noqa: F401 - threadpoolctl limits the BLAS libraries loaded so far
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


class VectorsDamaged(Exception):
    """The vector file does not hold what the catalog recorded; its vectors must be recomputed."""


class Coarse:
    """The first `rows` rows projected on the directions that keep their inner products best (the
    top eigenvectors of their second-moment matrix); scoring them reads a third of the bytes. Kept
    as two matrices, the first HEAD_DIMENSIONS directions and the others, for the two passes."""

    def __init__(self, matrix: np.ndarray):
        import numpy as np

        picked = np.random.default_rng(0).choice(len(matrix), min(COARSE_SAMPLE, len(matrix)), replace=False)
        sample = np.asarray(matrix[np.sort(picked)], dtype=np.float64)
        _values, vectors = np.linalg.eigh(sample.T @ sample)  # ascending eigenvalues
        self.basis = np.ascontiguousarray(vectors[:, ::-1][:, :COARSE_DIMENSIONS], dtype=np.float32)
        self.head, self.tail = self._project(matrix)
        self.rows = len(matrix)

    def _project(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        projected = rows @ self.basis
        return (np.ascontiguousarray(projected[:, :HEAD_DIMENSIONS]),
                np.ascontiguousarray(projected[:, HEAD_DIMENSIONS:]))

    @property
    def nbytes(self) -> int:
        return self.head.nbytes + self.tail.nbytes

    def extend(self, matrix: np.ndarray) -> None:
        """Project the rows appended since (the directions stay: they were chosen from a sample)."""
        import numpy as np

        head, tail = self._project(matrix[self.rows :])
        self.head, self.tail = np.concatenate([self.head, head]), np.concatenate([self.tail, tail])
        self.rows = len(matrix)

    def scores(self, matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Approximate cosines of every row of `matrix`: projected for the rows covered, exact for
        any appended since."""
        import numpy as np

        projected = self.basis.T @ query
        approximate = self.head @ projected[:HEAD_DIMENSIONS] + self.tail @ projected[HEAD_DIMENSIONS:]
        if len(matrix) == self.rows:
            return approximate
        return np.concatenate([approximate, matrix[self.rows :] @ query])

    def shortlist(self, matrix: np.ndarray, query: np.ndarray, size: int, slots: np.ndarray | None) -> np.ndarray:
        """The `size` rows (among `slots`, if given) of the best approximate cosines, in file order."""
        import numpy as np

        pool = len(matrix) if slots is None else len(slots)
        keep = max(size * FIRST_PASS_PER_SHORTLIST, pool // FIRST_PASS_SHARE)
        if pool < TWO_PASS_MIN_ROWS or keep >= pool:
            approximate = self.scores(matrix, query)
            if slots is not None:
                approximate = approximate[slots]
            picked = np.argpartition(-approximate, size - 1)[:size]
            return np.sort(picked if slots is None else slots[picked])
        projected = self.basis.T @ query
        first = self.head @ projected[:HEAD_DIMENSIONS]
        if len(matrix) > self.rows:  # rows appended since the projection: exact already
            first = np.concatenate([first, matrix[self.rows :] @ query])
        if slots is not None:
            first = first[slots]
        kept = np.argpartition(-first, keep - 1)[:keep]
        ids = kept if slots is None else slots[kept]
        refined = first[kept]
        covered = ids < self.rows
        refined[covered] += self.tail[ids[covered]] @ projected[HEAD_DIMENSIONS:]
        return np.sort(ids[np.argpartition(-refined, size - 1)[:size]])


class VectorFile:
    def __init__(self, path: Path, rows: int = 0, crc: int = 0):
        self.path = path
        self.rows = rows  # what the catalog recorded: rows written and committed, and their CRC-32
        self.crc = crc
        self._matrix: np.ndarray | None = None
        self._checked = (0, 0)  # (rows, crc) of the prefix of the current map verified so far
        self._coarse: Coarse | None = None  # built on this process's second full scan, if large enough
        self._full_scans = 0
        self._lock = threading.RLock()  # (verify_ahead's thread and the searching one)
        self._ahead: threading.Thread | None = None

    def _start_over(self) -> None:
        """Forget the map, what was verified of it and the projection made from it."""
        with self._lock:
            self._matrix, self._checked, self._coarse = None, (0, 0), None

    def expect(self, rows: int, crc: int) -> None:
        """The catalog's record changed (an append, by this process or another)."""
        with self._lock:
            if rows < self._checked[0]:
                self._start_over()  # a smaller record: never for one file name; start over
            self.rows, self.crc = rows, crc

    def verify_ahead(self) -> None:
        """Start verifying the rows not verified yet in this process on a thread of their own, so
        that the search about to score them does other work meanwhile (zlib releases the GIL);
        `matrix()` waits for it. A problem it finds is found again, and raised, by `matrix()`. A
        search that never scores (no model here) leaves it to finish; the next `expect()` waits."""
        with self._lock:
            if self.rows - self._checked[0] < AHEAD_MIN_ROWS or (self._ahead and self._ahead.is_alive()):
                return
            self._ahead = threading.Thread(target=self._verify_quietly, name="memvault-verify", daemon=True)
            self._ahead.start()

    def _verify_quietly(self) -> None:
        with suppress(Exception):
            self.matrix()

    def problem(self) -> str | None:
        """A cheap check (one stat): is the file there, a regular file, and long enough?"""
        if self.rows == 0:
            return None
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return f"vector file {self.path.name} is missing"
        except OSError as exc:
            return f"vector file {self.path.name}: {exc.strerror}"
        if not stat.S_ISREG(st.st_mode):
            return f"vector file {self.path.name} is not a regular file"
        if st.st_size < self.rows * ROW_BYTES:
            return f"vector file {self.path.name} is shorter than the catalog says"
        return None

    def append(self, vectors: Iterable[np.ndarray]) -> tuple[int, int, int]:
        """Write rows after the recorded ones, given as blocks of rows; returns (first new slot, rows,
        CRC-32) for the caller to record in the catalog with the slots. Callers hold the index lock.

        Block by block, so that a rebuild never holds its vectors twice more (a million rows are
        1.5 GB: stacked, then copied to bytes, they made a 1M reindex peak at 6 GB)."""
        import numpy as np

        start, rows, crc = self.rows, self.rows, self.crc
        with open(self.path, "r+b" if self.path.exists() else "wb") as handle:
            handle.seek(start * ROW_BYTES)
            for block in vectors:
                data = np.ascontiguousarray(block, dtype=np.float32).data.cast("B")
                handle.write(data)
                crc = zlib.crc32(data, crc)
                rows += len(data) // ROW_BYTES
            handle.truncate()
            handle.flush()
        return start, rows, crc

    def verify(self, full: bool = False) -> None:
        """Check the rows not verified yet in this process (all of them with `full`) against the
        recorded CRC-32; raises VectorsDamaged on a mismatch."""
        if full:
            self._start_over()
        self.matrix()

    def matrix(self) -> np.ndarray:
        """The recorded rows as a read-only memory map, verified (re-mapped when rows were added)."""
        with self._lock:
            return self._verified_matrix()

    def _verified_matrix(self) -> np.ndarray:
        import numpy as np

        rows = self.rows
        if self._matrix is not None and len(self._matrix) == rows and self._checked == (rows, self.crc):
            # One stat per search: reading a mapped page past the end of a file cut short under us
            # (a restore, a sync tool) is SIGBUS, which ended a whole MCP server and its clients.
            problem = self.problem()
            if problem is None:
                return self._matrix
            self._start_over()
            raise VectorsDamaged(problem)
        if rows == 0:
            if self.crc != 0:
                raise VectorsDamaged(f"vector file {self.path.name}: no rows but a checksum recorded")
            self._matrix, self._checked = np.zeros((0, DIMENSIONS), dtype=np.float32), (0, 0)
            return self._matrix
        problem = self.problem()
        if problem is not None:
            raise VectorsDamaged(problem)
        try:
            # A plain ndarray view of the map: numpy's memmap subclass slows every operation on it.
            matrix = np.asarray(np.memmap(self.path, dtype=np.float32, mode="r", shape=(rows, DIMENSIONS)))
        except (OSError, ValueError) as exc:
            raise VectorsDamaged(f"vector file {self.path.name}: {exc}") from exc
        done, crc = self._checked
        # Reading the rows here also brings them into memory for the first product, which would
        # read them anyway; zlib releases the GIL while it runs.
        crc = zlib.crc32(matrix[done:].data.cast("B"), crc)
        if crc != self.crc:
            self._start_over()
            raise VectorsDamaged(f"vector file {self.path.name} does not match its checksum")
        self._matrix, self._checked = matrix, (rows, crc)
        return matrix

    def top(self, query: np.ndarray, limit: int, slots: np.ndarray | None = None) -> list[tuple[int, float]]:
        """(slot, cosine) best first, over all rows or only the given slots."""
        import numpy as np

        matrix = self.matrix()
        if slots is not None:
            slots = slots[slots < len(matrix)]
            if len(slots) == 0:
                return []
        elif len(matrix) == 0:
            return []
        # Gathering rows copies them: for a large share of the matrix, scoring every row and
        # picking the scores is far cheaper (at 100k rows the copy alone took ~10 ms).
        every_row = slots is None or len(slots) * 8 > len(matrix)
        shortlist = max(SHORTLIST_MIN, limit * SHORTLIST_PER_HIT)
        candidates = len(matrix) if slots is None else len(slots)
        coarse = self._coarse_pass(matrix) if every_row and candidates > shortlist else None
        if coarse is not None:
            ids = coarse.shortlist(matrix, query, shortlist, slots)  # rows in file order: one pass
            scores = matrix[ids] @ query
        elif slots is None:
            ids, scores = None, matrix @ query
        else:
            ids = slots
            scores = (matrix @ query)[slots] if every_row else matrix[slots] @ query
        limit = min(limit, len(scores))
        best = np.argpartition(-scores, limit - 1)[:limit]
        best = best[np.argsort(-scores[best], kind="stable")]
        found = ids[best] if ids is not None else best
        return [(int(i), float(s)) for i, s in zip(found, scores[best], strict=True)]

    def _coarse_pass(self, matrix: np.ndarray) -> Coarse | None:
        """The projection to score first, or None to score every row exactly. It is made on the
        second full scan in this process (~0.3 s at 100k rows), so a one-shot search never pays."""
        if len(matrix) < COARSE_MIN_ROWS:
            return None
        self._full_scans += 1
        if self._coarse is None:
            if self._full_scans < 2:
                return None
            self._coarse = Coarse(matrix)
        elif len(matrix) - self._coarse.rows > self._coarse.rows // 20:
            self._coarse.extend(matrix)  # until then the rows appended since are scored exactly
        return self._coarse
