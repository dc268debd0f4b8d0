"""The rubric lint's findings in the reader's language, for the authoring page and the rubric audit."""

from __future__ import annotations

from db.rules.lint import ERROR, Finding, LintReport
from ui import shell


def finding_text(finding: Finding) -> str:
    """One finding as a line: its mark (error or warning), then what it says."""
    mark = shell.t("annotate.lint.error" if finding.severity == ERROR else "annotate.lint.warning")
    return shell.t("annotate.lint.line", mark=mark, message=shell.t(f"annotate.lint.{finding.code}", **finding.values))


def row_text(report: LintReport, row: int) -> str:
    """Every finding of criterion `row` (0-based) on one line, or "" when there is none."""
    return "；".join(finding_text(f) for f in report.for_row(row))


def cell_text(report: LintReport, row: int) -> str:
    """Criterion `row`'s findings short enough for the grid's lint cell: one mark for the row (error above
    warning), then a word or two a finding ("⚠ 过长；含糊；似第6条等3条"). The whole sentences, with the
    words they found, stay in the list below the grid (`row_text`); "" when there is none."""
    findings = report.for_row(row)
    if not findings:
        return ""
    mark = shell.t(
        "annotate.lint.mark.error" if any(f.severity == ERROR for f in findings) else "annotate.lint.mark.warning"
    )
    parts: list[str] = []
    others: dict[str, list[object]] = {}  # duplicate / near_duplicate: every other criterion it resembles
    for finding in findings:
        if "other" in finding.values:
            if finding.code not in others:
                others[finding.code] = []
                parts.append(finding.code)  # its place in the row's order
            others[finding.code].append(finding.values["other"])
        else:
            parts.append(shell.t(f"annotate.lint.short.{finding.code}", **finding.values))
    for code, rows in others.items():
        text = shell.t(f"annotate.lint.short.{code}", other=rows[0])
        if len(rows) > 1:
            text = shell.t("annotate.lint.short.and_more", first=text, more=len(rows) - 1)
        parts[parts.index(code)] = text
    # A no-break space: the mark stays on the line of the first finding when the cell wraps.
    return f"{mark}\u00a0" + shell.t("annotate.lint.short.separator").join(parts)
