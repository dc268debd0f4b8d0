"""What every import shares: the kinds and formats of an import, its chunk sizes, its failure and its summary."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from db.rules.errors import ClinConsensusError, Said
from db.store.models import Case, Criterion, JudgeDecision, Label, Response, RubricVersion, table_of

KINDS = ("cases", "responses", "labels", "judge", "references")
JUDGE_FORMATS = ("decisions", "local-judge", "official")

#: Errors collected before reading stops; the first is the one-line reason.
MAX_ERRORS = 20
#: Contact-like findings listed one by one in the summary; the rest are counted.
MAX_LISTED_WARNINGS = 50
#: Rows validated before they are written (labels, judge decisions), and records (cases, responses).
ROW_CHUNK = 20_000
RECORD_CHUNK = 500
#: Rows per bulk INSERT / COPY block.
BULK_ROWS = ROW_CHUNK // 2
#: Ids per `IN (...)` lookup, well under SQLite's limit on bound parameters.
LOOKUP_BATCH = 500

_CASE_TABLE = table_of(Case)
_RUBRIC_TABLE = table_of(RubricVersion)
_CRITERION_TABLE = table_of(Criterion)
_RESPONSE_TABLE = table_of(Response)
_LABEL_TABLE = table_of(Label)
_JUDGE_TABLE = table_of(JudgeDecision)


class ImportFailed(ClinConsensusError):
    """A file was refused and nothing landed; `errors[0]` is the one-line reason."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super().__init__(self.errors[0])


# Summary -------------------------------------------------------------------------------------


@dataclass
class ImportSummary:
    kind: str
    source: str
    fmt: str | None = None
    records: int = 0
    inserted: int = 0
    replaced: int = 0
    unchanged: int = 0
    rubric_versions: int = 0
    criteria: int = 0
    unknown_task_labels: Counter = field(default_factory=Counter)
    unmapped_subjects: Counter = field(default_factory=Counter)
    placeholders: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    warning_count: int = 0
    relabel_needed: int = 0
    #: Local-judge rows whose answer could not be read (parse_ok false or criteria_met null): skipped.
    unparsed: int = 0
    sha256: str = ""

    def noun(self) -> str:
        return {"cases": "cases", "responses": "responses", "labels": "labels", "references": "reference answers"}.get(
            self.kind, "judge decisions"
        )

    def lines(self) -> list[str]:
        """The summary, one sentence a line: English as `str`, each naming its catalog entry (db.rules.errors.Said)."""
        return [self._read_line(), *self._found_lines(), *self._warning_lines()]

    def _read_line(self) -> str:
        """What was read and what became of it."""
        shape = f" ({self.fmt})" if self.fmt else ""
        counts = {
            "records": f"{self.records:,}",
            "inserted": f"{self.inserted:,}",
            "replaced": f"{self.replaced:,}",
            "unchanged": f"{self.unchanged:,}",
        }
        return Said(
            f"{self.source}{shape}: {self.records:,} {self.noun()} read — {self.inserted:,} inserted, "
            f"{self.replaced:,} replaced, {self.unchanged:,} unchanged",
            "import.summary.read",
            file=self.source,
            what=Said(self.noun(), f"import.summary.noun.{self.kind}"),
            **counts,
        )

    def _found_lines(self) -> list[str]:
        """What the file brought besides its records: rubrics, unknown labels, placeholder accounts, skipped rows."""
        out: list[str] = []
        if self.rubric_versions:
            out.append(
                Said(
                    f"rubrics: {self.rubric_versions:,} new approved versions, {self.criteria:,} criteria",
                    "import.summary.rubrics",
                    versions=f"{self.rubric_versions:,}",
                    criteria=f"{self.criteria:,}",
                )
            )
        if self.unknown_task_labels:
            listed = ", ".join(f"{label} ({count})" for label, count in self.unknown_task_labels.most_common())
            out.append(
                Said(
                    f"task labels the taxonomy does not know, kept as given: {listed}",
                    "import.summary.unknown_tasks",
                    listed=listed,
                )
            )
        if self.unmapped_subjects:
            listed = ", ".join(f"{label} ({count})" for label, count in self.unmapped_subjects.most_common())
            out.append(
                Said(
                    f"first specialty labels with no macro-category (sliced under 'other'): {listed}",
                    "import.summary.unmapped_subjects",
                    listed=listed,
                )
            )
        if self.placeholders:
            out.append(
                Said(
                    f"unknown usernames created as inactive accounts (no login until an admin sets a password): "
                    f"{', '.join(self.placeholders)}",
                    "import.summary.placeholders",
                    listed=", ".join(self.placeholders),
                )
            )
        if self.unparsed:
            out.append(
                Said(
                    f"skipped {self.unparsed:,} rows whose judge output could not be read (parse_ok false or "
                    "criteria_met null): not stored as met or not met",
                    "import.summary.unparsed",
                    n=f"{self.unparsed:,}",
                )
            )
        return out

    def _warning_lines(self) -> list[str]:
        """The warnings: relabeling needed, and contact-like strings (the first ones listed, the rest counted)."""
        out: list[str] = []
        if self.relabel_needed:
            out.append(
                Said(
                    f"warning: {self.relabel_needed:,} replaced responses already have labels made on the old text",
                    "import.summary.relabel",
                    n=f"{self.relabel_needed:,}",
                )
            )
        if self.warning_count:
            out.append(
                Said(
                    f"warning: {self.warning_count:,} contact-like strings found — review them manually before any "
                    "release:",
                    "import.summary.contacts",
                    n=f"{self.warning_count:,}",
                )
            )
            out.extend(
                Said(f"  {warning}", getattr(warning, "key", None), **getattr(warning, "params", {}))
                for warning in self.warnings
            )
            if self.warning_count > len(self.warnings):
                more = self.warning_count - len(self.warnings)
                out.append(Said(f"  … and {more:,} more", "import.summary.more", n=f"{more:,}"))
        return out
