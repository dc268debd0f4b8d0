"""The rubric lint's findings in the reader's language, for the authoring page and the rubric audit."""

from __future__ import annotations

from db.rubric_lint import ERROR, Finding, LintReport
from ui import shell


def finding_text(finding: Finding) -> str:
    """One finding as a line: its mark (error or warning), then what it says."""
    mark = shell.t("annotate.lint.error" if finding.severity == ERROR else "annotate.lint.warning")
    return shell.t("annotate.lint.line", mark=mark, message=shell.t(f"annotate.lint.{finding.code}", **finding.values))


def row_text(report: LintReport, row: int) -> str:
    """Every finding of criterion `row` (0-based) on one line, or "" when there is none."""
    return "；".join(finding_text(f) for f in report.for_row(row))
