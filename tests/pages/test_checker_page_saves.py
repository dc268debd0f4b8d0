"""The checker's workbench pages through AppTest, driven by what the workbench sends: the draft state says
when the checker's draft was kept (not "unsaved": it is kept on the server), the restored-draft notice goes
once work resumes, and the picker's label follows a save."""

from __future__ import annotations

import json
from zoneinfo import ZoneInfo

import pytest
from sqlmodel import select

from db import review
from db.review import drafts
from db.rules.enums import Stage
from db.store.engine import session_scope
from db.store.models import Label, Response, User
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in
from tests.support.factories import make_case, make_label, make_response, make_user
from tests.support.workbench_events import send_go, send_save, send_work, workbench_data

N = 3


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


@pytest.fixture
def studio(app_database):
    """One response of CC-0001 labeled by both groups (c01 disputed); checkers of both groups."""
    with session_scope(app_database) as s:
        people = {
            name: make_user(s, name, role, group)
            for name, role, group in (
                ("ann1", "annotator", 1),
                ("ann2", "annotator", 2),
                ("chk1", "checker", 1),
                ("chk2", "checker", 2),
                ("chk1c", "checker", 1),
                ("chk2c", "checker", 2),
            )
        }
        case = make_case(s, "CC-0001", n=N)
        response = make_response(s, case, "secret-model", "建议多喝水，必要时就医。")
        for i in range(1, N + 1):
            make_label(s, response, f"c{i:02d}", True, people["ann1"])
            make_label(s, response, f"c{i:02d}", i != 1, people["ann2"], note="未提及" if i == 1 else None)
        ids = {"response": response.id, "code": response.code}
    return app_database, ids


def _user(session, name: str) -> User:
    return session.exec(select(User).where(User.username == name)).one()


def _clock(at) -> str:
    return at.astimezone(ZoneInfo("Asia/Shanghai")).strftime("%H:%M")


def _both_groups_checked(engine, ids) -> None:
    with session_scope(engine) as s:
        response = s.get(Response, ids["response"])
        checkers = {1: _user(s, "chk1c"), 2: _user(s, "chk2c")}
        labels = s.exec(select(Label).where(Label.response_id == response.id)).all()
        checked = {(label.criterion_id, label.group_no) for label in labels if label.stage == Stage.check}
        for label in labels:
            if label.stage != Stage.annotation or (label.criterion_id, label.group_no) in checked:
                continue
            make_label(
                s, response, label.criterion_id, label.met, checkers[label.group_no], stage=Stage.check, note=label.note
            )


def _taken_in(engine, ids):
    """chk1 takes the checked response into adjudication; the page holding it open."""
    _both_groups_checked(engine, ids)
    app = open_page(signed_in(engine, "chk1"), "review-adjudication")
    app = button(app, t("review.adjudication.take")).click().run()
    assert not app.exception
    return app


def _assert_kept_not_unsaved(data: dict, at) -> None:
    assert data["draft_state"] == t("workbench.draft_kept", when=_clock(at)) == f"草稿已保存 {_clock(at)}，尚未提交"
    assert "未保存" not in json.dumps(data, ensure_ascii=False)


# Draft state ----------------------------------------------------------------------------------


def test_label_check_says_when_the_draft_was_kept_and_drops_the_notice_once_work_resumes(studio):
    engine, ids = studio
    app = open_page(signed_in(engine, "chk2"), "review-labels")
    assert workbench_data(app)["draft_state"] == ""  # nothing kept yet
    with session_scope(engine) as s:
        chk2 = _user(s, "chk2")
        kept = drafts.keep_check_draft(
            s, chk2, ids["response"], decisions={"c02": False}, notes={"c02": "未写剂量"}, seen={"c02": None}
        )
    app = open_page(signed_in(engine, "chk2"), "review-labels")
    assert not app.exception
    data = workbench_data(app)
    _assert_kept_not_unsaved(data, kept)
    assert data["message"]["kind"] == "info" and data["message"]["transient"] is True
    assert {item["key"]: item["state"] for item in data["items"]}["c02"] is False
    # The next decision keeps the draft again: the notice has said its piece, the time is the new one.
    app = send_work(app, {"c01": False, "c02": False, "c03": True}, {"c02": "未写剂量"})
    assert not app.exception
    data = workbench_data(app)
    assert data["message"] is None
    with session_scope(engine, read_only=True) as s:
        again = drafts.check_draft(s, _user(s, "chk2"), review.check_view(s, _user(s, "chk2"), ids["response"]))
    assert again is not None and again.at is not None and again.at >= kept
    _assert_kept_not_unsaved(data, again.at)


def test_adjudication_says_when_the_draft_was_kept_and_drops_the_notice_once_work_resumes(studio):
    engine, ids = studio
    app = _taken_in(engine, ids)
    assert workbench_data(app)["draft_state"] == ""
    with session_scope(engine) as s:
        kept = drafts.keep_adjudication_draft(
            s, _user(s, "chk1"), ids["response"], decisions={"c01": True}, notes={"c01": "回答已提及"}, seen={}
        )
    app = open_page(signed_in(engine, "chk1"), "review-adjudication")
    assert not app.exception
    data = workbench_data(app)
    _assert_kept_not_unsaved(data, kept)
    assert data["message"]["transient"] is True
    app = send_work(app, {"c01": True}, {"c01": "回答已提及"}, shared_note="")
    data = workbench_data(app)
    assert data["message"] is None and data["draft_state"].startswith("草稿已保存 ")


# Pickers after a save --------------------------------------------------------------------------


def test_label_check_picker_says_checked_after_a_save(studio):
    engine, ids = studio
    app = open_page(signed_in(engine, "chk2"), "review-labels")
    [picker] = [s for s in app.selectbox if s.key == "review_check_pick"]
    before = t("review.check.queue_item", code=ids["code"], case="CC-0001", checked=0, n=N)
    assert list(picker.options) == [before]
    app = send_save(app, {"c01": False, "c02": True, "c03": True})
    assert not app.exception
    [picker] = [s for s in app.selectbox if s.key == "review_check_pick"]
    after = t("review.check.queue_item", code=ids["code"], case="CC-0001", checked=N, n=N)
    assert list(picker.options) == [after] and picker.index == 0
    saved = t("review.check.saved", n=N, code=ids["code"])
    assert workbench_data(app)["message"]["text"] == f"{saved} {t('review.check.queue_end')}"


def test_adjudication_picker_counts_the_open_decisions_after_a_save(studio):
    engine, ids = studio
    with session_scope(engine) as s:  # a second disputed criterion, so the response stays in the queue
        [label] = s.exec(
            select(Label).where(Label.response_id == ids["response"], Label.criterion_id == "c02", Label.group_no == 2)
        ).all()
        label.met = False
    app = _taken_in(engine, ids)
    [picker] = [s for s in app.selectbox if s.key == "review_adj_pick"]
    assert "待仲裁 2 条" in picker.options[0], picker.options
    app = send_save(app, {"c01": True, "c02": None}, {"c01": "回答已提及"}, shared_note="")
    assert not app.exception
    [picker] = [s for s in app.selectbox if s.key == "review_adj_pick"]
    assert "待仲裁 1 条" in picker.options[0] and picker.index == 0, picker.options


# People by name ---------------------------------------------------------------------------------


def test_label_check_and_adjudication_name_people_as_the_pickers_do(studio):
    """ "标注员 王晓" beside a label, as the annotator picker names them (not the username); the same for who checked
    and who decided."""
    engine, ids = studio
    with session_scope(engine) as s:  # c02 disputed too: the response stays open once c01 is decided
        [label] = s.exec(
            select(Label).where(Label.response_id == ids["response"], Label.criterion_id == "c02", Label.group_no == 2)
        ).all()
        label.met = False
        for username, name in (("ann2", "王晓"), ("chk2", "周主任"), ("chk1", "李主任")):
            _user(s, username).display_name = name
    app = open_page(signed_in(engine, "chk2"), "review-labels")
    app = send_save(app, {"c01": False, "c02": False, "c03": True})
    lines = [line["label"] for item in workbench_data(app)["items"] for line in item["lines"]]
    assert t("workbench.check.annotator", name="王晓") in lines
    assert t("workbench.check.checked", name="周主任") in lines
    app = _taken_in(engine, ids)
    app = send_save(app, {"c01": True}, {"c01": "回答已提及"}, shared_note="")
    assert not app.exception
    [cell] = [item for item in workbench_data(app)["items"] if item["key"] == "c01"]
    decided = {line["label"]: line["value"] for line in cell["lines"]}[t("workbench.adj.decided")]
    assert decided == f"{t('review.met')} · 李主任"


# Save and next, J/K ----------------------------------------------------------------------------


@pytest.fixture
def queue_of_three(app_database):
    """Three responses of one group-1 annotator, each with N annotation labels, and a checker of group 1."""
    with session_scope(app_database) as s:
        annotator = make_user(s, "ann1", "annotator", 1)
        make_user(s, "chk1", "checker", 1)
        codes = []
        for number in (1, 2, 3):
            case = make_case(s, f"CC-000{number}", n=N)
            response = make_response(s, case, "secret-model", f"回答 {number}")
            for i in range(1, N + 1):
                make_label(s, response, f"c{i:02d}", i != 2, annotator)
            codes.append(response.code)
    return app_database, codes


def _on_screen(app) -> str:
    return workbench_data(app)["text_title"]


def _checks(engine) -> dict[str, int]:
    with session_scope(engine, read_only=True) as s:
        rows = s.exec(select(Response.code, Label.id).join(Label).where(Label.stage == Stage.check)).all()
    counted: dict[str, int] = {}
    for code, _ in rows:
        counted[code] = counted.get(code, 0) + 1
    return counted


def test_ctrl_enter_confirms_every_criterion_then_opens_the_next_response(queue_of_three):
    engine, codes = queue_of_three
    app = open_page(signed_in(engine, "chk1"), "review-labels")
    assert _on_screen(app) == t("workbench.response", code=codes[0])
    # the workbench sends the prefilled annotation: every criterion confirmed, none changed
    app = send_save(app, {"c01": True, "c02": False, "c03": True})
    assert not app.exception
    assert _checks(engine) == {codes[0]: N}  # a confirmation is a check label
    assert workbench_data(app)["message"]["text"] == t("review.check.saved", n=N, code=codes[0])
    assert _on_screen(app) == t("workbench.response", code=codes[1])
    # back with K, a save with nothing changed since the last one: "no changes", nothing written, on to the next
    app = send_go(app, -1)
    assert _on_screen(app) == t("workbench.response", code=codes[0])
    app = send_save(app, {"c01": True, "c02": False, "c03": True})
    assert workbench_data(app)["message"]["kind"] == "info"
    assert workbench_data(app)["message"]["text"] == t("review.check.unchanged", code=codes[0])
    assert _checks(engine) == {codes[0]: N}
    assert _on_screen(app) == t("workbench.response", code=codes[1])
    # J on to the third; J again at the end says so and stays
    app = send_go(app, 1)
    assert _on_screen(app) == t("workbench.response", code=codes[2])
    app = send_go(app, 1)
    assert _on_screen(app) == t("workbench.response", code=codes[2])
    assert workbench_data(app)["message"]["text"] == t("review.check.queue_end")
    # the last one saved: said, and the page stays on it
    app = send_save(app, {"c01": True, "c02": True, "c03": True}, {"c02": "回答已写明"})
    assert not app.exception
    assert _checks(engine) == {codes[0]: N, codes[2]: N}
    saved = t("review.check.saved", n=N, code=codes[2])
    assert workbench_data(app)["message"]["text"] == f"{saved} {t('review.check.queue_end')}"
    assert _on_screen(app) == t("workbench.response", code=codes[2])


def test_the_check_page_key_help_lists_every_key_the_workbench_takes():
    """Every key the workbench answers to on the check page is in its legend, in both languages."""
    keys = ("1/Y", "0/N", "↑↓", "J/K", "PgDn", "PgUp", "Shift+", "E ", "C ", "Ctrl+Enter")
    for lang in ("zh", "en"):
        legend = translate("workbench.legend_check", lang)
        missing = [key for key in keys if key not in legend]
        assert not missing, (lang, missing)
    assert "空格" in translate("workbench.legend_check", "zh") and "Space" in translate("workbench.legend_check", "en")
