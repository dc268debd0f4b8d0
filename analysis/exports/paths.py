"""Where an export or a report may write: checked before anything is written.

An export never writes through a symbolic link at its target (it would overwrite whatever the
link points at), never creates folders above the one it was asked for (a mistyped path is an
error, not a new tree), and says in one line when a folder stands where a file is expected or the
other way round. Files are opened without following a link at their own name, so a link planted
inside the target folder is refused as well.
"""

from __future__ import annotations

import os
from pathlib import Path

from db.rules.errors import ValidationFailed
from db.rules.security import PRIVATE_FILE_MODE


def _refuse(path: Path, english: str, key: str, **params: str) -> ValidationFailed:
    return ValidationFailed(f"{path}: {english}", key=f"errors.export_path.{key}", params={"path": str(path), **params})


def _check_parent(path: Path) -> None:
    parent = path.parent
    if not parent.exists():
        raise _refuse(parent, "no such folder (create it first)", "no_parent")
    if not parent.is_dir():
        raise _refuse(parent, "is not a folder", "parent_not_dir")


def output_file(path: str | Path) -> Path:
    """`path` as a file an export may write: not a link, not a folder, in a folder that exists."""
    path = Path(path)
    if path.is_symlink():
        raise _refuse(path, "is a symbolic link; refusing to write through it", "symlink")
    if path.is_dir():
        raise _refuse(path, "is a folder; a file name is expected", "is_dir")
    _check_parent(path)
    return path


def output_dir(directory: str | Path, *, create: bool = True) -> Path:
    """`directory` as the folder of an export: not a link, not a file; created if missing (unless not
    `create`: checked only), its parent is not."""
    directory = Path(directory)
    if directory.is_symlink():
        raise _refuse(directory, "is a symbolic link; refusing to write through it", "symlink")
    if directory.exists() and not directory.is_dir():
        raise _refuse(directory, "is a file; a folder is expected", "not_dir")
    if not directory.exists():
        _check_parent(directory)
        if create:
            directory.mkdir()
    return directory


def input_file(path: str | Path) -> Path:
    """`path` as a file to read: it exists and is not a folder."""
    path = Path(path)
    if path.is_dir():
        raise _refuse(path, "is a folder; a file is expected", "is_dir")
    if not path.exists():
        raise _refuse(path, "no such file", "no_file")
    return path


_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def open_for_writing(path: str | Path, mode: str = "wb", **options):
    """`open(path, mode)` for writing, refusing a symbolic link at `path` (O_NOFOLLOW) instead of following it.

    The file is private to its owner (0600) before a byte is written: exports hold labels and hashes."""
    path = Path(path)
    try:
        descriptor = os.open(path, _WRITE_FLAGS, PRIVATE_FILE_MODE)
    except IsADirectoryError:
        raise _refuse(path, "is a folder; a file name is expected", "is_dir") from None
    except OSError as error:
        if path.is_symlink():
            raise _refuse(path, "is a symbolic link; refusing to write through it", "symlink") from None
        if not path.parent.is_dir():
            raise _refuse(path.parent, "no such folder (create it first)", "no_parent") from None
        reason = error.strerror or "cannot be written"
        raise _refuse(path, reason, "not_written", reason=reason) from None
    os.fchmod(descriptor, PRIVATE_FILE_MODE)  # an existing file keeps its mode through O_CREAT: take it away here
    return os.fdopen(descriptor, mode, **options)


#: Bytes a streamed export file takes before they are written through to the disk and left out of the page cache.
STREAM_SYNC_BYTES = 64 << 20


class StreamedFile:
    """A large file written front to back once (`open_for_writing`'s rules): every `STREAM_SYNC_BYTES`
    the bytes so far are written through to the disk (`fdatasync`) and dropped from the page cache.

    Why: left dirty in the page cache, gigabytes cost their writer kernel time more than in proportion
    to their size (docs/performance.md). The writer never reads its bytes again (it hashes them on the
    way), so the cache would hold them for nothing.
    """

    def __init__(self, path: str | Path) -> None:
        self.handle = open_for_writing(path)
        self.unsynced = 0

    def write(self, data: bytes | memoryview) -> None:
        self.handle.write(data)
        self.unsynced += len(data)
        if self.unsynced >= STREAM_SYNC_BYTES:
            self.sync()

    def sync(self) -> None:
        self.handle.flush()
        descriptor = self.handle.fileno()
        getattr(os, "fdatasync", os.fsync)(descriptor)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        self.unsynced = 0

    def close(self) -> None:
        self.handle.close()

    def __enter__(self) -> StreamedFile:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def write_text(path: str | Path, text: str) -> None:
    """`Path.write_text` (UTF-8, `\\n` line ends) without following a symbolic link at `path`."""
    with open_for_writing(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
