"""Leaderboard snapshots: what a frozen leaderboard holds, how two compare, and the static export.

A snapshot's payload: `k`, `n`, `source`, `gold_basis` and `min_responses` (docs/REFERENCE.md §4.1);
`models` — the ranked ones best first, then those with fewer than `min_responses` complete responses
(`ranked: false`, no tier) — each with CACS@k, rubric accuracy, `n_responses`, the bootstrap interval of
CACS@k, the tier (analysis.comparisons) and the responses it stood on (`response_ids`, sorted, and
`responses_sha256`, the sha256 of that list as compact JSON); the paired comparisons of CACS@k; the
calibrated scores (analysis.calibrated); and what it was computed from — the data version, the audit
head ({count, hash}) and `rubric_versions_sha256`, the sha256 of the sorted (case_id, rubric version
id) pairs of the current rubrics.

`diff(A, B)` lists, per model, its rank, score, tier and ranked state in each, how many responses joined
and left the set it stood on, and whether the move is beyond the intervals: the two snapshots' bootstrap
intervals of the model's CACS@k do not overlap. When either interval rests on fewer than that snapshot's
`min_responses` responses the move is not judged against the intervals (`beyond_intervals` null, said
as such), never called "within the interval".
"""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path

import pandas as pd
from sqlalchemy.engine import Engine

from analysis.exports.export_summary import ExportSummary
from analysis.exports.file_writers import sha256_file
from analysis.exports.manifest import MANIFEST_NAME, write_manifest
from analysis.exports.paths import output_dir, output_file, write_text
from analysis.loader import audit_head, load_frames
from analysis.metrics import DEFAULT_K
from analysis.report import Report, build_report, report_json
from db.access.audit_digest import payload_hash
from db.store.data_version import data_version
from db.store.models import LeaderboardSnapshot


def rubric_versions_sha256(criteria: pd.DataFrame, cases: pd.DataFrame) -> str:
    """sha256 of the sorted (case_id, rubric version id) pairs of the current rubrics, as compact JSON."""
    case_of = dict(zip(cases["case_pk"], cases["case_id"]))
    pairs = sorted({(str(case_of[pk]), int(v)) for pk, v in zip(criteria["case_pk"], criteria["rubric_version_id"])})
    return hashlib.sha256(json.dumps(pairs, separators=(",", ":")).encode("utf-8")).hexdigest()


def responses_stood_on(report: Report) -> dict[str, list[int]]:
    """Per model, the sorted ids of the complete responses (on the report's gold basis) its score stands on."""
    grid = report.grid
    complete = report.scores.complete
    ids = grid.responses["response_id"].to_numpy()[complete]
    models = grid.responses["model"].to_numpy()[complete]
    result: dict[str, list[int]] = {}
    for model in sorted(set(models.tolist())):
        result[str(model)] = sorted(int(value) for value in ids[models == model])
    return result


def ids_sha256(ids: list[int]) -> str:
    """sha256 of a sorted id list as compact JSON (`[1,2,3]`)."""
    return hashlib.sha256(json.dumps(ids, separators=(",", ":")).encode("utf-8")).hexdigest()


def build_payload(
    engine: Engine, k: int = DEFAULT_K, *, gold_basis: str | None = None, min_responses: int | None = None
) -> dict:
    """The payload of a snapshot of the database as it is now (gold scores on `gold_basis`, ranked with at
    least `min_responses` complete responses)."""
    version = data_version(engine)
    frames = load_frames(engine)
    report = build_report(frames, k=k, insights=False, gold_basis=gold_basis, min_responses=min_responses)
    document = report_json(report)
    scores = document["models"]
    stood_on = responses_stood_on(report)
    return {
        "k": document["k"],
        "n": document["n"],
        "source": document["source"],
        "gold_basis": document["gold_basis"],
        "min_responses": document["min_responses"],
        "models": [
            {
                **row,
                "rubric_accuracy": scores[row["model"]]["rubric_accuracy"],
                "n_responses": scores[row["model"]]["n_responses"],
                "response_ids": stood_on.get(row["model"], []),
                "responses_sha256": ids_sha256(stood_on.get(row["model"], [])),
            }
            for row in document["leaderboard"]
        ],
        "comparisons": document["comparisons"]["cacs_at_k"],
        "calibrated": document["calibrated"],
        "data_version": dict(version._asdict()),
        "audit_head": audit_head(engine),
        "rubric_versions_sha256": rubric_versions_sha256(frames.criteria, frames.cases),
    }


def snapshot_dict(snapshot: LeaderboardSnapshot) -> dict:
    """A stored snapshot as plain values: name, created_at (ISO), created_by, payload."""
    return {
        "name": snapshot.name,
        "created_at": snapshot.created_at.isoformat(),
        "created_by": snapshot.created_by,
        "payload": snapshot.payload,
    }


def listing(snapshot: LeaderboardSnapshot) -> dict:
    """name, created_at, created_by, n_models of a stored snapshot."""
    return {
        "name": snapshot.name,
        "created_at": snapshot.created_at.isoformat(),
        "created_by": snapshot.created_by,
        "n_models": len(snapshot.payload.get("models", [])),
    }


def _overlap(a: dict, b: dict) -> bool | None:
    if None in (a.get("ci_low"), a.get("ci_high"), b.get("ci_low"), b.get("ci_high")):
        return None
    return a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"]


def minimum_of(payload: dict) -> int:
    """The ranking minimum a snapshot was frozen with (1 for snapshots older than the minimum)."""
    return int(payload.get("min_responses", 1))


def is_ranked(row: dict) -> bool:
    """Whether a snapshot's model row was ranked (every row of snapshots older than the minimum was)."""
    return bool(row.get("ranked", True))


def ranks(rows: list[dict]) -> dict[str, tuple[int | None, dict]]:
    """model → (rank among the ranked, row); None for an unranked model."""
    result: dict[str, tuple[int | None, dict]] = {}
    rank = 0
    for row in rows:
        if is_ranked(row):
            rank += 1
        result[row["model"]] = (rank if is_ranked(row) else None, row)
    return result


def _joined_left(a: dict, b: dict) -> tuple[int | None, int | None]:
    if "response_ids" not in a or "response_ids" not in b:
        return None, None
    old, new = set(a["response_ids"]), set(b["response_ids"])
    return len(new - old), len(old - new)


def diff(before: dict, after: dict) -> dict:
    """Which models moved between two snapshots, and whether each move is beyond the intervals."""
    old = ranks(before["payload"]["models"])
    new = ranks(after["payload"]["models"])
    minimum = (minimum_of(before["payload"]), minimum_of(after["payload"]))
    models = []
    order = sorted(old.keys() & new.keys(), key=lambda name: (new[name][0] is None, new[name][0] or 0, name))
    for model in order:
        (rank_a, a), (rank_b, b) = old[model], new[model]
        # An interval on fewer responses than the ranking minimum says nothing a move could be judged by.
        thin = a.get("n_responses", minimum[0]) < minimum[0] or b.get("n_responses", minimum[1]) < minimum[1]
        overlap = None if thin else _overlap(a, b)
        joined, left = _joined_left(a, b)
        ranked = [is_ranked(a), is_ranked(b)]
        models.append(
            {
                "model": model,
                "rank": [rank_a, rank_b],
                "cacs_at_k": [a["cacs_at_k"], b["cacs_at_k"]],
                "change": b["cacs_at_k"] - a["cacs_at_k"],
                "tier": [a["tier"], b["tier"]],
                "ranked": ranked,
                "n_responses": [a.get("n_responses"), b.get("n_responses")],
                "responses_joined": joined,
                "responses_left": left,
                "moved": rank_a != rank_b
                or a["cacs_at_k"] != b["cacs_at_k"]
                or a["tier"] != b["tier"]
                or ranked[0] != ranked[1]
                or bool(joined)
                or bool(left),
                "beyond_intervals": None if overlap is None else not overlap,
                "below_minimum": thin,
            }
        )
    return {
        "from": before["name"],
        "to": after["name"],
        "gold_basis": [before["payload"].get("gold_basis"), after["payload"].get("gold_basis")],
        "min_responses": list(minimum),
        "models": models,
        "added": sorted(new.keys() - old.keys()),
        "removed": sorted(old.keys() - new.keys()),
    }


def _points(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def basis_text(payload: dict) -> str:
    """What a snapshot stands on, in one phrase (snapshots older than the basis say so)."""
    basis = payload.get("gold_basis") or "not recorded (before final gold)"
    return f"gold basis {basis}, ranked with at least {minimum_of(payload)} complete responses"


def show_text(snapshot: dict) -> str:
    payload = snapshot["payload"]
    lines = [
        f"{snapshot['name']} (frozen {snapshot['created_at']} by {snapshot['created_by']}; "
        f"CACS@{payload['k']}, N = {payload['n']}, {basis_text(payload)}, audit head {payload['audit_head']['count']})",
    ]
    for model, (rank, row) in ranks(payload["models"]).items():
        place = f"{rank:>3}. tier {row['tier']}" if rank is not None else f"  -. not ranked: n = {row['n_responses']}"
        lines.append(
            f"{place}  {model}  {_points(row['cacs_at_k'])} "
            f"[{_points(row['ci_low'])}, {_points(row['ci_high'])}] (n = {row.get('n_responses')})"
        )
    return "\n".join(lines)


def diff_text(changes: dict) -> str:
    lines = [f"{changes['from']} → {changes['to']}"]
    bases = changes.get("gold_basis", [None, None])
    if bases[0] != bases[1]:
        lines.append(f"  gold basis {bases[0]} → {bases[1]}: the two stand on different gold")
    for row in changes["models"]:
        if not row["moved"]:
            continue
        beyond = {True: "beyond the intervals", False: "within the intervals", None: "no intervals"}
        judged = beyond[row["beyond_intervals"]]
        if row.get("below_minimum"):
            judged = "an interval rests on fewer responses than the ranking minimum: not judged by the intervals"
        ranked = row.get("ranked", [True, True])
        rank = [str(value) if value is not None else "not ranked" for value in row["rank"]]
        status = ""
        if ranked[0] != ranked[1]:
            status = "; now ranked" if ranked[1] else "; no longer ranked (fewer than the ranking minimum)"
        joined = row.get("responses_joined")
        responses = "" if joined is None else f"; responses +{joined} / -{row['responses_left']}"
        lines.append(
            f"  {row['model']}: rank {rank[0]} → {rank[1]}, CACS {_points(row['cacs_at_k'][0])} → "
            f"{_points(row['cacs_at_k'][1])} ({100 * row['change']:+.1f} points), tier {row['tier'][0]} → "
            f"{row['tier'][1]}{status}{responses}; {judged}"
        )
    if len(lines) == 1:
        lines.append("  no model moved")
    lines += [f"  new: {model}" for model in changes["added"]] + [f"  gone: {model}" for model in changes["removed"]]
    return "\n".join(lines)


def leaderboard_html(snapshot: dict) -> str:
    """A static page of one snapshot; every text from the data is escaped."""
    payload = snapshot["payload"]
    minimum = minimum_of(payload)
    rows = "\n".join(
        f"<tr><td>{rank if rank is not None else '—'}</td>"
        f"<td>{row['tier'] if rank is not None else f'未排名 / not ranked: n &lt; {minimum}'}</td>"
        f"<td>{html.escape(row['model'])}</td>"
        f"<td>{_points(row['cacs_at_k'])}</td><td>{_points(row['ci_low'])} – {_points(row['ci_high'])}</td>"
        f"<td>{_points(row['rubric_accuracy'])}</td><td>{row['n_responses']}</td></tr>"
        for rank, row in ranks(payload["models"]).values()
    )
    basis = payload.get("gold_basis")
    basis_line = (
        f"金标准依据 / gold basis: {html.escape(str(basis or '—'))}"
        + (" (暂定 / provisional)" if basis == "provisional" else "")
        + f" · 排名至少需 {minimum} 条完整回答 / ranked with at least {minimum} complete responses"
    )
    title = html.escape(f"ClinConsensus leaderboard · {snapshot['name']}")
    return (
        f'<!doctype html>\n<html lang="zh"><head><meta charset="utf-8"><title>{title}</title></head><body>\n'
        f"<h1>{title}</h1>\n<p>{html.escape(snapshot['created_at'])} · CACS@{payload['k']} (N = {payload['n']}) · "
        f"audit head {payload['audit_head']['count']} {html.escape(payload['audit_head']['hash'])}</p>\n"
        f'<p id="basis">{basis_line}</p>\n'
        "<table><thead><tr><th>#</th><th>tier / 梯队</th><th>model / 模型</th><th>CACS</th><th>95% CI</th>"
        f"<th>RA</th><th>n</th></tr></thead><tbody>\n{rows}\n</tbody></table>\n</body></html>\n"
    )


LEADERBOARD_FILES = ("leaderboard.json", "index.html")


def export_leaderboard(newest: dict, directory: Path, *, head: dict) -> ExportSummary:
    """`export leaderboard DIR`: a snapshot (the newest, verified against its audit entry by the caller) as
    leaderboard.json and index.html, and manifest.json with their sha256 and the audit head `head`.

    Written under every export's rules (analysis/exports/paths.py): no symbolic link at DIR or at a
    file's name in it, no missing parent folders, files 0600; every name is checked before one is written.
    """
    directory = output_dir(directory)
    targets = [output_file(directory / name) for name in (*LEADERBOARD_FILES, MANIFEST_NAME)]
    texts = [json.dumps(newest, ensure_ascii=False, indent=2, allow_nan=False) + "\n", leaderboard_html(newest)]
    for path, text in zip(targets, texts):
        write_text(path, text)
    files = {path.name: sha256_file(path) for path in targets[: len(texts)]}
    extra = {"snapshot": newest["name"], "payload_sha256": payload_hash(newest["payload"])}
    write_manifest(directory, export="leaderboard", head=head, files=files, **extra)
    return ExportSummary(
        "leaderboard",
        directory,
        counts={"snapshot": newest["name"], "models": len(newest["payload"]["models"])},
        files=files,
    )
