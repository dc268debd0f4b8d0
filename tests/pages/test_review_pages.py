"""The checker's pages and the audit log page through AppTest, on a real database."""

from __future__ import annotations

import json
import re
from datetime import UTC, timedelta

import pytest
from sqlmodel import select

from db import review
from db.rules.enums import RubricStatus, Stage
from db.rules.errors import ValidationFailed
from db.store.engine import session_scope
from db.store.models import AuditLog, Label, Response, RubricVersion, User
from i18n import translate
from review import pages as review_pages
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.factories import make_case, make_label, make_response, make_rubric, make_user

CHECKER_PAGES = {
    "review-rubrics": "review.audit.title",
    "review-labels": "review.check.title",
    "review-adjudication": "review.adjudication.title",
}
N = 3


WORKBENCH_PAGES = {"review-adjudication": "review.adjudication.empty", "review-labels": "review.check.empty"}


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


@pytest.fixture
def studio(app_database):
    """Two groups of annotators and checkers; a case labeled differently by the groups; a submitted rubric."""
    with session_scope(app_database) as s:
        make_user(s, "boss", "admin")
        people = {
            name: make_user(s, name, role, group)
            for name, role, group in (
                ("ann1", "annotator", 1),
                ("ann2", "annotator", 2),
                ("chk1", "checker", 1),
                ("chk2", "checker", 2),
                ("chk1b", "checker", 1),
            )
        }
        case = make_case(s, "CC-0001", n=N, clinical_context="患者咳嗽三天 <b>不要加粗</b>")
        response = make_response(s, case, "secret-model", "建议多喝水，必要时就医。")
        for i in range(1, N + 1):
            make_label(s, response, f"c{i:02d}", True, people["ann1"], note="组一认为满足")
            make_label(s, response, f"c{i:02d}", i != 1, people["ann2"], note="组二认为不满足" if i == 1 else None)
        draft_case = make_case(s, "CC-0002", n=0)
        rubric = make_rubric(s, draft_case, n=N, status=RubricStatus.submitted, author=people["ann1"])
        ids = {"response": response.id, "rubric": rubric.id, "code": response.code}
    return app_database, ids


def groups_checked(engine, ids):
    """Both groups' checks confirm their annotations (by checkers not otherwise used here): adjudication may start."""
    with session_scope(engine) as s:
        response = s.get(Response, ids["response"])
        checkers = {1: make_user(s, "chk1c", "checker", 1), 2: make_user(s, "chk2c", "checker", 2)}
        for label in s.exec(select(Label).where(Label.response_id == response.id)).all():
            make_label(
                s, response, label.criterion_id, label.met, checkers[label.group_no], stage=Stage.check, note=label.note
            )


def test_navigation_shows_review_pages_to_checkers_only(studio):
    engine, _ = studio
    with session_scope(engine, read_only=True) as s:
        checker = s.exec(select(User).where(User.username == "chk1")).one()
        annotator = s.exec(select(User).where(User.username == "ann1")).one()
        admin = s.exec(select(User).where(User.username == "boss")).one()
    entries = review_pages(checker)
    assert len(entries) == len(CHECKER_PAGES) and {section for section, _ in entries} == {"nav.section.review"}
    assert review_pages(annotator) == [] and review_pages(admin) == []


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_every_checker_page_renders_with_the_unresolved_count(studio, lang):
    engine, _ = studio
    app = signed_in(engine, "chk1b", lang=lang)
    for url, title_key in CHECKER_PAGES.items():
        app = open_page(app, url)
        assert not app.exception, (url, [e.value for e in app.exception])
        if url in WORKBENCH_PAGES:
            # one screen: no page title, the workbench right under the picker
            # (or its empty queue: chk1b's group has nothing to check, nothing may be adjudicated yet)
            workbenches = [e for e in app.get("bidi_component") if (e.key or "").startswith("wb_")]
            empty = {translate(WORKBENCH_PAGES[url], lang), translate("review.check.no_annotators", lang)}
            assert len(workbenches) == 1 or empty & set(texts(app).splitlines()), url
        else:
            assert app.title[0].value == translate(title_key, lang)
        assert not app.error
        metric = [m for m in app.sidebar.get("metric") if m.label == translate("sidebar.unresolved", lang)]
        # chk1b has taken nothing into adjudication: the disagreement counts for admins, not for them
        assert metric and metric[0].value == "0"
        basis = translate("sidebar.unresolved.basis_checker", lang)
        assert any(basis in c.value for c in app.sidebar.caption)
        assert "secret-model" not in texts(app)


def test_annotator_is_refused_a_checker_page(studio):
    engine, _ = studio
    app = signed_in(engine, "ann1")
    app = open_page(app, "review-adjudication")
    assert translate("review.adjudication.title", "zh") not in [t.value for t in app.title]


def _comment_inputs(app):
    return [w for w in app.text_input if w.key and w.key.startswith("review_audit_c_")]


def test_return_with_a_comment_then_approve(studio):
    engine, ids = studio
    app = open_page(signed_in(engine, "chk1"), "review-rubrics")
    assert "CC-0002" in texts(app)
    # Approving with a criterion comment is refused: such a rubric goes back to its author.
    _comment_inputs(app)[1].input("请写明具体剂量")
    app = button(app, t("review.audit.approve")).click().run()
    assert t("review.audit.approve_has_comments", n=1) in texts(app)
    app = button(app, t("review.audit.return")).click().run()
    assert not app.exception
    # a click asks first, like Ctrl+Enter: nothing is decided yet
    assert t("review.audit.confirm_return", case="CC\\-0002", version=1, n=1) in texts(app)
    with session_scope(engine, read_only=True) as s:
        assert s.get(RubricVersion, ids["rubric"]).status == RubricStatus.submitted
    app = button(app, t("review.audit.confirm")).click().run()
    assert t("review.audit.returned", case="CC\\-0002") in texts(app)
    with session_scope(engine, read_only=True) as s:
        rubric = s.get(RubricVersion, ids["rubric"])
        assert rubric.status == RubricStatus.returned
        view = review.rubric_for_review(s, s.exec(select(User).where(User.username == "chk1")).one(), rubric.id)
        assert [c.review_comment for c in view.criteria] == [None, "请写明具体剂量", None]
    assert t("review.audit.empty") in texts(app)
    with session_scope(engine) as s:
        rubric = s.get(RubricVersion, ids["rubric"])
        rubric.status, rubric.lock_version = RubricStatus.submitted, rubric.lock_version + 1
        s.add(rubric)
    app = open_page(signed_in(engine, "chk1"), "review-rubrics")
    assert t("review.audit.previous_comment", comment="请写明具体剂量") in texts(app)
    for field in _comment_inputs(app):
        field.input("")
    app = button(app, t("review.audit.approve")).click().run()
    app = button(app, t("review.audit.confirm")).click().run()
    with session_scope(engine, read_only=True) as s:
        assert s.get(RubricVersion, ids["rubric"]).status == RubricStatus.approved


def test_author_sees_own_rubric_but_cannot_decide(studio):
    engine, _ = studio
    with session_scope(engine) as s:
        author = make_user(s, "chkauthor", "checker", 2)
        own_id = make_rubric(s, make_case(s, "CC-0003", n=0), n=N, status=RubricStatus.submitted, author=author).id
    app = open_page(signed_in(engine, "chkauthor"), "review-rubrics")
    app.selectbox(key="review_audit_pick").set_value(own_id)
    app = app.run()
    assert t("review.audit.own") in texts(app)
    assert button(app, t("review.audit.approve")).disabled


def test_label_check_sends_its_own_group_labels_prefilled(studio):
    # Confirming and correcting with keys (1/0, E, Ctrl+Enter) is driven in tests/e2e/test_checker_workbench.py.
    engine, ids = studio
    app = open_page(signed_in(engine, "chk2"), "review-labels")
    assert not app.exception
    [element] = [e for e in app.get("bidi_component") if (e.key or "").startswith("wb_")]
    data = json.loads(element.proto.json)
    sent = json.dumps(data, ensure_ascii=False)
    assert "ann2" in sent and "组二认为不满足" in sent
    assert "组一认为满足" not in sent and "secret-model" not in sent  # the other group's notes stay hidden
    assert len(data["items"]) == N
    # prefilled with the annotator's labels: c01 not met, the rest met
    assert {item["key"]: item["state"] for item in data["items"]} == {f"c{i:02d}": i != 1 for i in range(1, N + 1)}
    assert data["text"] == "建议多喝水，必要时就医。"


def test_adjudication_sends_the_workbench_both_labels_and_no_model(studio):
    # Deciding with keys (1/0, rationale, Ctrl+Enter) is driven in the browser: tests/e2e/test_checker_workbench.py.
    engine, ids = studio
    groups_checked(engine, ids)
    app = open_page(signed_in(engine, "chk1b"), "review-adjudication")
    # Checked by both groups, but not taken in: no disagreement is shown or counted yet.
    assert t("review.adjudication.empty") in texts(app)
    assert not [e for e in app.get("bidi_component") if (e.key or "").startswith("wb_")]
    assert t("review.adjudication.ready", n="1") in texts(app)
    app = button(app, t("review.adjudication.take")).click().run()
    assert not app.exception
    assert t("review.adjudication.taken", n="1") in texts(app)
    assert [m.value for m in app.sidebar.get("metric") if m.label == t("sidebar.unresolved")] == ["1"]
    [element] = [e for e in app.get("bidi_component") if (e.key or "").startswith("wb_")]
    data = json.loads(element.proto.json)
    sent = texts(app) + json.dumps(data, ensure_ascii=False) + "".join(str(s.options) for s in app.selectbox)
    assert "secret-model" not in sent
    assert re.fullmatch(r"wb_[0-9a-f]{12}", element.key)  # random per session: no id in it
    [cell] = data["items"]  # the one disputed criterion
    assert cell["key"] == "c01" and cell["state"] is None
    sides = {line["label"]: (line["value"], line["note"]) for line in cell["lines"]}
    assert set(sides) == {t("review.adjudication.label_a"), t("review.adjudication.label_b")}
    assert sorted(sides.values()) == sorted(
        [(t("review.met"), "组一认为满足"), (t("review.not_met"), "组二认为不满足")]
    )
    assert data["text"] == "建议多喝水，必要时就医。" and data["context"] == "患者咳嗽三天 <b>不要加粗</b>"
    assert data["texts"]["shared_note"] == t("workbench.shared_rationale")


def test_a_saved_adjudication_shows_as_decided(studio):
    engine, ids = studio
    groups_checked(engine, ids)
    with session_scope(engine) as s:
        other = make_user(s, "chk2b", "checker", 2)
        review.adjudicate(s, other, response_id=ids["response"], criterion_id="c01", met=True, rationale="先到先得")
    app = open_page(signed_in(engine, "chk1b"), "review-adjudication")
    # nothing open any more: the queue is empty
    assert t("review.adjudication.empty") in texts(app)
    metric = [m for m in app.sidebar.get("metric") if m.label == t("sidebar.unresolved")]
    assert metric[0].value == "0"


def test_audit_log_page_filters_verifies_and_downloads(studio):
    engine, ids = studio
    with session_scope(engine) as s:
        checker = s.exec(select(User).where(User.username == "chk1")).one()
        review.approve_rubric(s, checker, ids["rubric"], seen_lock_version=1)
    app = open_page(signed_in(engine, "boss"), "admin-audit-log")
    assert not app.exception
    assert app.title[0].value == t("review.audit_log.title")
    app.multiselect(key="audit_log_entities").set_value(["rubric"])
    app = app.run()
    frame = app.dataframe[0].value
    # codes in the reader's language, the time in Asia/Shanghai (UTC+8, no daylight saving), named as a reader would
    from zoneinfo import ZoneInfo

    from ui.times import zone_label

    shanghai = zone_label(ZoneInfo("Asia/Shanghai"), t)
    assert "Asia" not in shanghai and "UTC+8" in shanghai
    assert list(frame[t("review.audit_log.col.entity")]) == [t("workbench.audit_entity.rubric")]
    assert list(frame[t("review.audit_log.col.action")]) == [t("workbench.audit_action.approve")]
    assert list(frame[t("review.audit_log.col.actor")]) == ["chk1"]
    with session_scope(engine, read_only=True) as s:
        at = s.exec(select(AuditLog.at).where(AuditLog.entity == "rubric")).one()
    utc = at if at.tzinfo else at.replace(tzinfo=UTC)
    assert list(frame[t("review.audit_log.col.at", zone=shanghai)]) == [
        (utc + timedelta(hours=8)).strftime("%Y-%m-%d %H:%M:%S")
    ]
    app.multiselect(key="audit_log_entities").set_value([])
    app.text_input(key="audit_log_key").input("no-such-key")
    app = app.run()
    assert t("review.audit_log.empty") in texts(app)
    app.text_input(key="audit_log_key").input("")
    app = button(app.run(), t("review.audit_log.verify")).click().run()
    assert app.success and t("review.audit_log.verified", n="").split("：")[0] in app.success[0].value
    with session_scope(engine, read_only=True) as s:
        from db.access.audit_search import audit_jsonl

        boss = s.exec(select(User).where(User.username == "boss")).one()
        lines = audit_jsonl(s, boss, entities=["rubric"]).decode("utf-8").splitlines()
        assert [json.loads(line)["action"] for line in lines] == ["approve"]
        assert len(audit_jsonl(s, boss).decode().splitlines()) == len(s.exec(select(AuditLog)).all())


def test_checker_cannot_open_the_audit_log(studio):
    engine, _ = studio
    app = open_page(signed_in(engine, "chk1"), "admin-audit-log")
    assert t("review.audit_log.title") not in [title.value for title in app.title]


def test_sidebar_and_adjudication_page_count_open_disagreements_on_both_bases(studio):
    engine, ids = studio
    groups_checked(engine, ids)
    with session_scope(engine) as s:
        people = {u.username: u for u in s.exec(select(User)).all()}
        second = make_response(s, make_case(s, "CC-0009", n=N), "other-model", "多休息。")
        for i in range(1, N + 1):  # two disputed criteria on the second response
            cid, differs = f"c{i:02d}", i <= 2
            make_label(s, second, cid, True, people["ann1"])
            make_label(s, second, cid, not differs, people["ann2"])
            make_label(s, second, cid, True, people["chk1c"], stage=Stage.check)
            make_label(s, second, cid, not differs, people["chk2c"], stage=Stage.check)
    app = open_page(signed_in(engine, "chk1b"), "review-adjudication")
    app = button(app, t("review.adjudication.take")).click().run()
    assert not app.exception
    # 3 decisions on 2 responses: both figures, in the sidebar and on the page, under one definition
    assert [m.value for m in app.sidebar.get("metric") if m.label == t("sidebar.unresolved")] == ["3"]
    assert any(t("sidebar.unresolved.responses", decisions="3", responses="2") in c.value for c in app.sidebar.caption)
    assert t("review.adjudication.intro", decisions="3", responses="2") in [c.value for c in app.caption]


def test_a_correction_without_its_note_is_refused_naming_the_criterion(studio):
    engine, ids = studio
    with session_scope(engine) as s:
        checker = s.exec(select(User).where(User.username == "chk2")).one()
        with pytest.raises(ValidationFailed) as refused:
            review.save_checks(s, checker, response_id=ids["response"], decisions=[review.CheckInput("c02", False, "")])
    assert refused.value.key == "errors.note_required_criterion" and refused.value.params["criterion"] == "c02"


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_check_page_in_sample_mode_says_unchecked_responses_stay_provisional(studio, lang):
    engine, _ = studio
    app = open_page(signed_in(engine, "chk2", lang=lang), "review-labels")
    assert translate("gold_basis.check.sample_note", lang) not in texts(app)  # checking all work: no such note
    app.radio(key="review_check_mode").set_value(review.CHECK_SAMPLE).run()
    assert not app.exception
    assert translate("gold_basis.check.sample_note", lang) in texts(app)
