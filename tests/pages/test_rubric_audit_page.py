"""The rubric audit page: lint findings under each criterion, changes since the previous version,
and the Ctrl+Enter decision that asks first (AppTest; the keys themselves are pressed in the browser)."""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import review
from db.rules.enums import RubricStatus
from db.store.engine import session_scope
from db.store.models import Criterion, RubricVersion, User
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.factories import make_case, make_rubric, make_user
from ui.text import plain

N = 3
COMPOUND = "说明阿司匹林与氯吡格雷的联合用法及疗程"  # joined by 与 and 及: one criterion, two checks
CLEAN = "明确建议胸痛持续超过二十分钟时立即拨打急救电话"


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


def _warning(code: str, **values) -> str:
    return t("annotate.lint.line", mark=t("annotate.lint.warning"), message=t(f"annotate.lint.{code}", **values))


def _set_texts(session, rubric_id: int, texts_by_id: dict[str, str]) -> None:
    for criterion in session.exec(select(Criterion).where(Criterion.rubric_version_id == rubric_id)).all():
        if criterion.criterion_id in texts_by_id:
            criterion.text = texts_by_id[criterion.criterion_id]
            session.add(criterion)
    session.flush()


@pytest.fixture
def audit(app_database):
    """A rubric approved as version 1, revised by its author and submitted again as version 2."""
    with session_scope(app_database) as s:
        author = make_user(s, "ann1", "annotator", 1)
        make_user(s, "chk1", "checker", 1)
        case = make_case(s, "CC-0007", n=N, status=RubricStatus.approved, author=author)
        first = s.exec(select(RubricVersion).where(RubricVersion.case_pk == case.id)).one()
        _set_texts(s, first.id, {"c01": CLEAN, "c02": "询问发热的持续时间和最高体温", "c03": "建议复查心电图"})
        second = make_rubric(s, case, n=N, status=RubricStatus.submitted, author=author, version=2)
        # c02 rewritten (now a compound joined by 与/及), c01 and c03 as in version 1
        _set_texts(s, second.id, {"c01": CLEAN, "c02": COMPOUND, "c03": "建议复查心电图"})
        ids = {"first": first.id, "second": second.id}
    return app_database, ids


def test_changes_are_counted_against_the_previous_approved_version(audit):
    engine, ids = audit
    with session_scope(engine, read_only=True) as s:
        checker = s.exec(select(User).where(User.username == "chk1")).one()
        view = review.rubric_for_review(s, checker, ids["second"])
    assert view.previous_version == 1
    assert view.changed_since_return == {"c02"}


def test_lint_findings_stand_under_their_criterion(audit):
    engine, _ = audit
    app = open_page(signed_in(engine, "chk1"), "review-rubrics")
    assert not app.exception
    captions = [c.value for c in app.caption]
    # the compound criterion is named with both joining words; the clean one has no finding
    compound = plain(_warning("compound", words="及、与"))
    assert any(compound in caption for caption in captions), "\n".join(captions)
    # version 1 had no 与/及: only version 2's c02 carries it, and it is marked as changed
    assert any(t("review.audit.changed_since", n=1, version=1) in caption for caption in captions)
    short = plain(_warning("too_short", chars=len("建议复查心电图"), min=8))
    assert any(short in caption for caption in captions)
    assert any(t("review.audit.lint_summary", n=2) in caption for caption in captions)
    # one finding line per finding, and none for the clean criterion
    assert sum(caption.startswith(":orange[⚠") for caption in captions) == 2
    assert CLEAN in texts(app)


def test_ctrl_enter_decides_only_after_confirmation(audit):
    engine, ids = audit
    app = open_page(signed_in(engine, "chk1"), "review-rubrics")
    decide = button(app, t("review.audit.decide"))
    assert decide.proto.shortcut.lower().replace(" ", "") in ("ctrl+enter", "mod+enter", "ctrl+return")
    app = decide.click().run()
    assert not app.exception
    # asked first: nothing decided yet
    assert t("review.audit.confirm_approve", case="CC\\-0007", version=2) in [w.value for w in app.warning]
    with session_scope(engine, read_only=True) as s:
        assert s.get(RubricVersion, ids["second"]).status == RubricStatus.submitted
    # Esc (the cancel button) drops the proposal and changes nothing
    app = button(app, t("review.audit.cancel")).click().run()
    assert not [w for w in app.warning if w.value.startswith(t("review.audit.confirm"))]
    with session_scope(engine, read_only=True) as s:
        assert s.get(RubricVersion, ids["second"]).status == RubricStatus.submitted
    # a criterion comment turns the proposal into a return; confirming carries it out
    comment = next(w for w in app.text_input if w.key and w.key.startswith("review_audit_c_"))
    comment.input("请拆成两条：用法与疗程分开")
    app = button(app, t("review.audit.decide")).click().run()
    assert t("review.audit.confirm_return", case="CC\\-0007", version=2, n=1) in [w.value for w in app.warning]
    assert button(app, t("review.audit.decide")).disabled  # only the confirmation answers Ctrl+Enter now
    app = button(app, t("review.audit.confirm")).click().run()
    assert not app.exception
    with session_scope(engine, read_only=True) as s:
        rubric = s.get(RubricVersion, ids["second"])
        assert rubric.status == RubricStatus.returned
        commented = s.exec(
            select(Criterion.criterion_id, Criterion.review_comment).where(
                Criterion.rubric_version_id == rubric.id, Criterion.review_comment.is_not(None)
            )
        ).all()
    assert [tuple(row) for row in commented] == [("c01", "请拆成两条：用法与疗程分开")]


def test_a_click_on_approve_asks_before_deciding(audit):
    engine, ids = audit
    app = open_page(signed_in(engine, "chk1"), "review-rubrics")
    app = button(app, t("review.audit.approve")).click().run()
    assert not app.exception
    # a click proposes, like Ctrl+Enter: the question is asked and nothing is decided
    assert t("review.audit.confirm_approve", case="CC\\-0007", version=2) in [w.value for w in app.warning]
    with session_scope(engine, read_only=True) as s:
        assert s.get(RubricVersion, ids["second"]).status == RubricStatus.submitted
    app = button(app, t("review.audit.cancel")).click().run()
    with session_scope(engine, read_only=True) as s:
        assert s.get(RubricVersion, ids["second"]).status == RubricStatus.submitted
    app = button(app, t("review.audit.approve")).click().run()
    app = button(app, t("review.audit.confirm")).click().run()
    assert not app.exception
    with session_scope(engine, read_only=True) as s:
        assert s.get(RubricVersion, ids["second"]).status == RubricStatus.approved


def test_no_criterion_sits_in_a_scroll_box_of_its_own(audit):
    engine, _ = audit
    app = open_page(signed_in(engine, "chk1"), "review-rubrics")
    # every criterion row is drawn at full height in the page; the only fixed-height box is the case's
    fixed = [height for height in _fixed_heights(app.main) if height]
    assert len(fixed) == 1, fixed  # the case box


def _fixed_heights(node):
    """The pixel height of every container under `node` that scrolls in a box of its own."""
    proto = getattr(node, "proto", None)
    if proto is not None and hasattr(proto, "height_config") and proto.HasField("height_config"):
        yield proto.height_config.pixel_height
    for child in getattr(node, "children", {}).values():
        yield from _fixed_heights(child)
