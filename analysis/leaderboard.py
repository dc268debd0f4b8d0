"""Leaderboard snapshots: what a frozen leaderboard holds, how two compare, and the static export.

A snapshot's payload: `k`, `n`, `source`; `models` best first, each with CACS@k, rubric accuracy,
`n_responses`, the bootstrap interval of CACS@k and the tier (analysis.comparisons); the paired
comparisons of CACS@k; the calibrated scores (analysis.calibrated); and what it was computed from —
the data version, the audit head ({count, hash}) and `rubric_versions_sha256`, the sha256 of the
sorted (case_id, rubric version id) pairs of the current rubrics.

`diff(A, B)` lists, per model, its rank, score and tier in each and whether the move is beyond
the intervals: the two snapshots' bootstrap intervals of the model's CACS@k do not overlap.
"""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path

import pandas as pd
from sqlalchemy.engine import Engine

from analysis.exports.common import ExportSummary, sha256_file
from analysis.exports.manifest import MANIFEST_NAME, write_manifest
from analysis.exports.paths import output_dir, output_file, write_text
from analysis.loader import audit_head, data_version, load_frames
from analysis.metrics import DEFAULT_K
from analysis.report import build_report, report_json
from db.access.audit_digest import payload_hash
from db.store.models import LeaderboardSnapshot


def rubric_versions_sha256(criteria: pd.DataFrame, cases: pd.DataFrame) -> str:
    """sha256 of the sorted (case_id, rubric version id) pairs of the current rubrics, as compact JSON."""
    case_of = dict(zip(cases["case_pk"], cases["case_id"]))
    pairs = sorted({(str(case_of[pk]), int(v)) for pk, v in zip(criteria["case_pk"], criteria["rubric_version_id"])})
    return hashlib.sha256(json.dumps(pairs, separators=(",", ":")).encode("utf-8")).hexdigest()


def build_payload(engine: Engine, k: int = DEFAULT_K) -> dict:
    """The payload of a snapshot of the database as it is now (gold scores)."""
    version = data_version(engine)
    frames = load_frames(engine)
    document = report_json(build_report(frames, k=k, insights=False))
    scores = document["models"]
    return {
        "k": document["k"],
        "n": document["n"],
        "source": document["source"],
        "models": [
            {
                **row,
                "rubric_accuracy": scores[row["model"]]["rubric_accuracy"],
                "n_responses": scores[row["model"]]["n_responses"],
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


def diff(before: dict, after: dict) -> dict:
    """Which models moved between two snapshots, and whether each move is beyond the intervals."""
    old = {row["model"]: (rank, row) for rank, row in enumerate(before["payload"]["models"], start=1)}
    new = {row["model"]: (rank, row) for rank, row in enumerate(after["payload"]["models"], start=1)}
    models = []
    for model in sorted(old.keys() & new.keys(), key=lambda name: new[name][0]):
        (rank_a, a), (rank_b, b) = old[model], new[model]
        overlap = _overlap(a, b)
        models.append(
            {
                "model": model,
                "rank": [rank_a, rank_b],
                "cacs_at_k": [a["cacs_at_k"], b["cacs_at_k"]],
                "change": b["cacs_at_k"] - a["cacs_at_k"],
                "tier": [a["tier"], b["tier"]],
                "moved": rank_a != rank_b or a["cacs_at_k"] != b["cacs_at_k"] or a["tier"] != b["tier"],
                "beyond_intervals": None if overlap is None else not overlap,
            }
        )
    return {
        "from": before["name"],
        "to": after["name"],
        "models": models,
        "added": sorted(new.keys() - old.keys()),
        "removed": sorted(old.keys() - new.keys()),
    }


def _points(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def show_text(snapshot: dict) -> str:
    payload = snapshot["payload"]
    lines = [
        f"{snapshot['name']} (frozen {snapshot['created_at']} by {snapshot['created_by']}; "
        f"CACS@{payload['k']}, N = {payload['n']}, audit head {payload['audit_head']['count']})",
    ]
    for rank, row in enumerate(payload["models"], start=1):
        lines.append(
            f"{rank:>3}. tier {row['tier']}  {row['model']}  {_points(row['cacs_at_k'])} "
            f"[{_points(row['ci_low'])}, {_points(row['ci_high'])}]"
        )
    return "\n".join(lines)


def diff_text(changes: dict) -> str:
    lines = [f"{changes['from']} → {changes['to']}"]
    for row in changes["models"]:
        if not row["moved"]:
            continue
        beyond = {True: "beyond the intervals", False: "within the intervals", None: "no intervals"}
        lines.append(
            f"  {row['model']}: rank {row['rank'][0]} → {row['rank'][1]}, CACS {_points(row['cacs_at_k'][0])} → "
            f"{_points(row['cacs_at_k'][1])} ({100 * row['change']:+.1f} points), tier {row['tier'][0]} → "
            f"{row['tier'][1]}; {beyond[row['beyond_intervals']]}"
        )
    if len(lines) == 1:
        lines.append("  no model moved")
    lines += [f"  new: {model}" for model in changes["added"]] + [f"  gone: {model}" for model in changes["removed"]]
    return "\n".join(lines)


def leaderboard_html(snapshot: dict) -> str:
    """A static page of one snapshot; every text from the data is escaped."""
    payload = snapshot["payload"]
    rows = "\n".join(
        f"<tr><td>{rank}</td><td>{row['tier']}</td><td>{html.escape(row['model'])}</td>"
        f"<td>{_points(row['cacs_at_k'])}</td><td>{_points(row['ci_low'])} – {_points(row['ci_high'])}</td>"
        f"<td>{_points(row['rubric_accuracy'])}</td><td>{row['n_responses']}</td></tr>"
        for rank, row in enumerate(payload["models"], start=1)
    )
    title = html.escape(f"ClinConsensus leaderboard · {snapshot['name']}")
    return (
        f'<!doctype html>\n<html lang="zh"><head><meta charset="utf-8"><title>{title}</title></head><body>\n'
        f"<h1>{title}</h1>\n<p>{html.escape(snapshot['created_at'])} · CACS@{payload['k']} (N = {payload['n']}) · "
        f"audit head {payload['audit_head']['count']} {html.escape(payload['audit_head']['hash'])}</p>\n"
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
