"""The three workbench pages through the controller they share (ui/workbench_controller.py), driven by what
the workbench sends: the annotator's draft kept and their save-and-next; refusals: unjudged criteria, a save
with nothing to save, a decision without its rationale or a correction without its note (each named, and the
workbench sent to it), and a label someone saved in between (said, and the saved labels read again)."""

from __future__ import annotations

import pytest
from sqlmodel import select

from db import counts, review
from db.rules.enums import Stage
from db.store.engine import session_scope
from db.store.models import Assignment, Label, Response, User
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in
from tests.support.factories import make_case, make_label, make_response, make_user
from tests.support.workbench_events import send_save, send_work, workbench_data

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


def _taken_in(engine, ids):
    """Both groups' labels checked; chk1 takes the response into adjudication, the page holding it open."""
    with session_scope(engine) as s:
        response = s.get(Response, ids["response"])
        checkers = {1: _user(s, "chk1c"), 2: _user(s, "chk2c")}
        for label in s.exec(select(Label).where(Label.response_id == response.id)).all():
            make_label(
                s, response, label.criterion_id, label.met, checkers[label.group_no], stage=Stage.check, note=label.note
            )
    app = open_page(signed_in(engine, "chk1"), "review-adjudication")
    app = button(app, t("review.adjudication.take")).click().run()
    assert not app.exception
    return app


def _message(app) -> dict:
    message = workbench_data(app)["message"]
    assert message is not None
    return message


def test_an_adjudication_with_nothing_decided_saves_nothing(studio):
    engine, ids = studio
    app = send_save(_taken_in(engine, ids), {"c01": None}, shared_note="")
    assert not app.exception
    message = _message(app)
    assert (message["kind"], message["text"]) == ("error", t("review.adjudication.nothing"))
    with session_scope(engine, read_only=True) as s:
        assert not s.exec(select(Label).where(Label.stage == Stage.adjudication)).all()


def test_an_adjudication_without_its_rationale_names_the_cell_and_goes_there(studio):
    engine, ids = studio
    app = _taken_in(engine, ids)
    [cell] = [item for item in workbench_data(app)["items"] if item["key"] == "c01"]
    app = send_save(app, {"c01": True}, {"c01": "  "}, shared_note="")
    assert not app.exception
    message = _message(app)
    text = t("workbench.adj.rationale_missing", position=cell["title"], criterion="c01", text=cell["text"], n=1)
    assert (message["kind"], message["text"], message["focus"]) == ("error", text, "c01")
    with session_scope(engine, read_only=True) as s:
        assert not s.exec(select(Label).where(Label.stage == Stage.adjudication)).all()


def test_a_correction_without_its_note_names_the_criterion_and_goes_there(studio):
    engine, ids = studio
    app = open_page(signed_in(engine, "chk2"), "review-labels")
    [item] = [item for item in workbench_data(app)["items"] if item["key"] == "c02"]
    app = send_save(app, {"c01": False, "c02": False, "c03": True})  # c02 corrected (the annotation says met)
    assert not app.exception
    message = _message(app)
    text = t("workbench.check.note_needed", position=item["title"], criterion="c02", text=item["text"])
    assert (message["kind"], message["text"], message["focus"]) == ("error", text, "c02")
    with session_scope(engine, read_only=True) as s:
        assert not s.exec(select(Label).where(Label.stage == Stage.check)).all()


def test_a_check_saved_in_between_is_said_and_the_saved_labels_are_read_again(studio):
    engine, ids = studio
    app = open_page(signed_in(engine, "chk2"), "review-labels")
    token = workbench_data(app)["token"]
    with session_scope(engine) as s:  # another checker of the group confirms c02 meanwhile
        review.save_checks(
            s, _user(s, "chk2c"), response_id=ids["response"], decisions=[review.CheckInput("c02", True, "", None)]
        )
    app = send_save(app, {"c01": False, "c02": True, "c03": True})
    assert not app.exception
    message = _message(app)
    expected = t("review.check.stale_member", criterion="c02", value=t("review.met"))
    assert (message["kind"], message["text"]) == ("error", expected)
    data = workbench_data(app)
    assert data["token"] != token  # read again: the next save starts from the saved labels
    [item] = [item for item in data["items"] if item["key"] == "c02"]
    assert [line["value"] for line in item["lines"]] == [t("review.met"), t("review.met")]


# The annotator's workbench ----------------------------------------------------------------------

LABELING_N = 30


@pytest.fixture
def labeling(app_database):
    """ann2 (group 2) labels two responses of CC-0001."""
    with session_scope(app_database) as s:
        ann2 = make_user(s, "ann2", "annotator", 2)
        case = make_case(s, "CC-0001", n=LABELING_N)
        responses = [make_response(s, case, model, f"{model} 的回答") for model in ("model-alpha", "model-beta")]
        for response in responses:
            s.add(Assignment(kind="label", case_pk=case.id, response_id=response.id, user_id=ann2.id, group_no=2))
        counts.refresh_assignments(s, [response.id for response in responses])
    return app_database


def _own_labels(engine) -> list[tuple[int, str, bool]]:
    with session_scope(engine, read_only=True) as s:
        return sorted((label.response_id, label.criterion_id, label.met) for label in s.exec(select(Label)).all())


def test_each_decision_is_kept_as_a_draft_and_the_page_says_when(labeling):
    app = open_page(signed_in(labeling, "ann2"), "annotate-labeling")
    assert workbench_data(app)["draft_state"] == ""
    app = send_work(app, {"c01": True, "c02": False})
    assert not app.exception
    data = workbench_data(app)
    assert data["draft_state"].startswith(t("workbench.draft_kept", when="")[:4]) and data["message"] is None
    # Opened again (another tab, a refresh): the draft is what shows, said once.
    again = workbench_data(open_page(signed_in(labeling, "ann2"), "annotate-labeling"))
    states = {item["key"]: item["state"] for item in again["items"]}
    assert (states["c01"], states["c02"], states["c03"]) == (True, False, None)
    assert again["message"]["kind"] == "info" and again["message"]["transient"] is True
    assert _own_labels(labeling) == []


def test_a_save_with_unjudged_criteria_is_refused_and_stays(labeling):
    app = open_page(signed_in(labeling, "ann2"), "annotate-labeling")
    first = app.session_state["annotate_label_current"]
    app = send_save(app, {"c01": True})
    assert not app.exception
    message = _message(app)
    assert (message["kind"], message["text"]) == ("error", t("workbench.not_judged_yet", n=LABELING_N - 1))
    assert app.session_state["annotate_label_current"] == first and _own_labels(labeling) == []


def test_save_and_next_saves_says_so_and_opens_the_next_response(labeling):
    app = open_page(signed_in(labeling, "ann2"), "annotate-labeling")
    first = app.session_state["annotate_label_current"]
    code = workbench_data(app)["text_title"]
    decisions = {f"c{i:02d}": i % 2 == 0 for i in range(1, LABELING_N + 1)}
    app = send_save(app, decisions)
    assert not app.exception
    assert app.session_state["annotate_label_current"] != first
    data = workbench_data(app)
    assert data["text_title"] != code and {item["state"] for item in data["items"]} == {None}
    with session_scope(labeling, read_only=True) as s:
        saved_code = s.get(Response, first).code
    expected = t("workbench.saved_next", code=saved_code, created=LABELING_N, updated=0)
    assert (data["message"]["kind"], data["message"]["text"]) == ("success", expected)
    assert _own_labels(labeling) == sorted((first, cid, met) for cid, met in decisions.items())
