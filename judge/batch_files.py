"""The files of a batch (OpenAI Batch JSONL, docs/REFERENCE.md §3.8): requests, manifest and results, read and written.

`DIR/requests.jsonl` holds one line per request, `{"custom_id", "method": "POST", "url":
"/v1/chat/completions", "body"}`, compact JSON with Chinese as is; `DIR/manifest.json` says what the
batch is: format, kind, run, options, template sha256, counts (requests, re-asks, items, answered before),
`sha256` of requests.jsonl (as every export's manifest names its files), audit head. A results
file is what `vllm run-batch` or a hosted batch API writes back: one line per request, `{"id",
"custom_id", "response": {"status_code", "body"} | null, "error": … | null}`.

Every way a results file or a batch folder can be wrong is one line naming the file (and the line and
field where there is one), raised before anything is stored.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from db.rules.errors import ValidationFailed
from db.rules.limits import InputRejected, loads

REQUESTS_NAME = "requests.jsonl"
MANIFEST_NAME = "manifest.json"
CHAT_URL = "/v1/chat/completions"
FORMAT = "clinconsensus-batch/1"
#: How a custom id begins: the batch's kind, so a results file of the other kind is named as such.
ID_PREFIX = {"judge": "j-", "generate": "g-"}
#: The part of an item's cache key a custom id carries (128 bits: opaque, and unique among the items).
KEY_CHARS = 32
_LINE_START = b'{"custom_id":"'


def custom_id(kind: str, cache_key: str, round_no: int) -> str:
    """The opaque id of one request: the kind, a part of the item's cache key, the re-ask round (if any)."""
    base = f"{ID_PREFIX[kind]}{cache_key[:KEY_CHARS]}"
    return base if round_no == 0 else f"{base}-r{round_no}"


def split_id(value: str) -> tuple[str, int]:
    """(key part, round) of a custom id this module wrote."""
    key, _, suffix = value[2:].partition("-r")
    return key, int(suffix) if suffix.isdigit() else 0


def request_line(identifier: str, body: dict[str, Any]) -> bytes:
    line = {"custom_id": identifier, "method": "POST", "url": CHAT_URL, "body": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class RequestsWriter:
    """requests.jsonl written under a temporary name, hashed as it goes; `finish` puts it in place."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.temporary = directory / f".{REQUESTS_NAME}.part"
        self.handle = self.temporary.open("wb")
        self.digest = hashlib.sha256()
        self.count = 0
        self.bytes = 0

    def write(self, identifier: str, body: dict[str, Any]) -> None:
        data = request_line(identifier, body)
        self.handle.write(data)
        self.digest.update(data)
        self.count += 1
        self.bytes += len(data)

    def finish(self) -> Path:
        self.handle.close()
        target = self.directory / REQUESTS_NAME
        os.replace(self.temporary, target)
        return target

    def discard(self) -> None:
        self.handle.close()
        self.temporary.unlink(missing_ok=True)


def prepare_directory(directory: Path) -> Path:
    """The folder a batch is written to: new or without a batch in it; its parent must exist."""
    directory = Path(directory)
    if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
        raise ValidationFailed(f"{directory}: not a folder", key="batch.not_folder", params={"path": str(directory)})
    if not directory.parent.is_dir():
        raise ValidationFailed(
            f"{directory}: its parent folder does not exist", key="batch.no_parent", params={"path": str(directory)}
        )
    if (directory / REQUESTS_NAME).exists() or (directory / MANIFEST_NAME).exists():
        raise ValidationFailed(
            f"{directory}: holds a batch already; export into a new folder",
            key="batch.folder_taken",
            params={"path": str(directory)},
        )
    directory.mkdir(exist_ok=True)
    return directory


def write_manifest(directory: Path, manifest: dict[str, Any]) -> Path:
    path = directory / MANIFEST_NAME
    path.write_text(json.dumps(manifest, ensure_ascii=False, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path


def _refuse(message: str, key: str, **params: Any) -> ValidationFailed:
    return ValidationFailed(message, key=key, params=params)


def read_manifest(directory: Path, kind: str) -> dict[str, Any]:
    """The manifest of the batch in `directory`, checked to be one of `kind`'s."""
    path = Path(directory) / MANIFEST_NAME
    try:
        manifest = loads(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        raise _refuse(
            f"{path}: no such file (--batch names the folder a batch export wrote)", "batch.no_manifest", path=str(path)
        ) from None
    except (ValueError, InputRejected) as error:
        raise _refuse(f"{path}: not a batch manifest ({error})", "batch.bad_manifest", path=str(path)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _refuse(f"{path}: not a batch manifest (no format {FORMAT})", "batch.bad_manifest", path=str(path))
    if manifest.get("kind") != kind:
        other = manifest.get("kind")
        raise _refuse(
            f"{path}: a {other} batch, not a {kind} batch (import it with `{other} batch import`)",
            "batch.other_kind",
            path=str(path),
            kind=str(other),
            expected=kind,
        )
    counts, sums = manifest.get("counts"), manifest.get("sha256")
    for name, value, wanted in (
        ("run", manifest.get("run"), int),
        ("counts.requests", counts.get("requests") if isinstance(counts, dict) else None, int),
        (f"sha256.{REQUESTS_NAME}", sums.get(REQUESTS_NAME) if isinstance(sums, dict) else None, str),
    ):
        if not isinstance(value, wanted) or isinstance(value, bool):
            raise _refuse(
                f"{path}: field {name}: missing or not valid", "batch.manifest_field", path=str(path), field=name
            )
    return manifest


def requests_sha256(manifest: dict[str, Any]) -> str:
    """The sha256 of requests.jsonl a checked manifest records."""
    return str(manifest["sha256"][REQUESTS_NAME])


def request_ids(directory: Path, manifest: dict[str, Any]) -> set[str]:
    """The custom ids of requests.jsonl, after checking the file is the one the manifest describes."""
    path = Path(directory) / REQUESTS_NAME
    digest = hashlib.sha256()
    ids: set[str] = set()
    try:
        with path.open("rb") as handle:
            for line in handle:
                digest.update(line)
                if line.startswith(_LINE_START):
                    end = line.find(b'"', len(_LINE_START))
                    ids.add(line[len(_LINE_START) : end].decode("utf-8", "replace"))
    except (FileNotFoundError, IsADirectoryError):
        raise _refuse(f"{path}: no such file", "batch.no_requests", path=str(path)) from None
    if digest.hexdigest() != requests_sha256(manifest) or len(ids) != manifest["counts"]["requests"]:
        raise _refuse(
            f"{path}: does not match its manifest (sha256 or request count differs)",
            "batch.requests_changed",
            path=str(path),
        )
    return ids


@dataclass
class Results:
    """A results file read and checked: each answered request's chat completion, and the lines that failed."""

    completions: dict[str, Any] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # custom ids of error or non-200 lines
    lines: int = 0


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield number, line
    except (FileNotFoundError, IsADirectoryError):
        raise _refuse(f"{path}: no such file", "batch.no_results", path=str(path)) from None


def read_results(path: Path, known: set[str]) -> Results:
    """Every line of a results file, checked against the batch's custom ids; one-line refusals."""
    path = Path(path)
    results = Results()
    seen: dict[str, int] = {}
    for number, line in _lines(path):
        where = f"{path.name} line {number}"
        try:
            record = loads(line)
        except (ValueError, InputRejected) as error:
            raise _refuse(f"{where}: not JSON ({error})", "batch.not_json", where=where) from None
        identifier = record.get("custom_id") if isinstance(record, dict) else None
        if not isinstance(identifier, str):
            raise _refuse(f"{where}: custom_id: missing or not a string", "batch.no_custom_id", where=where)
        if identifier not in known:
            raise _refuse(
                f"{where}: custom_id {identifier[:80]!r} is not a request of this batch",
                "batch.unknown_id",
                where=where,
                id=identifier[:80],
            )
        if identifier in seen:
            raise _refuse(
                f"{where}: custom_id {identifier[:80]!r} repeats line {seen[identifier]}",
                "batch.repeated_id",
                where=where,
                id=identifier[:80],
                first=seen[identifier],
            )
        seen[identifier] = number
        results.lines += 1
        completion = _completion(record, where)
        if completion is None:
            results.failed.append(identifier)
        else:
            results.completions[identifier] = completion
    return results


def _completion(record: dict[str, Any], where: str) -> Any | None:
    """The line's chat completion; None for an error line or a status other than 200."""
    response = record.get("response")
    if record.get("error") is not None or response is None:
        return None
    if not isinstance(response, dict) or not isinstance(response.get("status_code"), int):
        raise _refuse(f"{where}: response.status_code: missing or not a number", "batch.bad_response", where=where)
    if response["status_code"] != 200:
        return None
    body = response.get("body")
    problem = _body_problem(body)
    if problem or not isinstance(body, dict):
        raise _refuse(f"{where}: response.body is not a chat completion ({problem})", "batch.bad_body", where=where)
    return _completion_view(body)


def _completion_view(body: dict[str, Any]) -> Any:
    """The parts of a checked chat completion the readers take (`judge.endpoints.read_completion`), as attributes.

    Read leniently, as the SDK reads an online answer: a server's extra or unusual fields are no refusal. The
    SDK's own model is not built a line: that construction was most of an import's time (docs/performance.md)."""
    choices = [
        SimpleNamespace(
            message=SimpleNamespace(content=choice["message"].get("content")),
            finish_reason=choice.get("finish_reason"),
        )
        for choice in body["choices"]
    ]
    usage = body.get("usage")
    tokens = (
        None
        if usage is None
        else SimpleNamespace(prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"))
    )
    return SimpleNamespace(choices=choices, usage=tokens)


def _body_problem(body: Any) -> str:
    """What keeps `body` from being read as a chat completion ("" when nothing does)."""
    if not isinstance(body, dict):
        return "not an object"
    choices = body.get("choices")
    if not isinstance(choices, list):
        return "choices: not a list"
    for number, choice in enumerate(choices):
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            return f"choices.{number}.message: not an object"
        if not isinstance(message.get("content"), str | None):
            return f"choices.{number}.message.content: not text"
        if not isinstance(choice.get("finish_reason"), str | None):
            return f"choices.{number}.finish_reason: not text"
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return "usage: not an object"
    for name in ("prompt_tokens", "completion_tokens"):
        value = (usage or {}).get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            return f"usage.{name}: not a whole number"
    return ""
