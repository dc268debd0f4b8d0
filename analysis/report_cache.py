"""The finished report kept per data version, so `report` on an unchanged database answers at once.

Kept: report.json's bytes and the printed tables, in a private folder beside a SQLite file
(`<name>.cache/`, 0700; files 0600), keyed by the data version (`db.store.data_version`, read by the caller), the
report's options, the settings it reads (rubric size, taxonomy file), the source of `analysis` and
`db` and the versions of the libraries that compute and write it. Any change of one of them is
another key, so a kept report is never one the same command would not write again byte for byte.

The finished report is kept rather than the decision frames: a rerun on unchanged data then only reads the
data version and copies a file, where kept frames would still leave the imports, the computation and the
writing of report.json to do (docs/performance.md). It is kept beside the SQLite file, or for PostgreSQL in
the folder of the audit key (`cache_folder`), where a rerun on unchanged data likewise only reads the data version.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TextIO

from db.rules.security import PRIVATE_FILE_MODE

#: Kept reports per database; older ones are removed when a new one is kept.
KEEP = 3
_LIBRARIES = ("numpy", "pandas", "scipy", "orjson")
_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Entry:
    """One kept report: `<key>.json` (report.json) and `<key>.txt` (the printed tables)."""

    folder: Path
    key: str

    @property
    def json_file(self) -> Path:
        return self.folder / f"{self.key}.json"

    @property
    def text_file(self) -> Path:
        return self.folder / f"{self.key}.txt"

    def read(self, *, want_json: bool) -> tuple[bytes | None, str] | None:
        """(report.json bytes or None, tables) when kept; None when not (or half kept)."""
        try:
            text = self.text_file.read_text(encoding="utf-8")
            return (self.json_file.read_bytes() if want_json else None), text
        except FileNotFoundError:
            return None

    def store(self, json_bytes: bytes, text: str) -> None:
        """Keep both files (the tables last: a reader takes an entry only once they are there)."""
        _write_private(self.json_file, json_bytes)
        _write_private(self.text_file, text.encode("utf-8"))
        _prune(self.folder, self.key)


def cache_folder(url) -> Path | None:
    """Where the reports of the database at `url` are kept: beside a SQLite file (`<name>.cache/`); for a
    server database, in CLINCONSENSUS_CACHE_DIR or else the folder of the audit key (private to the admin
    who runs the commands), one subfolder per server and database (`report-cache/<hash of the URL
    without its password>/`)."""
    from db.rules.config import get_settings

    if url.get_backend_name() == "sqlite":
        if url.query or url.database in (None, "", ":memory:"):
            return None
        database = Path(os.path.abspath(str(url.database)))
        return database.with_name(database.name + ".cache")
    name = url.render_as_string(hide_password=True).encode("utf-8")
    settings = get_settings()
    root = settings.cache_dir.expanduser() if settings.cache_dir else settings.audit_key_path().parent
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    caches = _private_folder(root / "report-cache")
    return caches / hashlib.sha256(name).hexdigest()[:16] if caches else None


def entry_for(engine, version: tuple, options: dict) -> Entry | None:
    """The entry of this database at data `version` with these options; None where nothing is kept."""
    from db.rules.config import get_settings

    location = cache_folder(engine.url)
    if location is None:
        return None
    settings = get_settings()
    taxonomy = settings.taxonomy
    key = hashlib.sha256()
    for part in (
        tuple(version),
        sorted(options.items()),
        settings.rubric_size,
        str(taxonomy) if taxonomy else "",
        _file_stamp(taxonomy) if taxonomy else "",
        _code_fingerprint(),
    ):
        key.update(repr(part).encode("utf-8") + b"\0")
    folder = _private_folder(location)
    return Entry(folder, "report-" + key.hexdigest()[:32]) if folder else None


def replay(entry: Entry, *, json_path, stream: TextIO = sys.stdout) -> bool:
    """Print the kept tables and write the kept report.json to `json_path`; False when nothing is kept."""
    kept = entry.read(want_json=bool(json_path))
    if kept is None:
        return False
    json_bytes, text = kept
    if json_path:
        from analysis.exports.paths import open_for_writing, output_file

        with open_for_writing(output_file(json_path), "wb") as handle:
            handle.write(json_bytes or b"")
    stream.write(text)
    return True


def kept_or_run(
    engine, run: Callable[[TextIO], object], *, version: tuple, options: dict, json_path, stream: TextIO, progress
) -> bool:
    """Replay the report kept for data `version` and `options`, else `run(stream)` and keep what it wrote.

    True when the kept report was replayed. `version` is read before `run` loads anything, so a change
    during the run only makes the kept report older than its key, never newer. Read by the caller: the
    loader that reads it for analysis brings pandas, which a replay does not need.
    """
    entry = entry_for(engine, version, options)
    if entry is not None and replay(entry, json_path=json_path, stream=stream):
        progress(1, 1, "unchanged data: the report kept for this data version")
        return True
    tee = Tee(stream) if entry is not None else stream
    run(tee)
    if entry is not None and json_path and isinstance(tee, Tee):
        entry.store(Path(json_path).read_bytes(), tee.getvalue())
    return False


class Tee(io.StringIO):
    """The printed tables, passed on to `stream` and kept for the entry."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(text)
        return super().write(text)


def _file_stamp(path: Path) -> tuple:
    try:
        info = path.stat()
    except OSError:
        return ()
    return info.st_size, info.st_mtime_ns


def _code_fingerprint() -> str:
    """The source of `analysis` and `db` and the computing libraries' versions (the report depends on each)."""
    digest = hashlib.sha256()
    for room in ("analysis", "db"):
        for path in sorted((_ROOT / room).rglob("*")):
            if path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    for name in _LIBRARIES:
        try:
            digest.update(f"{name}={metadata.version(name)}\0".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{name}=\0".encode())
    return digest.hexdigest()


def _private_folder(folder: Path) -> Path | None:
    """`folder`, made 0700 when new; None (keep nothing) when it is not a plain folder of ours."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        return None
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(folder, 0o700)
    return folder


def _write_private(path: Path, data: bytes) -> None:
    """Write through a 0600 temporary file renamed into place: a reader never sees a half-written file."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".writing-")
    try:
        os.fchmod(descriptor, PRIVATE_FILE_MODE)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _prune(folder: Path, newest: str) -> None:
    """Remove all but the newest KEEP reports (oldest first by modification time)."""
    keys = {path.stem for path in folder.glob("report-*.txt")}
    keys.discard(newest)
    stamps = []
    for key in keys:
        try:
            stamps.append(((folder / f"{key}.txt").stat().st_mtime_ns, key))
        except FileNotFoundError:
            continue
    for _, key in sorted(stamps)[: max(len(stamps) - (KEEP - 1), 0)]:
        for suffix in (".txt", ".json"):
            (folder / f"{key}{suffix}").unlink(missing_ok=True)
