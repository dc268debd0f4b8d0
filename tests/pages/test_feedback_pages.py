"""The feedback pages through AppTest: the admin opens a finished round (an unfinished one is refused),
the annotator then reads where gold differed from their label, blinded; other roles are turned away."""

from __future__ import annotations

from sqlmodel import select

from db.store.engine import session_scope
from db.store.models import AuditLog, FeedbackRound
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.feedback_world import RATIONALE, world


def zh(key, **values):
    return translate(key, "zh", **values)


def en(key, **values):
    return translate(key, "en", **values)


def test_admin_opens_a_finished_round_and_the_annotator_reads_the_feedback(app_database):
    world(app_database)

    before = open_page(signed_in(app_database, "ann1"), "annotate-feedback")
    assert not before.exception
    assert zh("annotate.feedback.not_open") in texts(before)

    admin = open_page(signed_in(app_database, "admin"), "admin-feedback")
    assert not admin.exception
    assert admin.selectbox(key="admin_feedback_round").value == 2  # the newest round is chosen first
    button(admin, zh("admin.feedback.open")).click().run()
    refused = zh("admin.feedback.unfinished", number=2, done="1", total="2", share="50.0%")
    assert refused in [e.value for e in admin.error]
    with session_scope(app_database, read_only=True) as s:
        assert s.exec(select(FeedbackRound)).all() == []

    admin.selectbox(key="admin_feedback_round").set_value(1).run()
    assert zh("admin.feedback.ready_hint") in texts(admin)
    button(admin, zh("admin.feedback.open")).click().run()
    assert not admin.exception
    assert zh("admin.feedback.opened", number=1) in [s.value for s in admin.success]
    table = admin.dataframe[0].value
    assert list(table[zh("admin.feedback.col.state")]) == [
        zh("admin.feedback.state.open"),
        zh("admin.feedback.state.closed"),
    ]
    assert list(table[zh("admin.feedback.col.share")]) == ["100.0%", "50.0%"]
    with session_scope(app_database, read_only=True) as s:
        (switch,) = s.exec(select(FeedbackRound)).all()
        assert switch.is_open and switch.changed_by == "admin"
        assert s.exec(select(AuditLog).where(AuditLog.entity == "feedback")).one().action == "open"

    page = open_page(signed_in(app_database, "ann1", lang="en"), "annotate-feedback")
    assert not page.exception
    shown = texts(page)
    assert en("annotate.feedback.response", case="CC\\-0001", code=page_code(app_database)) in shown
    assert "CC-0001 的第 1 条评分标准" in shown and "CC-0001 的第 2 条评分标准" in shown
    assert "CC-0001 的第 3 条评分标准" not in shown  # ann1 agreed with gold on c03
    assert RATIONALE in shown
    assert en("annotate.feedback.no_rationale") in shown  # c02: gold from the groups' agreement
    metrics = {m.label: m.value for m in page.metric}
    assert metrics[en("annotate.feedback.agreement")] == "33.3%"  # 1 of 3 labels agree with gold
    assert metrics[en("annotate.feedback.differing")] == "2"
    assert "model-secret" not in shown and "model-secret" not in str(page._tree)


def page_code(engine) -> str:
    from db.store.models import Response

    with session_scope(engine, read_only=True) as s:
        code = s.exec(select(Response.code).where(Response.model == "model-secret-a")).one()
    return code.replace("-", "\\-")


def test_other_roles_are_turned_away(app_database):
    world(app_database)
    for username, path in (("chk1", "annotate-feedback"), ("ann1", "admin-feedback"), ("chk1", "admin-feedback")):
        app = open_page(signed_in(app_database, username), path)
        assert not app.exception
        # Not in their navigation: the app shows their own start page, never the feedback page.
        assert zh("annotate.feedback.title") not in [e.value for e in app.title]
        assert zh("admin.feedback.title") not in [e.value for e in app.title]
        assert "CC-0001 的第 1 条评分标准" not in texts(app)
        assert app.dataframe == [] or all("model-secret" not in str(d.value) for d in app.dataframe)


def test_many_responses_are_shown_a_page_at_a_time(app_database):
    """25 final responses on which gold differs from ann1 on c01: 20 on the first page, 5 on the second; one more
    response, unchecked, is provisional: not compared, and counted in a note."""
    from db.rules.enums import Stage
    from db.store.models import User
    from db.work import feedback
    from db.work.assignments import assign_labeling
    from tests.support.factories import make_case, make_label, make_response, make_user

    with session_scope(app_database) as s:
        admin = make_user(s, "admin", "admin")
        ann1, ann2 = make_user(s, "ann1", "annotator", 1), make_user(s, "ann2", "annotator", 2)
        chk = make_user(s, "chk2", "checker", 2)
        chk1 = make_user(s, "chk1", "checker", 1)
        case = make_case(s, "CC-0009", n=2)
        responses = [make_response(s, case, f"model-secret-{i:02d}", f"回答{i}") for i in range(26)]
        assign_labeling(s, actor=admin, annotators=["ann1", "ann2"], response_ids=[r.id for r in responses])
        for response in responses[:25]:
            for cid in ("c01", "c02"):
                make_label(s, response, cid, True, ann1)
                make_label(s, response, cid, cid != "c01", ann2)
                make_label(s, response, cid, True, chk1, stage=Stage.check, group_no=1)  # both checks confirm
                make_label(s, response, cid, cid != "c01", chk, stage=Stage.check, group_no=2)
            make_label(s, response, "c01", False, chk, stage=Stage.adjudication, note="依据指南")
        for cid in ("c01", "c02"):  # the last response: both groups agree, nobody checked: provisional
            make_label(s, responses[25], cid, False, ann1)
            make_label(s, responses[25], cid, False, ann2)
    with session_scope(app_database) as s:
        admin = s.get(User, admin.id)
        (state,) = feedback.round_states(s, actor=admin)
        feedback.set_feedback_open(s, actor=admin, round_at=state.round_at, is_open=True)

    app = open_page(signed_in(app_database, "ann1"), "annotate-feedback")
    assert not app.exception
    assert len(app.subheader) == 20
    shown = {m.label: m.value for m in app.metric}
    assert shown[zh("annotate.feedback.agreement")] == "50.0%"  # c02 agrees
    assert (shown[zh("annotate.feedback.compared")], shown[zh("annotate.feedback.awaiting")]) == ("50", "2")
    assert zh("annotate.feedback.not_final", provisional="1", open="0") in [i.value for i in app.info]
    app.selectbox(key="annotate_feedback_page").set_value(1).run()
    assert len(app.subheader) == 5
    assert "model-secret" not in str(app._tree)
