"""Physician labels (docs/REFERENCE.md §3.3): every stage, replacements audit-logged, unknown users as placeholders."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from sqlalchemy import select
from sqlalchemy.engine import Connection

from db import counts
from db.access.policies import LABEL_AUTHOR_ROLE, SystemActor, label_author_refusal
from db.access.users import USERNAME_PATTERN, add_placeholder_user, update_account
from db.importers import import_summary
from db.importers.import_summary import _LABEL_TABLE
from db.importers.targets import _table_has_rows, _Targets
from db.importers.writing import _COPY_ESCAPES, _BulkInserter, _Run
from db.label_rows import write as label_write
from db.label_rows.write import BulkChunk
from db.labeling.freeze import final_rounds
from db.rules import limits
from db.rules.enums import NO_GROUP
from db.rules.errors import Said
from db.rules.records import STAGES, LabelRecord, LookAlikes, check
from db.store.models import User, table_of

# Labels --------------------------------------------------------------------------------------

_STAGE_INDEX = {stage: index for index, stage in enumerate(STAGES)}
_LIMIT = limits.TEXT_LIMITS
#: Text without NUL or unpaired surrogates (what `db.rules.records.NoteText` accepts).
_STORABLE = re.compile("[^\\x00\\ud800-\\udfff]*").fullmatch


def _label_copy_line(row: tuple) -> str:
    """`_copy_line` for label rows, whose types are known (most of the time of a bulk load is here)."""
    response_id, criterion_id, stage, group, met, user_id, note, version_id, created, updated, lock = row
    note_text = "\\N" if note is None else note.translate(_COPY_ESCAPES)
    return (
        f"{response_id}\t{criterion_id.translate(_COPY_ESCAPES)}\t{stage}\t{group}\t{'t' if met else 'f'}\t"
        f"{user_id}\t{note_text}\t{version_id}\t{created}\t{updated}\t{lock}\n"
    )


def _check_label(record: dict, targets: _Targets) -> tuple[tuple | None, list[str]]:
    """The row as (case_id, model, criterion_id, stage, group, met, annotator, note, response id, case pk,
    criterion position), or None and the errors.

    The first test accepts a plainly valid row in one expression (most rows of a large file, without
    building the model); it accepts nothing `LabelRecord` refuses (tests/db/rules/test_records.py
    checks that), and anything it does not accept goes to the model, which names the problem.
    """
    get = record.get
    case_id, model, criterion_id, annotator = get("case_id"), get("model"), get("criterion_id"), get("annotator")
    met, stage, group, note = get("met"), get("stage"), get("group"), get("note")
    if (
        type(case_id) is str
        and type(model) is str
        and type(criterion_id) is str
        and type(annotator) is str
        and type(met) is bool
        and (note is None or type(note) is str and len(note) <= _LIMIT["note"] and _STORABLE(note))
        and (
            (stage == "annotation" or stage == "check")
            and type(group) is int
            and (group == 1 or group == 2)
            or stage == "adjudication"
            and group is None
        )
        and 0 < len(case_id) <= _LIMIT["case_id"]
        and 0 < len(model) <= _LIMIT["model"]
        and 0 < len(criterion_id) <= _LIMIT["criterion_id"]
        and 0 < len(annotator) <= _LIMIT["username"]
        and not case_id.isspace()
        and not model.isspace()
        and not criterion_id.isspace()
        and not annotator.isspace()
        and case_id.isprintable()
        and model.isprintable()
        and criterion_id.isprintable()
        and annotator.isprintable()
    ):
        found = targets.response.get((case_id, model))
        if found is not None:
            position = targets.criteria.get(found[1], {}).get(criterion_id)
            if position is not None:
                return (
                    case_id,
                    model,
                    criterion_id,
                    stage,
                    NO_GROUP if group is None else group,
                    met,
                    annotator,
                    note or None,
                    found[0],
                    found[1],
                    position,
                ), []
    return _diagnose_label(record, targets)


def _diagnose_label(record: dict, targets: _Targets) -> tuple[tuple | None, list[str]]:
    """A row the quick test did not accept, checked against `db.rules.records.LabelRecord` for its message."""
    checked, errors = check(LabelRecord, record)
    if checked is None:
        return None, errors
    located = targets.locate(checked.case_id, checked.model, checked.criterion_id, errors)
    if located is None:
        return None, errors
    response_id, case_pk, position = located
    return (
        checked.case_id,
        checked.model,
        checked.criterion_id,
        checked.stage,
        NO_GROUP if checked.group is None else checked.group,
        checked.met,
        checked.annotator,
        checked.note or None,
        response_id,
        case_pk,
        position,
    ), errors


def _import_labels(run: _Run, records: Iterator[tuple[int, dict]]) -> None:
    connection = run.connection
    targets = _Targets.load(connection)
    people = _LabelAuthors.load(connection)
    had_labels = _table_has_rows(connection, _LABEL_TABLE)
    labeled: set[int] = set()  # responses whose labels the file wrote: their kept figures are refreshed at the end
    inserter = label_write.bulk_inserter(partial(_BulkInserter, run, copy_line=_label_copy_line))
    problems, stamp = run.problems, run.stored_now
    rubric_version, stage_index = targets.rubric_version, _STAGE_INDEX
    seen: set[int] = set()
    # Rows as the label table takes them; beside them, for replacements only, what the audit log names.
    rows: list[tuple] = []
    names: list[tuple[str, str, str]] = []
    lines: list[int] = []
    frozen = _FrozenRounds()
    count = 0
    for line, record in records:
        row, errors = _check_label(record, targets)
        if row is None:
            for error in errors:
                problems.at(line, error)
            continue
        case_id, model, criterion_id, stage, group, met, annotator, note, response_id, case_pk, position = row
        key = (((response_id << 16) | position) << 4) | (stage_index[stage] << 2) | group
        if key in seen:
            problems.at(line, _label_twice(case_id, model, criterion_id, stage, group))
            continue
        seen.add(key)
        count += 1
        if note:
            problems.scan(line, "note", note)
        user_id = people.accept(run, line, annotator, stage, group)
        if user_id is None:
            continue
        rows.append(
            (response_id, criterion_id, stage, group, met, user_id, note, rubric_version[case_pk], stamp, stamp, 1)
        )
        names.append((case_id, model, annotator))
        lines.append(line)
        if len(rows) >= import_summary.ROW_CHUNK:
            labeled |= _write_labels(run, BulkChunk(rows, names, lines), inserter, had_labels, frozen)
            rows, names, lines = [], [], []
            run.progress(line, None, "lines")
    run.summary.records += count
    labeled |= _write_labels(run, BulkChunk(rows, names, lines), inserter, had_labels, frozen)
    if run.writing():
        frozen.audit(run)
        counts.refresh(run.session, labeled)


@dataclass
class _FrozenRounds:
    """The feedback freeze (db/labeling/freeze.py) over an admin's import: an annotation label a row would create
    or change on a response whose round's feedback was opened is refused, once per round with the first line,
    unless the import overrides the freeze; then the labels it changed per round go into one audit entry."""

    changed: dict[datetime, int] = field(default_factory=dict)

    def allows(self, run: _Run, chunk: BulkChunk, indexes: list[int]) -> bool:
        """Whether the chunk's rows at `indexes` (those it would write) may be written."""
        annotation = [i for i in indexes if chunk.rows[i][2] == "annotation"]
        if not annotation:
            return True
        final = final_rounds(run.connection, {chunk.rows[i][0] for i in annotation})
        allowed = True
        for i in annotation:
            round_at = final.get((chunk.rows[i][0], chunk.rows[i][3]))
            if round_at is None:
                continue
            if round_at not in self.changed and not run.override_freeze:
                run.problems.at(chunk.lines[i], _frozen_said(round_at, *chunk.names[i][:2], chunk.rows[i][3]))
            self.changed[round_at] = self.changed.get(round_at, 0) + 1
            allowed = allowed and run.override_freeze
        return allowed

    def audit(self, run: _Run) -> None:
        if not self.changed or not run.override_freeze:
            return
        rounds = {round_at.isoformat(): n for round_at, n in sorted(self.changed.items())}
        entry = {"rounds": rounds, "labels": sum(rounds.values())}
        run.audit(
            [
                {
                    "action": "override_freeze",
                    "entity": "labels",
                    "entity_key": run.source[:255],
                    "before": None,
                    "after": entry,
                }
            ]
        )


def _frozen_said(round_at: datetime, case_id: str, model: str, group: int) -> Said:
    when = round_at.strftime("%Y-%m-%d %H:%M:%S")
    return Said(
        f"group {group}'s labels on case_id {case_id!r}, model {model!r} are final since the feedback of the round "
        f"assigned {when} was opened; nothing was imported (--override-freeze imports them anyway, audited)",
        "import.labels_frozen",
        group=group,
        case_id=case_id,
        model=model,
        round=when,
    )


def _label_twice(case_id: str, model: str, criterion_id: str, stage: str, group: int) -> Said:
    """The problem of a second label of one stage and group on a criterion of a response (one per file)."""
    return Said(
        f"criterion_id {criterion_id!r}: a second {stage} label for case_id {case_id!r}, "
        f"model {model!r}{'' if group == NO_GROUP else f', group {group}'} (one per file)",
        "import.label_twice",
        criterion=criterion_id,
        case_id=case_id,
        model=model,
        stage=Said(stage, f"import.stage.{stage}"),
    )


@dataclass
class _LabelAuthors:
    """Who the file's labels are credited to: every account's id and (role, group), and the placeholders to be."""

    users: dict[str, int]
    #: (role, group) of every account, and of the placeholder each unknown name will become.
    authors: dict[str, tuple[str, int | None]]
    #: Placeholders whose group no label has named yet (first seen as adjudicators): their first grouped label sets it.
    groupless: set[str]
    #: Every account name and every new name accepted so far, folded: a new name that looks like another is refused.
    folded: LookAlikes = field(default_factory=LookAlikes)

    @classmethod
    def load(cls, connection: Connection) -> _LabelAuthors:
        accounts = table_of(User).c
        people = cls({}, {}, set())
        columns = (
            accounts.username,
            accounts.id,
            accounts.role,
            accounts.group_no,
            accounts.is_active,
            accounts.password_hash,
        )
        for account in connection.execute(select(*columns)):
            people.users[account.username] = account.id
            people.authors[account.username] = (str(account.role), account.group_no)
            if account.group_no is None and not account.is_active and not account.password_hash:
                people.groupless.add(account.username)
        people.folded = LookAlikes(people.users)
        return people

    def accept(self, run: _Run, line: int, annotator: str, stage: str, group: int) -> int | None:
        """The id of the account a label of `annotator` is credited to, made as an inactive placeholder when new.

        None when the name or the author is refused (reported on `line`) or, after any problem, nothing is written
        any more.
        """
        errors_so_far = run.problems.errors
        user_id = self.users.get(annotator)
        if user_id is None and not USERNAME_PATTERN.match(annotator):
            # A new account would be made for this name: it must follow the rule of `users add`.
            run.problems.at(
                line,
                Said(
                    f"annotator {annotator!r} is not a valid username (2–64 letters, digits, '.', '_' or '-')",
                    "import.bad_username",
                    username=annotator,
                ),
            )
            return None
        if user_id is None and (other := self.folded.clash(annotator)) is not None:
            run.problems.at(line, self.folded.said("annotator", annotator, other))
            return None
        self.folded.add(annotator)
        group_no = None if group == NO_GROUP else group
        author = self._author(run, annotator, stage, group_no)
        refusal = label_author_refusal(author[0], author[1], stage, group_no)
        if refusal is not None:
            run.problems.at(line, _author_refused(annotator, refusal))
            return None
        if errors_so_far:
            return None
        if user_id is None:
            user_id = self.users[annotator] = add_placeholder_user(
                run.session,
                username=annotator,
                role=author[0],
                group_no=author[1],
                # the import makes them for whoever runs it (an admin's page or the command line), named so
                actor=SystemActor(run.actor),
            ).id
            run.summary.placeholders.append(annotator)
        return user_id

    def _author(self, run: _Run, annotator: str, stage: str, group_no: int | None) -> tuple[str, int | None]:
        """(role, group) of the label's author: a new name becomes a placeholder with the stage's role and the row's
        group; a groupless placeholder takes the group of its first grouped label."""
        author = self.authors.get(annotator)
        if author is None:  # a placeholder account: the role of the stage, the group of the row
            author = self.authors[annotator] = (str(LABEL_AUTHOR_ROLE[stage]), group_no)
            if group_no is None:
                self.groupless.add(annotator)
        elif group_no is not None and annotator in self.groupless and author[0] == LABEL_AUTHOR_ROLE[stage]:
            self.groupless.discard(annotator)
            author = self.authors[annotator] = (author[0], group_no)
            if annotator in self.users and not run.problems.errors:
                update_account(
                    run.session, username=annotator, role=author[0], group_no=group_no, actor=SystemActor(run.actor)
                )
        return author


def _author_refused(annotator: str, refusal: Said) -> Said:
    return Said(f"annotator {annotator!r} {refusal}", "import.label_author", username=annotator, reason=refusal)


def _write_labels(
    run: _Run, chunk: BulkChunk, inserter: label_write.BulkInserter, had_labels: bool, frozen: _FrozenRounds
) -> set[int]:
    """Has the label writer write a chunk, within the feedback freeze; returns the responses it is on."""
    return label_write.write_bulk(
        run, chunk, inserter, had_labels=had_labels, allows=lambda indexes: frozen.allows(run, chunk, indexes)
    )
