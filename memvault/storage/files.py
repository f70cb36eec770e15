"""Writing files so that a crash never leaves a torn one, and reading them forgivingly."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

from memvault.errors import VaultUnwritable, unwritable


def atomic_write(path: Path, content: str) -> None:
    """Replace a file so readers see the old or the new content, never a torn one."""
    atomic_write_bytes(path, content.encode("utf-8"))


def atomic_write_bytes(path: Path, content: bytes) -> None:
    """`atomic_write` for bytes."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # A full disk, a signal: the half-written copy is no one's (a killed process's still is,
        # and remove_temp_files takes it); deleting it frees the room the failure ran out of.
        with suppress(OSError):
            tmp.unlink()
        raise


def remove_temp_files(path: Path) -> None:
    """Remove the temp files `atomic_write` left beside `path` when its process was killed."""
    try:
        leftovers = list(path.parent.glob(f"{path.name}.*.tmp"))
    except OSError:
        return
    for tmp in leftovers:
        tmp.unlink(missing_ok=True)


def fsync_append(path: os.PathLike[str] | str, data: str) -> None:
    """Append and flush to stable storage before anyone commits or reports success."""
    raw = data.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(raw)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_appends(appends: Mapping[Path, str]) -> None:
    """`fsync_append` for many files: each is appended to, then all are flushed together. One after
    the other, the flushes of an import's 366 daily logs took 1.3 s; at once, 0.04 s (the file
    system commits them in one go). An OSError names its file (`filename`)."""
    opened: list[tuple[Path, int]] = []
    try:
        for path, data in appends.items():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                opened.append((path, fd))
                view = memoryview(data.encode("utf-8"))
                while view:
                    view = view[os.write(fd, view):]
            except OSError as e:
                raise OSError(e.errno, e.strerror, str(path)) from None
        if len(opened) == 1:
            _flush(opened[0])
        elif opened:
            from concurrent.futures import ThreadPoolExecutor  # (a single add does not load it)

            with ThreadPoolExecutor(min(16, len(opened))) as pool:
                list(pool.map(_flush, opened))
    finally:
        for _path, fd in opened:
            os.close(fd)


def _flush(opened: tuple[Path, int]) -> None:
    path, fd = opened
    try:
        os.fsync(fd)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` durable (the directory entry, not just the data)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def size_of(path: Path) -> int | None:
    """The file's size in bytes; None when it does not exist."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def stat_key(path: os.PathLike[str] | str) -> list[int] | None:
    """What says a file is the one read before: [mtime_ns, size, inode] (a list, as kept in JSON);
    None when it is gone."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def ends_mid_line(path: Path) -> bool:
    """Does the file end without a final newline (a torn or hand-edited end)? False when empty or missing."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except FileNotFoundError:
        return False


def cut_back(path: Path, size: int | None) -> None:
    """Undo appends: truncate the file to `size` bytes (durably), or remove it if it did not exist."""
    if size is None:
        path.unlink(missing_ok=True)
        return
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return  # removed by hand meanwhile: nothing of ours is left in it
    try:
        if os.fstat(fd).st_size > size:
            os.ftruncate(fd, size)
            os.fsync(fd)
    finally:
        os.close(fd)


def read_bytes(path: os.PathLike[str] | str) -> bytes:
    """The file's bytes; b"" when it does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def read_text(path: Path) -> str:
    """The file's text exactly as stored (no newline translation); "" when it does not exist.
    Bytes that are not UTF-8 (a hand edit saved in another encoding, a file from a remote) read as
    U+FFFD instead of failing every command that reads the file; doctor names such daily logs."""
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return ""


@contextmanager
def writing(rel: str, outcome: str) -> Iterator[None]:
    """Turn "cannot write" OSErrors (disk full, read-only, permission) into one clear VaultUnwritable
    that says what became of the change (`outcome`)."""
    try:
        yield
    except VaultUnwritable as e:
        raise e.saying(outcome) from e
    except OSError as e:
        clear = unwritable(e, rel, outcome)
        if clear is None:
            raise
        raise clear from e
