"""The report's section on time on task against agreement (`analysis.time_agreement`): JSON, tables, HTML.

Rates are shown as percentages with one decimal, seconds with one decimal; every word comes from the
catalog (`analysis.time.*`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable

import pandas as pd

from analysis.time_agreement import TimeAgreement


def _number(value):
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def _records(frame: pd.DataFrame) -> list[dict]:
    return [{str(key): value for key, value in row.items()} for row in frame.to_dict("records")]


def section_json(result: TimeAgreement) -> dict:
    """`time_agreement` of report.json: fractions in [0, 1], seconds as numbers, undefined values null."""
    return {
        "n_timed_responses": int(result.n_timed),
        "n_without_decisions": int(result.n_without_decisions),
        "n_responses": int(len(result.responses)),
        "spearman_responses": {
            "rho": _number(result.spearman_responses["rho"]),
            "n": int(result.spearman_responses["n"]),
        },
        "spearman_annotators": {
            "rho": _number(result.spearman_annotators["rho"]),
            "n": int(result.spearman_annotators["n"]),
        },
        "annotators": {
            str(row["username"]): {
                "group": int(row["group"]),
                "n_responses": int(row["n_responses"]),
                "median_seconds_per_criterion": _number(row["median_seconds_per_criterion"]),
                "n_decisions": int(row["n_decisions"]),
                "agreement": _number(row["agreement"]),
                "pooled_mf1": _number(row["pooled_mf1"]),
            }
            for row in _records(result.annotators)
        },
        "buckets": [
            {
                "bucket": int(row["bucket"]),
                "seconds_per_criterion": [_number(row["low_seconds"]), _number(row["high_seconds"])],
                "n_responses": int(row["n_responses"]),
                "n_decisions": int(row["n_decisions"]),
                "agreement": _number(row["agreement"]),
                "pooled_mf1": _number(row["pooled_mf1"]),
            }
            for row in _records(result.buckets)
        ],
    }


def section_tables(result: TimeAgreement) -> dict[str, pd.DataFrame]:
    return {"time_by_annotator": result.annotators, "time_buckets": result.buckets}


def percent(value) -> str:
    value = _number(value)
    return "—" if value is None else f"{value * 100:.1f}%"


def seconds(value) -> str:
    value = _number(value)
    return "—" if value is None else f"{value:.1f}"


def _rho(value) -> str:
    value = _number(value)
    return "—" if value is None else f"{value:.3f}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(text)}</th>" for text in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def section_html(result: TimeAgreement, t: Callable[..., str]) -> str:
    """The section as HTML: a heading, the definition, the two correlations, per annotator, per time bucket."""
    parts = [f'<h2 id="time-agreement">{html.escape(t("analysis.time.title"))}</h2>']
    if not result.has_data:
        parts.append(f'<p class="no-timings">{html.escape(t("analysis.time.none"))}</p>')
        return "\n".join(parts)
    parts.append(f"<p>{html.escape(t('analysis.time.definition'))}</p>")
    for key, values in (
        ("analysis.time.spearman_responses", result.spearman_responses),
        ("analysis.time.spearman_annotators", result.spearman_annotators),
    ):
        parts.append(f"<p>{html.escape(t(key, rho=_rho(values['rho']), n=values['n']))}</p>")
    if result.n_without_decisions:
        parts.append(f"<p>{html.escape(t('analysis.time.without_decisions', n=result.n_without_decisions))}</p>")
    parts.append(f"<h3>{html.escape(t('analysis.time.by_annotator'))}</h3>")
    parts.append(
        _table(
            [
                t("analysis.time.col.annotator"),
                t("analysis.time.col.group"),
                t("analysis.time.col.responses"),
                t("analysis.time.col.median_seconds"),
                t("analysis.time.col.decisions"),
                t("analysis.time.col.agreement"),
                t("analysis.time.col.mf1"),
            ],
            [
                [
                    str(row["username"]),
                    str(int(row["group"])),
                    str(int(row["n_responses"])),
                    seconds(row["median_seconds_per_criterion"]),
                    str(int(row["n_decisions"])),
                    percent(row["agreement"]),
                    percent(row["pooled_mf1"]),
                ]
                for row in _records(result.annotators)
            ],
        )
    )
    parts.append(f"<h3>{html.escape(t('analysis.time.by_bucket'))}</h3>")
    parts.append(
        _table(
            [
                t("analysis.time.col.bucket"),
                t("analysis.time.col.range"),
                t("analysis.time.col.responses"),
                t("analysis.time.col.decisions"),
                t("analysis.time.col.agreement"),
                t("analysis.time.col.mf1"),
            ],
            [
                [
                    str(int(row["bucket"])),
                    t("analysis.time.range", low=seconds(row["low_seconds"]), high=seconds(row["high_seconds"])),
                    str(int(row["n_responses"])),
                    str(int(row["n_decisions"])),
                    percent(row["agreement"]),
                    percent(row["pooled_mf1"]),
                ]
                for row in _records(result.buckets)
            ],
        )
    )
    return "\n".join(parts)
