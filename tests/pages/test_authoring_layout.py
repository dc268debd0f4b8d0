"""The authoring page's layout through AppTest: the case in the left column, the editor beside it
(returned comment right after the criterion text, then the lint); the editor is a fragment.
That a committed cell reruns only the fragment is checked in the browser
(tests/e2e/test_authoring_audit_screens.py), where the app reports each run's scope."""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import rubrics
from db.rubrics.authoring import CriterionInput, default_criterion_ids
from db.rules.enums import RubricStatus
from db.store.engine import session_scope
from db.store.models import Assignment, Case, Criterion, RubricVersion, User
from i18n import translate
from tests.support.apptest_helpers import open_page, signed_in
from tests.support.factories import make_case, make_user

N = 30
CONTEXT = "患者男，62 岁，胸闷气短两周，夜间不能平卧。"


def zh(key, **values):
    return translate(key, "zh", **values)


@pytest.fixture
def returned(app_database):
    """ann1's rubric of CC-0005, returned with a comment on c04."""
    with session_scope(app_database) as s:
        ann1 = make_user(s, "ann1", "annotator", 1)
        case = make_case(s, "CC-0005", n=0, clinical_context=CONTEXT)
        s.add(Assignment(kind="rubric", case_pk=case.id, user_id=ann1.id, group_no=1))
    with session_scope(app_database) as s:
        user = s.exec(select(User).where(User.username == "ann1")).one()
        case_pk = s.exec(select(Case.id).where(Case.case_id == "CC-0005")).one()
        texts = [f"回答明确说明第{i}项心衰处理要点的具体内容" for i in range(1, N + 1)]
        draft = rubrics.save_rubric_draft(
            s,
            user,
            case_pk,
            [CriterionInput(cid, body) for cid, body in zip(default_criterion_ids(N), texts, strict=True)],
            base_version_id=None,
            expected_lock=None,
        )
        version = s.get(RubricVersion, draft.id)
        version.status = RubricStatus.returned
        c04 = s.exec(
            select(Criterion).where(Criterion.rubric_version_id == draft.id, Criterion.criterion_id == "c04")
        ).one()
        c04.review_comment = "请写明利尿剂名称"
    return app_database


def _element_types(block) -> list[str]:
    found = []
    for child in getattr(block, "children", {}).values():
        found.append(type(child).__name__)
        found += _element_types(child)
    return found


def _texts(block) -> str:
    found = []
    for child in getattr(block, "children", {}).values():
        value = getattr(child, "value", None)
        if isinstance(value, str):
            found.append(value)
        found.append(_texts(child))
    return "\n".join(found)


def _column_pairs(block, text: str) -> list:
    """(first, second) columns of every row of columns whose first column shows `text`."""
    children = list(getattr(block, "children", {}).values())
    found = []
    columns = [child for child in children if type(child).__name__ == "Column"]
    if len(columns) >= 2 and text in _texts(columns[0]):
        found.append((columns[0], columns[1]))
    for child in children:
        found += _column_pairs(child, text)
    return found


def test_the_case_stands_left_of_the_editor_and_the_comment_beside_its_criterion(returned):
    app = open_page(signed_in(returned, "ann1"), "annotate-rubrics")
    assert not app.exception
    # the row holding the case: its first column has the case, its second the editor (and nothing of the case)
    [(case_column, editor_column)] = _column_pairs(app.main, CONTEXT)
    assert "Dataframe" in _element_types(editor_column)
    assert "Dataframe" not in _element_types(case_column)
    assert CONTEXT not in _texts(editor_column)
    frame = app.dataframe[0]
    order = list(frame.proto.column_order)
    assert order[:5] == ["order", "criterion_id", "text", "review", "lint"] and order[-1] == "tags"
    assert frame.value["review"][3] == "请写明利尿剂名称"
    assert zh("annotate.authoring.returned", version=1) in [w.value for w in app.warning]


def _display_width(text: str) -> int:
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_row_with_several_warnings_fits_its_lint_cell(monkeypatch, lang):
    import i18n
    from annotate.authoring import LINT_WIDTH, ROW_HEIGHT
    from db.rules.lint import lint_rubric
    from ui import rubric_lint, shell

    monkeypatch.setattr(shell, "t", lambda key, **values: i18n.translate(key, lang, **values))
    long_text = "回答应全面、准确、适当地说明胸痛与主动脉夹层及肺栓塞相鉴别的要点" * 4  # > 120 characters
    # Similar to three others: one short mention with a count, not three.
    texts = [
        long_text,
        *(long_text + suffix for suffix in ("并且复查", "并复诊", "及随访")),
        "另一条完全不同且足够长的评分标准",
    ]
    report = lint_rubric(texts, expected=5)
    assert sum(finding.code == "near_duplicate" for finding in report.for_row(0)) == 3
    codes = {finding.code for finding in report.for_row(0)}
    assert {"too_long", "compound", "vague", "near_duplicate"} <= codes  # four warnings on one row
    cell = rubric_lint.cell_text(report, 0)
    # The cell wraps to three lines (ROW_HEIGHT) of about 96 px of text (LINT_WIDTH less padding; the grid
    # only widens it): a wide character takes about 16 px there, a narrow one 8.
    lines = ROW_HEIGHT // 22
    per_line = (LINT_WIDTH - 20) // 8  # in narrow-character units: 12 at 1024 px (read off its screenshot)
    assert _display_width(cell) <= lines * per_line - (lines - 1), cell  # a unit lost at each wrap
    assert _display_width(rubric_lint.row_text(report, 0)) > lines * per_line  # the sentences would be cut
    assert cell.startswith(i18n.translate("annotate.lint.mark.warning", lang))
    assert rubric_lint.cell_text(report, 4) == ""
    similar = i18n.translate("annotate.lint.short.near_duplicate", lang, other=2)
    assert i18n.translate("annotate.lint.short.and_more", lang, first=similar, more=2) in cell
