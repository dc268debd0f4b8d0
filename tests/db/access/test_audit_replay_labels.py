"""The label replay names exactly the labels changed behind the log's back, whatever the change.

The small demo is built through the real writers (bulk `labels` entries, the annotator's and the
checker's saves), then label rows are changed by raw SQL at random: met flipped, a note written or
cleared, another user, rows deleted, rows inserted. What was changed is known by construction; the
replay must name those labels and no others, and count every stored row.
"""

from __future__ import annotations

import random
import re

import pytest
from sqlalchemy import text

from db.rules.enums import NO_GROUP
from db.store.engine import session_scope
from demo.generator import build_demo
from tests.db.access.test_audit_proof import verify

_NAMED = re.compile(r"^label (\S+): audit log says ")


def _label_rows(engine) -> list[dict]:
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT label.id, case_.case_id, response.model, label.criterion_id, label.stage, label.group_no, "
                "label.user_id, label.note, label.met, label.response_id, label.rubric_version_id "
                "FROM label JOIN response ON response.id = label.response_id "
                'JOIN "case" AS case_ ON case_.id = response.case_pk ORDER BY label.id'
            )
        ).mappings()
        return [dict(row) for row in rows]


def _key(row: dict) -> str:
    group = "-" if row["group_no"] == NO_GROUP else row["group_no"]
    return f"{row['case_id']}/{row['model']}/{row['criterion_id']}/{row['stage']}/{group}"


def _named_labels(engine) -> tuple[set[str], int]:
    result = verify(engine)
    named = [match.group(1) for problem in result.problems if (match := _NAMED.match(problem))]
    assert len(named) == len(set(named)), "a label is named twice"
    return set(named), result.replay.labels


@pytest.fixture
def demo(engine):
    build_demo(engine, scale="small")
    return engine


def test_untouched_demo_replays_every_label_row(demo):
    named, compared = _named_labels(demo)
    assert named == set()
    assert compared == len(_label_rows(demo))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_changes_to_label_rows_are_named_exactly(demo, seed):
    rng = random.Random(seed)
    rows = _label_rows(demo)
    with_note = [row for row in rows if row["note"]]
    assert with_note, "the demo writes notes: the changes below must meet some"
    user_ids = sorted({row["user_id"] for row in rows})
    chosen = rng.sample(rows, 40) + rng.sample(with_note, 4)
    changed: set[str] = set()
    statements: list[tuple[str, dict]] = []
    for number, row in enumerate(chosen):
        key = _key(row)
        if key in changed:
            continue
        kind = number % 6
        if kind == 0:
            statements.append(("UPDATE label SET met = :met WHERE id = :id", {"met": not row["met"], "id": row["id"]}))
        elif kind == 1:
            note = rng.choice([f"改过的备注 {number}", None if row["note"] else "新备注"])
            if note == row["note"]:
                continue
            statements.append(("UPDATE label SET note = :note WHERE id = :id", {"note": note, "id": row["id"]}))
        elif kind == 2:
            other = rng.choice([user for user in user_ids if user != row["user_id"]])
            statements.append(("UPDATE label SET user_id = :user WHERE id = :id", {"user": other, "id": row["id"]}))
        elif kind == 3:
            statements.append(("DELETE FROM label WHERE id = :id", {"id": row["id"]}))
        elif kind == 4:
            # A row written again with the values it has: not a change, so not named.
            statements.append(("UPDATE label SET met = :met WHERE id = :id", {"met": row["met"], "id": row["id"]}))
            continue
        else:
            # A row under a criterion id the log never mentions, beside an existing label.
            criterion = f"x-{number}"
            statements.append(
                (
                    "INSERT INTO label (response_id, criterion_id, stage, group_no, met, user_id, note, "
                    "rubric_version_id, created_at, updated_at, lock_version) VALUES (:response, :criterion, "
                    ":stage, :group_no, :met, :user, NULL, :rubric, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 1)",
                    {
                        "response": row["response_id"],
                        "criterion": criterion,
                        "stage": row["stage"],
                        "group_no": row["group_no"],
                        "met": True,
                        "user": row["user_id"],
                        "rubric": row["rubric_version_id"],
                    },
                )
            )
            changed.add(_key({**row, "criterion_id": criterion}))
            continue
        changed.add(key)
    with session_scope(demo) as session:
        for statement, values in statements:
            session.execute(text(statement), values)
    assert len(changed) >= 25
    named, compared = _named_labels(demo)
    assert named == changed
    assert compared == len(_label_rows(demo))


#: A bulk entry's rows where each of place (case, model, stage, group) and user changes alone from the row before.
_BULK_ROWS = [
    ["CC-1", "m-a", "c01", "annotation", 1, True, "u1", None],
    ["CC-1", "m-a", "c02", "annotation", 1, False, "u1", "a note"],
    ["CC-1", "m-a", "c01", "annotation", 2, True, "u1", None],
    ["CC-1", "m-a", "c01", "check", 2, False, "u1", None],
    ["CC-1", "m-b", "c01", "check", 2, True, "u2", ""],
    ["CC-2", "m-b", "c01", "check", 2, True, "u2", None],
    ["CC-2", "m-b", "c02", "check", 2, True, "u1", "x"],
    ["CC-1", "m-a", "c01", "annotation", 1, False, "u1", None],
]


def test_a_bulk_entry_reads_as_its_rows_logged_one_by_one(session):
    from db.access.audit_replay_labels import STAGES, LabelReplay, RubricVersions

    bulk, single = LabelReplay(session, RubricVersions()), LabelReplay(session, RubricVersions())
    bulk.feed("labels", "", "importer", {"rows": _BULK_ROWS})
    for case_id, model, cid, stage, group, met, user, note in _BULK_ROWS:
        after = {"met": met, "user": user, "note": note}
        single.feed("label", f"{case_id}/{model}/{cid}/{stage}/{group}", "someone", after)
    place, criterion, value, version = (column.tolist() for column in bulk.logged.arrays())
    assert [column.tolist() for column in single.logged.arrays()] == [place, criterion, value, version]
    # Each column computed here from the names the replay gave ids to.
    for index, (case_id, model, cid, stage, group, met, user, note) in enumerate(_BULK_ROWS):
        response = bulk.response_of[(case_id, model)]
        assert place[index] == (response << 4) | (STAGES.index(stage) << 2) | group
        assert bulk.criteria.names[criterion[index]] == cid
        assert bulk.user_names[(value[index] >> 1) & ((1 << 32) - 1)] == user
        assert bulk.notes.names[value[index] >> 33] == (note or None)
        assert value[index] & 1 == int(met)
    assert len(set(place)) == 5 and version == [0] * len(_BULK_ROWS)
