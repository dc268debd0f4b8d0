"""The record models: messages, the release schema they produce, and the importers' quick test."""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

from db.importers.labels import _check_label
from db.rules.records import CASE_FIELDS, LabelRecord, check, release_case_model, release_problems, release_schema
from tests.support.import_samples import case_record


def release_line(case_id: str = "CC-0001") -> dict:
    record = case_record(case_id)
    record["rubrics"] = [{"criterion_id": c["criterion_id"], "criterion": c["criterion"]} for c in record["rubrics"]]
    return record


def test_the_release_schema_accepts_what_the_model_accepts_and_refuses_what_it_refuses():
    schema = release_schema(30)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = release_line()
    assert release_problems(good, 30) == [] and validator.is_valid(good)
    bad = [
        {**good, "difficulty": "extreme"},
        {**good, "rubrics": good["rubrics"][:29]},
        {**good, "clinical_context": "   "},
        {**good, "reference_answer_note": "x"},
        {**good, "rubrics": [{**good["rubrics"][0], "source": "x"}, *good["rubrics"][1:]]},
        {key: value for key, value in good.items() if key != "user_request"},
    ]
    for record in bad:
        assert release_problems(record, 30), record
        assert not validator.is_valid(record), record


def test_release_problems_name_the_field():
    good = release_line()
    assert release_problems({**good, "rubrics": good["rubrics"][:29]}, 30) == ["rubrics has 29 items, at least 30"]
    assert release_problems({**good, "internal_id": 1}, 30) == ["internal_id is a key no released case may have"]
    assert release_case_model(30) is release_case_model(30)


def test_case_fields_are_the_public_release_fields():
    assert CASE_FIELDS == (
        "case_id", "difficulty", "task", "task_labels", "subject", "subject_labels", "user_role",
        "clinical_context", "user_request", "register", "rubrics",
    )  # fmt: skip


class _Targets:
    """Every (case, model) exists and every criterion is in the rubric: only the fields decide."""

    def __init__(self) -> None:
        self.response = _Everything((1, 1))
        self.criteria = _Everything(_Everything(1))

    def locate(self, case_id, model, criterion_id, errors):
        return 1, 1, 1


class _Everything(dict):
    def __init__(self, value) -> None:
        super().__init__()
        self.value = value

    def get(self, key, default=None):
        return self.value


#: Texts an id may not be: blank, too long, or carrying a control, zero-width, bidi or separator character.
INVISIBLE_IDS = ["CC-0001\u200b", "m\u202eb", "c01\x00", "a\u2028", "\ufeffx", "x\x7f", "dr\u2066a", "a\ud800"]
texts = st.one_of(
    st.text(max_size=70),
    st.sampled_from(["", " ", "\u3000", "\x1c", "\u0085", "C" * 65, *INVISIBLE_IDS]),
    st.integers(),
)
notes = st.one_of(st.none(), st.text(max_size=5), st.integers(), st.sampled_from(["理由\x00", "x\ud800", "a\nb"]))
label_rows = st.fixed_dictionaries(
    {
        "case_id": texts,
        "model": texts,
        "criterion_id": texts,
        "annotator": texts,
        "met": st.one_of(st.booleans(), st.integers(0, 1), st.none()),
        "stage": st.sampled_from(["annotation", "check", "adjudication", "review", None]),
        "group": st.one_of(st.sampled_from([1, 2, None, True, 3, 1.0])),
        "note": notes,
    }
)


@settings(max_examples=400, deadline=None)
@given(row=label_rows)
def test_the_quick_label_test_accepts_nothing_the_model_refuses(row):
    # (The model refuses every INVISIBLE_IDS text in an id field and NUL or a lone surrogate in a note.)
    quick, errors = _check_label(row, _Targets())
    checked, problems = check(LabelRecord, row)
    if quick is not None and not errors:
        assert checked is not None, problems


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"group": True}, "group must be 1 or 2, found True"),
        ({"stage": "adjudication"}, "group must be null for an adjudication, found 1"),
        ({"group": None}, "group is null: annotation labels belong to expert group 1 or 2"),
        ({"group": "<drop>"}, "group is missing: annotation labels belong to expert group 1 or 2"),
        ({"met": 1}, "met must be true or false, found a number"),
        ({"annotator": "\u3000"}, "annotator is blank"),
    ],
)
def test_label_messages(row, message):
    good = {"case_id": "CC-1", "model": "m", "criterion_id": "c01", "met": True, "stage": "annotation", "group": 1,
            "annotator": "a", "note": None}  # fmt: skip
    record = {**good, **row}
    record = {key: value for key, value in record.items() if value != "<drop>"}
    assert check(LabelRecord, record)[1] == [message]


@pytest.mark.parametrize("text", INVISIBLE_IDS)
@pytest.mark.parametrize("field", ["case_id", "model", "criterion_id", "annotator"])
def test_the_model_and_the_quick_test_refuse_invisible_characters_in_ids(field, text):
    row = {"case_id": "CC-1", "model": "m", "criterion_id": "c01", "met": True, "stage": "annotation", "group": 1,
           "annotator": "a", "note": None, field: text}  # fmt: skip
    checked, problems = check(LabelRecord, row)
    assert checked is None and problems[0].startswith(f"{field} "), problems
    assert _check_label(row, _Targets())[0] is None
