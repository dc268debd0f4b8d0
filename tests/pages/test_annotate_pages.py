"""The annotator's pages through AppTest: lint, draft restore, submit rules, labeling saves, blinding, safety."""

from __future__ import annotations

import json
import re
from zoneinfo import ZoneInfo

import pytest
from sqlmodel import select

from annotate import pages as annotate_pages
from db import counts, rubrics
from db.labeling import draft_store as drafts, drafts as label_drafts
from db.rubrics.authoring import CriterionInput, default_criterion_ids
from db.rules.enums import RubricStatus
from db.store.engine import session_scope
from db.store.models import Assignment, Label, RubricVersion, User
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.factories import make_case, make_response, make_rubric, make_user

N = 30
UNESCAPED_MARKUP = re.compile(r"(?<!\\)<(img|script)|(?<!\\)!(?<!\\)\[|(?<!\\)\]\(")
HOSTILE = ["<script>alert(1)</script>", '<img src=x onerror="alert(2)">', "![x](http://example.invalid/a.png)"]


def zh(key, **values):
    return translate(key, "zh", **values)


def clean_texts(n=N):
    return [f"回答明确说明第{i}项临床要点的具体处理内容" for i in range(1, n + 1)]


@pytest.fixture
def studio(app_database):
    """ann1 (group 1) writes the rubric of CC-0002; ann2 (group 2) labels two responses of CC-0001."""
    with session_scope(app_database) as session:
        ann1 = make_user(session, "ann1", "annotator", 1)
        ann2 = make_user(session, "ann2", "annotator", 2)
        make_user(session, "chk1", "checker", 1)
        labeled = make_case(session, "CC-0001")
        authored = make_case(session, "CC-0002", n=0)
        first = make_response(session, labeled, "secret-model-alpha", "第一份回答的正文")
        second = make_response(session, labeled, "secret-model-beta", "第二份回答的正文")
        session.add(Assignment(kind="rubric", case_pk=authored.id, user_id=ann1.id, group_no=1))
        for response in (first, second):
            session.add(
                Assignment(kind="label", case_pk=labeled.id, response_id=response.id, user_id=ann2.id, group_no=2)
            )
        counts.refresh_assignments(session, [first.id, second.id])
    return app_database


def save_version(engine, texts_, username="ann1", case_id="CC-0002"):
    with session_scope(engine) as session:
        user = session.exec(select(User).where(User.username == username)).one()
        case_pk = session.exec(select(RubricVersion.case_pk)).first()
        from db.store.models import Case

        case_pk = session.exec(select(Case.id).where(Case.case_id == case_id)).one()
        latest = rubrics.latest_version(session, case_pk)
        return rubrics.save_rubric_draft(
            session,
            user,
            case_pk,
            [CriterionInput(cid, text, ()) for cid, text in zip(default_criterion_ids(N), texts_)],
            base_version_id=latest.id if latest else None,
            expected_lock=latest.lock_version if latest else None,
        )


def err(code, **values):
    return zh("annotate.lint.line", mark=zh("annotate.lint.error"), message=zh(f"annotate.lint.{code}", **values))


def warn(code, **values):
    return zh("annotate.lint.line", mark=zh("annotate.lint.warning"), message=zh(f"annotate.lint.{code}", **values))


def cell(kind, *codes, **values):
    """The grid's lint cell: the row's mark, then each finding in a word or two (the sentences are listed below)."""
    shown = zh("annotate.lint.short.separator").join(zh(f"annotate.lint.short.{code}", **values) for code in codes)
    return zh(f"annotate.lint.mark.{kind}") + "\u00a0" + shown


def editor_frame(app):
    assert app.dataframe, "the page shows no editor"
    return app.dataframe[0].value


# Rubric authoring ---------------------------------------------------------------------------


def test_new_rubric_shows_thirty_empty_rows_and_submit_is_blocked(studio):
    app = open_page(signed_in(studio, "ann1"), "annotate-rubrics")
    assert not app.exception
    assert app.title[0].value == zh("annotate.authoring.title")
    frame = editor_frame(app)
    assert list(frame["criterion_id"]) == default_criterion_ids(N)
    assert set(frame["lint"]) == {cell("error", "empty")}
    # each empty row is one error, told once (not again as a short count)
    assert err("count", count=0, expected=N) not in [e.value for e in app.error]
    assert zh("annotate.authoring.lint_summary", errors=N, warnings=0) in [e.value for e in app.error]
    assert button(app, zh("annotate.authoring.submit")).disabled
    assert not button(app, zh("annotate.authoring.save")).disabled


def test_lint_warnings_show_beside_each_criterion_and_do_not_block(studio):
    texts_ = clean_texts()
    texts_[2] = "建议患者适当休息"
    texts_[4] = "说明阿司匹林的禁忌证和出血风险"
    draft = save_version(studio, texts_)
    app = open_page(signed_in(studio, "ann1"), "annotate-rubrics")
    frame = editor_frame(app)
    assert frame["lint"][2] == cell("warning", "vague")
    assert frame["lint"][4] == cell("warning", "compound")
    # the whole sentences, with the words they found, in the list below the grid
    assert zh("annotate.authoring.row", row=3) + " — " + warn("vague", words="适当") in texts(app)
    assert zh("annotate.authoring.row", row=5) + " — " + warn("compound", words="和") in texts(app)
    assert frame["lint"][0] == zh("annotate.lint.ok")
    assert zh("annotate.authoring.lint_summary", errors=0, warnings=2) in texts(app)
    submit = button(app, zh("annotate.authoring.submit"))
    assert not submit.disabled
    app = submit.click().run()
    assert not app.exception
    assert zh("annotate.authoring.submitted", version=1) in [s.value for s in app.success]
    assert zh("annotate.authoring.submitted", version=1) in [toast.value for toast in app.toast]  # seen anywhere
    with session_scope(studio, read_only=True) as session:
        assert session.get(RubricVersion, draft.id).status == RubricStatus.submitted
    # a submitted rubric is read-only on the page, and the queue says so
    assert zh("annotate.authoring.is_submitted") in texts(app)
    assert any(zh("annotate.authoring.status.submitted") in option for option in app.selectbox[0].options)
    assert not [b for b in app.button if b.label == zh("annotate.authoring.submit")]


def test_duplicate_blocks_submission_and_the_page_says_where(studio):
    texts_ = clean_texts()
    texts_[9] = texts_[3]
    save_version(studio, texts_)
    app = open_page(signed_in(studio, "ann1"), "annotate-rubrics")
    frame = editor_frame(app)
    assert frame["lint"][9] == cell("error", "duplicate", other=4)
    assert button(app, zh("annotate.authoring.submit")).disabled
    assert zh("annotate.authoring.row", row=10) + " — " + err("duplicate", other=4) in texts(app)


def test_unsaved_draft_is_restored_and_linted(studio):
    save_version(studio, clean_texts())
    with session_scope(studio) as session:
        user = session.exec(select(User).where(User.username == "ann1")).one()
        version = session.exec(select(RubricVersion).where(RubricVersion.status == RubricStatus.draft)).one()
        rows = [
            {"criterion_id": cid, "text": text, "tags": []}
            for cid, text in zip(default_criterion_ids(N), clean_texts())
        ]
        rows[7]["text"] = "短句"
        rows[7]["tags"] = ["follow_up_incompleteness"]
        drafts.save_draft(
            session,
            user,
            f"rubric:{version.case_pk}",
            {"rows": rows, "base_version_id": version.id, "base_lock": version.lock_version},
        )
    app = open_page(signed_in(studio, "ann1"), "annotate-rubrics")
    assert zh("annotate.authoring.draft_restored") in texts(app)
    frame = editor_frame(app)
    assert frame["text"][7] == "短句" and list(frame["tags"][7]) == ["follow_up_incompleteness"]
    assert frame["lint"][7].startswith(cell("warning", "too_short"))
    # saving the draft writes it to the rubric (same draft version, next revision) and drops the draft
    app = button(app, zh("annotate.authoring.save")).click().run()
    assert zh("annotate.authoring.saved", version=1) in [s.value for s in app.success]
    with session_scope(studio, read_only=True) as session:
        version = session.exec(select(RubricVersion).where(RubricVersion.status == RubricStatus.draft)).one()
        assert version.lock_version == 2
        assert rubrics.criteria_of(session, version.id)[7].text == "短句"
        user = session.exec(select(User).where(User.username == "ann1")).one()
        assert drafts.load_draft(session, user, f"rubric:{version.case_pk}") is None


def test_stale_draft_is_refused_with_a_clear_message(studio):
    first = save_version(studio, clean_texts())
    app = open_page(signed_in(studio, "ann1"), "annotate-rubrics")
    changed = clean_texts()
    changed[0] = "另一位同事改写的第一条标准内容"
    save_version(studio, changed)  # someone saves meanwhile
    # and this page has an unsaved edit
    state = app.session_state[f"annotate_rubric_state_{first.case_pk}"]
    state["rows"][1]["text"] = "我在页面上改写的第二条标准内容"
    app = button(app, zh("annotate.authoring.save")).click().run()
    assert zh("annotate.authoring.stale", version=1, lock=2) in [e.value for e in app.error]
    assert button(app, zh("annotate.authoring.load_newest"))
    with session_scope(studio, read_only=True) as session:
        assert rubrics.criteria_of(session, first.id)[1].text == clean_texts()[1]


def test_returned_rubric_shows_comments_and_next_save_makes_version_two(studio):
    draft = save_version(studio, clean_texts())
    with session_scope(studio) as session:
        version = session.get(RubricVersion, draft.id)
        version.status, version.review_comment = RubricStatus.returned, "整体过于笼统，请具体化"
        from db.store.models import Criterion

        criterion = session.exec(
            select(Criterion).where(Criterion.rubric_version_id == draft.id, Criterion.criterion_id == "c03")
        ).one()
        criterion.review_comment = "请写明药物名称"
    app = open_page(signed_in(studio, "ann1"), "annotate-rubrics")
    assert zh("annotate.authoring.returned", version=1) in texts(app)
    assert "整体过于笼统，请具体化" in [t.value for t in app.text]
    frame = editor_frame(app)
    assert frame["review"][2] == "请写明药物名称"
    state = app.session_state[f"annotate_rubric_state_{draft.case_pk}"]
    state["rows"][2]["text"] = "说明应使用阿莫西林每次500毫克"
    app = button(app, zh("annotate.authoring.save")).click().run()
    assert zh("annotate.authoring.saved", version=2) in [s.value for s in app.success]
    with session_scope(studio, read_only=True) as session:
        versions = session.exec(
            select(RubricVersion).where(RubricVersion.case_pk == draft.case_pk).order_by(RubricVersion.version)
        ).all()
        assert [(v.version, v.status) for v in versions] == [(1, "returned"), (2, "draft")]


# Hit labeling -------------------------------------------------------------------------------


def _labels(engine, group_no=2):
    with session_scope(engine, read_only=True) as session:
        return session.exec(select(Label).where(Label.group_no == group_no)).all()


def _workbench(app):
    """The workbench component (the sign-in cookie writer is the page's other component)."""
    [element] = [e for e in app.get("bidi_component") if e.proto.component_name != "clinconsensus_session_cookie"]
    return element


def _workbench_data(app) -> dict:
    [element] = [e for e in app.get("bidi_component") if (e.key or "").startswith("wb_")]
    return json.loads(element.proto.json)


def test_labeling_page_sends_the_workbench_only_what_the_annotator_may_see(studio):
    app = open_page(signed_in(studio, "ann2"), "annotate-labeling")
    assert not app.exception
    data = _workbench_data(app)
    sent = texts(app) + "\n".join(str(s.options) for s in app.selectbox) + json.dumps(data, ensure_ascii=False)
    assert "secret-model" not in sent
    [element] = [e for e in app.get("bidi_component") if (e.key or "").startswith("wb_")]
    assert re.fullmatch(r"wb_[0-9a-f]{12}", element.key)  # random per session, no id in it
    assert re.fullmatch(r"[0-9a-f]{16}", data["token"])
    assert set(data) == {
        "token",
        "texts",
        "request",
        "context",
        "meta",
        "text_title",
        "text",
        "items_title",
        "items",
        "unsaved",
        "draft_state",
        "active_ms",
        "message",
        "note_max",
        "shared_note",
        "readonly",
        "response_keys",
    }
    assert data["readonly"] is False  # final labels only (feedback of the round opened)
    assert data["response_keys"] is False  # J/K move between criteria here (between responses on the check page)
    # every criterion opens unjudged: no decision is made by default
    assert len(data["items"]) == N and {item["state"] for item in data["items"]} == {None}
    assert [item["key"] for item in data["items"]] == [f"c{i:02d}" for i in range(1, N + 1)]
    assert data["request"] == "请问该怎么办？" and not data["unsaved"] and data["draft_state"] == ""
    # progress: one definition, the same words in the sidebar and on the page
    bars = [p.proto.text for p in app.get("progress")]
    assert bars.count(zh("workbench.progress.label", done="0", total="2", share="0.0%")) == 2, bars


def test_a_reopened_response_shows_its_draft_marked_unsaved(studio):
    app = open_page(signed_in(studio, "ann2"), "annotate-labeling")
    first_id = app.session_state["annotate_label_current"]
    with session_scope(studio) as session:
        ann2 = session.exec(select(User).where(User.username == "ann2")).one()
        bench = label_drafts.open_response(session, ann2, first_id)
        label_drafts.keep_draft(
            session,
            ann2,
            first_id,
            rubric_version_id=bench.view.rubric_version_id,
            decisions={"c01": True, "c02": False},
            notes={"c01": "提到了"},
            active_ms=5000,
        )
    app = open_page(signed_in(studio, "ann2"), "annotate-labeling")
    data = _workbench_data(app)
    assert data["unsaved"] and data["active_ms"] == 5000
    states = {item["key"]: item["state"] for item in data["items"]}
    assert states["c01"] is True and states["c02"] is False and sum(v is None for v in states.values()) == N - 2
    assert {item["key"]: item["note"] for item in data["items"] if item["note"]} == {"c01": "提到了"}
    assert data["message"]["kind"] == "info" and data["message"]["text"].startswith(
        zh("workbench.draft_restored", when="")[:6]
    )
    assert _labels(studio) == []


def test_the_draft_state_says_the_draft_is_kept_and_not_submitted(studio):
    """Not "● 草稿未保存": the draft is kept on the server; the page says when, and that it is not submitted yet.
    The restored-draft notice is marked to go once work resumes."""
    app = open_page(signed_in(studio, "ann2"), "annotate-labeling")
    first_id = app.session_state["annotate_label_current"]
    with session_scope(studio) as session:
        ann2 = session.exec(select(User).where(User.username == "ann2")).one()
        bench = label_drafts.open_response(session, ann2, first_id)
        kept_at = label_drafts.keep_draft(
            session, ann2, first_id, rubric_version_id=bench.view.rubric_version_id, decisions={"c01": True}
        )
    app = open_page(signed_in(studio, "ann2"), "annotate-labeling")
    data = _workbench_data(app)
    clock = kept_at.astimezone(ZoneInfo("Asia/Shanghai")).strftime("%H:%M")
    assert data["draft_state"] == zh("workbench.draft_kept", when=clock) == f"草稿已保存 {clock}，尚未提交"
    assert "unsaved" not in data["texts"] and "未保存" not in json.dumps(data, ensure_ascii=False)
    assert data["message"]["transient"] is True
    # the case strip's words come with every workbench, in the reader's language
    assert data["texts"]["case"] == zh("workbench.case") and data["texts"]["case_hide"] == zh("workbench.case_hide")


def _registered_urls(app):
    return {info.get("url_pathname") for info in app._registered_pages.values()}


def test_english_switch_and_navigation_by_role(studio):
    app = open_page(signed_in(studio, "ann2", lang="en"), "annotate-labeling")
    assert translate("workbench.progress.label", "en", done="0", total="2", share="0.0%") in [
        p.proto.text for p in app.get("progress")
    ]
    assert _workbench_data(app)["texts"]["met"] == translate("workbench.met", "en")
    assert {"annotate-labeling", "annotate-rubrics"} <= _registered_urls(app)
    checker_app = signed_in(studio, "chk1")
    assert not {"annotate-labeling", "annotate-rubrics"} & _registered_urls(checker_app)
    with session_scope(studio, read_only=True) as session:
        checker = session.exec(select(User).where(User.username == "chk1")).one()
    assert annotate_pages(checker) == []


# Safety -------------------------------------------------------------------------------------


def _markup_elements(app):
    return [
        e.value
        for kind in ("markdown", "caption", "title", "header", "subheader", "error", "warning", "success", "info")
        for e in getattr(app, kind)
    ]


@pytest.mark.parametrize("page", ["annotate-rubrics", "annotate-labeling"])
def test_hostile_text_is_shown_as_plain_text_only(app_database, page):
    hostile = "\n".join(HOSTILE)
    with session_scope(app_database) as session:
        ann = make_user(session, "ann1", "annotator", 1)
        case = make_case(
            session,
            "CC-0009",
            n=0,
            clinical_context=hostile,
            user_request=HOSTILE[2],
            user_role=HOSTILE[1],
            task=HOSTILE[0],
            subject=HOSTILE[2],
            subject_labels=[HOSTILE[1]],
        )
        rubric = make_rubric(session, case, n=N)
        from db.store.models import Criterion

        for criterion in session.exec(select(Criterion).where(Criterion.rubric_version_id == rubric.id)).all()[:3]:
            criterion.text = HOSTILE[criterion.position - 1]
        response = make_response(session, case, "m", hostile)
        session.add(Assignment(kind="label", case_pk=case.id, response_id=response.id, user_id=ann.id, group_no=1))
        rubric.status = RubricStatus.returned
        rubric.review_comment = hostile
        session.add(Assignment(kind="rubric", case_pk=case.id, user_id=ann.id, group_no=1))
        counts.refresh_cases(session, [case.id])  # a new labeling assignment, and no approved rubric any more
    if page == "annotate-labeling":
        with session_scope(app_database) as session:
            make_rubric(session, case, n=N, version=2)  # approved, the one labeled against
            from db.store.models import Criterion

            for criterion in session.exec(
                select(Criterion).join(RubricVersion).where(RubricVersion.version == 2)
            ).all()[:3]:
                criterion.text = HOSTILE[criterion.position - 1]
    app = open_page(signed_in(app_database, "ann1"), page)
    assert not app.exception
    for value in _markup_elements(app):
        for bad in HOSTILE:
            assert bad not in value, f"{bad!r} reached a markup element: {value!r}"
        assert not UNESCAPED_MARKUP.search(value), f"unescaped markup in {value!r}"
    if page == "annotate-labeling":
        # the workbench gets user text as data and sets it as text (textContent), never as markup
        data = _workbench_data(app)
        assert [item["text"] for item in data["items"][:3]] == HOSTILE
        assert data["text"] == hostile and data["context"] == hostile
        return
    plain_texts = "\n".join(t.value for t in app.text)
    for bad in HOSTILE:
        assert bad in plain_texts
    frame = editor_frame(app)
    assert list(frame["text"][:3]) == HOSTILE  # grid cells are text, never markup
