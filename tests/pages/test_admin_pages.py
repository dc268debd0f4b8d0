"""The admin pages through AppTest on a real database: rendering, import, users, assignments, progress."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from db.rules.enums import AssignmentKind
from db.store.engine import session_scope
from db.store.models import Assignment, AuditLog, Case, JudgeDecision, User
from db.work.status import counts
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_response, make_user

ADMIN_PAGES = {
    "admin-progress": "admin.progress.title",
    "admin-import": "admin.import.title",
    "admin-users": "admin.users.title",
    "admin-assignments": "admin.assign.title",
    "admin-exports": "admin.export.title",
}


@pytest.fixture
def studio(app_database):
    """An admin, two annotators per group, a checker, and two cases with approved rubrics and responses."""
    with session_scope(app_database) as session:
        make_user(session, "boss", "admin")
        for group in (1, 2):
            for i in (1, 2):
                make_user(session, f"g{group}a{i}", "annotator", group)
        make_user(session, "chk1", "checker", 1)
        for n in (1, 2):
            case = make_case(session, f"CC-{n:04d}", n=3)
            make_response(session, case, model="model-a", text="回答一")
            make_response(session, case, model="model-b", text="回答二")
    return app_database


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_every_admin_page_renders(studio, lang):
    app = signed_in(studio, "boss", lang=lang)
    for url, title_key in ADMIN_PAGES.items():
        app = open_page(app, url)
        assert not app.exception, (url, [e.value for e in app.exception])
        assert app.title[0].value == translate(title_key, lang)
        assert not app.error


def _import(app, kind: str, name: str, content: bytes):
    app.selectbox(key="import_kind").set_value(kind)
    app.file_uploader[0].set_value((name, content, "application/jsonl"))
    return button(app, t("admin.import.submit")).click().run()


def _case_line(case_id: str, **changes) -> str:
    record = {
        "case_id": case_id,
        "difficulty": "low",
        "task": "用药咨询",
        "task_labels": ["medication"],
        "subject": "心内科",
        "subject_labels": ["心内科"],
        "user_role": "患者",
        "clinical_context": "胸闷三天。",
        "user_request": "需要去医院吗？",
        "rubrics": [],
    }
    record.update(changes)
    return json.dumps(record, ensure_ascii=False)


def test_import_of_a_bad_file_names_file_line_and_field_and_changes_nothing(studio):
    app = open_page(signed_in(studio, "boss"), "admin-import")
    with session_scope(studio, read_only=True) as session:
        before = counts(session)
        audit_before = len(session.exec(select(AuditLog)).all())
    bad = "\n".join([_case_line("CC-0101"), _case_line("CC-0102", difficulty="extreme"), _case_line("CC-0103")])
    app = _import(app, "cases", "new_cases.jsonl", bad.encode("utf-8"))
    assert not app.exception
    errors = [e.value for e in app.error]
    assert errors[0] == t("admin.import.failed", file="new\\_cases\\.jsonl")
    detail = " ".join(errors[1:]).replace("\\", "")
    # In the reader's language: file, line and field named, the English of the command line nowhere.
    assert "new_cases.jsonl 第 2 行" in detail and "`difficulty`" in detail and "line 2" not in detail
    with session_scope(studio, read_only=True) as session:
        assert counts(session) == before
        assert len(session.exec(select(AuditLog)).all()) == audit_before
        assert session.exec(select(Case).where(Case.case_id == "CC-0101")).first() is None


def test_import_of_a_good_file_lands_and_shows_the_importer_lines(studio):
    app = open_page(signed_in(studio, "boss"), "admin-import")
    good = "\n".join([_case_line("CC-0201"), _case_line("CC-0202")]) + "\n"
    app = _import(app, "cases", "more.jsonl", good.encode("utf-8"))
    assert not app.error
    assert [s.value for s in app.success] == [t("admin.import.done", file="more\\.jsonl")]
    read = t(
        "import.summary.read",
        file="more.jsonl",
        records="2",
        what=t("import.summary.noun.cases"),
        inserted="2",
        replaced="0",
        unchanged="0",
    )
    assert read in [text.value for text in app.text]
    with session_scope(studio, read_only=True) as session:
        assert {c.case_id for c in session.exec(select(Case)).all()} >= {"CC-0201", "CC-0202"}
        entries = session.exec(select(AuditLog).where(AuditLog.entity_key == "more.jsonl")).all()
        assert entries and entries[0].actor == "boss"


def test_users_page_adds_and_deactivates_an_account(studio):
    app = open_page(signed_in(studio, "boss"), "admin-users")
    app.text_input(key="add_username").input("newdoc")
    app.text_input(key="add_display_name").input("王医生")
    app.text_input(key="add_password").input("a-long-password-1")
    app.selectbox(key="add_role").set_value("checker")
    app.selectbox(key="add_group").set_value(2)
    app = button(app, t("admin.users.add.submit")).click().run()
    assert not app.exception and not app.error
    assert t("admin.users.added", name="newdoc") in texts(app)
    with session_scope(studio, read_only=True) as session:
        user = session.exec(select(User).where(User.username == "newdoc")).one()
        assert (user.role, user.group_no, user.display_name, user.is_active) == ("checker", 2, "王医生", True)

    app.selectbox(key="active_name").set_value("newdoc")
    app = button(app, t("admin.users.deactivate")).click().run()
    assert t("admin.users.deactivated", name="newdoc") in texts(app)
    with session_scope(studio, read_only=True) as session:
        assert session.exec(select(User).where(User.username == "newdoc")).one().is_active is False
        actions = [e.action for e in session.exec(select(AuditLog).where(AuditLog.entity_key == "newdoc")).all()]
        assert actions == ["create", "deactivate"]


def test_users_page_shows_the_reason_of_a_refused_change(studio):
    app = open_page(signed_in(studio, "boss"), "admin-users")
    app.text_input(key="add_username").input("g1a1")  # exists already
    app.text_input(key="add_password").input("a-long-password-1")
    app = button(app, t("admin.users.add.submit")).click().run()
    assert app.error and t("admin.users.error.exists") in app.error[0].value
    app.selectbox(key="active_name").set_value("boss")
    app = button(app, t("admin.users.deactivate")).click().run()
    assert [e.value for e in app.error] == [t("admin.users.not_self")]
    with session_scope(studio, read_only=True) as session:
        assert session.exec(select(User).where(User.username == "boss")).one().is_active


def _assign_labeling(app):
    """The labeling tab's preview, then its confirmation."""
    app = button(app, t("admin.assign.label.submit")).click().run()
    return app.button(key="assign_confirm_label").click().run()


def _label_assignments(engine) -> list[Assignment]:
    with session_scope(engine, read_only=True) as session:
        return list(session.exec(select(Assignment).where(Assignment.kind == AssignmentKind.label)).all())


def test_assignments_page_previews_then_assigns_labeling_once_per_group(studio):
    app = open_page(signed_in(studio, "boss"), "admin-assignments")
    app = button(app, t("admin.assign.label.submit")).click().run()
    # The preview says what it will create, for whom, and writes nothing until confirmed.
    assert not app.exception and not app.error
    assert t("daily.assign.preview.title", created="8", existing="0") in [m.value for m in app.markdown]
    [per_user] = [frame.value for frame in app.dataframe if t("admin.assign.col.new") in frame.value.columns]
    assert sorted(per_user[t("admin.assign.col.user")]) == ["g1a1", "g1a2", "g2a1", "g2a2"]
    assert sum(per_user[t("admin.assign.col.new")]) == 8
    assert _label_assignments(studio) == []
    # Cancel keeps it so; confirm creates what the preview said.
    app = app.button(key="assign_cancel_label").click().run()
    assert _label_assignments(studio) == [] and not [b for b in app.button if b.key == "assign_confirm_label"]
    app = _assign_labeling(app)
    assert not app.exception and not app.error
    assert t("admin.assign.result", created=8, existing=0) in texts(app)
    assert [toast.value for toast in app.toast] == [t("daily.assign.done")]
    rows = _label_assignments(studio)
    assert len(rows) == 8 and len({(a.response_id, a.group_no) for a in rows}) == 8
    # The result banner is read once: the next click (any tab) no longer shows it.
    app = app.selectbox(key="reassign_from").set_value("g1a1").run()
    assert t("admin.assign.result", created=8, existing=0) not in texts(app)
    app = button(app, t("admin.assign.label.submit")).click().run()
    assert t("daily.assign.preview.nothing", existing="8") in texts(app)
    assert not [b for b in app.button if b.key == "assign_confirm_label"]


def test_assignments_page_rubric_authoring_by_specialty(studio):
    with session_scope(studio) as session:
        make_case(session, "NEW-1", n=0, subject="神经内科", subject_labels=["神经内科"])
    app = open_page(signed_in(studio, "boss"), "admin-assignments")
    app.selectbox(key="rubric_specialty").set_value("神经内科")
    app.multiselect(key="rubric_people").set_value(["g2a1"])
    app = button(app, t("admin.assign.rubric.submit")).click().run()
    assert t("daily.assign.preview.title", created="1", existing="0") in [m.value for m in app.markdown]
    app = app.button(key="assign_confirm_rubric").click().run()
    assert t("admin.assign.result", created=1, existing=0) in texts(app)
    with session_scope(studio, read_only=True) as session:
        (row,) = session.exec(select(Assignment).where(Assignment.kind == AssignmentKind.rubric)).all()
        assert session.get(User, row.user_id).username == "g2a1"


def test_progress_page_shows_people_groups_and_disagreements(studio):
    app = open_page(signed_in(studio, "boss"), "admin-assignments")
    _assign_labeling(app)
    app = open_page(app, "admin-progress")
    metrics = {m.label: m.value for m in app.metric}
    assert metrics[t("admin.progress.cases")] == "2"
    assert metrics[t("admin.progress.responses")] == "4"
    assert metrics[t("admin.progress.unresolved")] == "0"
    people = app.dataframe[1].value
    assert set(people[t("admin.progress.col.user")]) == {"g1a1", "g1a2", "g2a1", "g2a2"}
    assert set(people[t("admin.progress.col.label")]) == {"0 / 2"}


@pytest.mark.usefixtures("provisional_basis")  # the labels here are unchecked: the old reading
def test_exports_page_builds_a_gold_download(studio):
    import io
    import zipfile

    from db.store.models import Response
    from tests.support.factories import make_label

    with session_scope(studio) as session:
        response = session.exec(select(Response).order_by(Response.id)).first()
        g1 = session.exec(select(User).where(User.username == "g1a1")).one()
        g2 = session.exec(select(User).where(User.username == "g2a1")).one()
        make_label(session, response, "c01", True, g1)
        make_label(session, response, "c01", True, g2)
    app = open_page(signed_in(studio, "boss"), "admin-exports")
    build = [b for b in app.button if b.key == "build_gold"][0]
    app = build.click().run()
    assert not app.exception and not app.error
    filename, data = app.session_state["export_files"]["gold"]
    assert filename.endswith(".zip")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        gold_name = [n for n in names if n.endswith("gold.jsonl")][0]
        rows = [json.loads(line) for line in archive.read(gold_name).decode("utf-8").splitlines() if line]
    assert len(rows) == 1 and rows[0]["criterion_id"] == "c01" and rows[0]["met"] is True
    assert "download_gold" in [element.key for element in app.get("download_button")]


def test_users_page_resets_a_password_and_changes_role_and_group(studio):
    from db.access import users as accounts
    from db.store.models import LoginSession
    from tests.support.apptest_helpers import sign_in_token

    sign_in_token(studio, "g1a1")  # g1a1 is signed in somewhere: the reset must end that
    app = open_page(signed_in(studio, "boss"), "admin-users")
    app.selectbox(key="password_name").set_value("g1a1")
    app.text_input(key="reset_password").input("brand-new-pass-9")
    app = button(app, t("admin.users.password.submit")).click().run()
    assert t("admin.users.password_reset", name="g1a1") in texts(app)
    assert accounts.authenticate(studio, username="g1a1", password="brand-new-pass-9") is not None
    with session_scope(studio) as session:
        g1a1 = accounts.get_user(session, username="g1a1")
        assert session.exec(select(LoginSession).where(LoginSession.user_id == g1a1.id)).all() == []

    app.selectbox(key="edit_name").set_value("g1a2").run()
    assert app.selectbox(key="edit_role_g1a2").value == "annotator"  # starts from the account's current role
    assert app.selectbox(key="edit_group_g1a2").value == 1
    app.selectbox(key="edit_role_g1a2").set_value("checker")
    app.selectbox(key="edit_group_g1a2").set_value(2)
    app = button(app, t("admin.users.edit.submit")).click().run()
    assert t("admin.users.updated", name="g1a2") in texts(app)
    with session_scope(studio, read_only=True) as session:
        user = accounts.get_user(session, username="g1a2")
        assert (user.role, user.group_no) == ("checker", 2)
        assert {e.action for e in session.exec(select(AuditLog).where(AuditLog.entity_key == "g1a2")).all()} == {
            "update"
        }


def test_assignments_page_reassigns_within_the_group(studio):
    app = open_page(signed_in(studio, "boss"), "admin-assignments")
    app = _assign_labeling(app)
    with session_scope(studio, read_only=True) as session:
        g1a1 = session.exec(select(User).where(User.username == "g1a1")).one()
        row = session.exec(select(Assignment).where(Assignment.user_id == g1a1.id)).first()
    # The task is picked from a list naming case, kind, response, group and holder (never the model).
    app.selectbox(key="reassign_from").set_value("g1a1").run()
    task = app.selectbox(key="reassign_task")
    assert len(task.options) == 2 and not any("model-" in option for option in task.options)
    assert all(option.startswith("CC-000") and t("admin.assign.kind.label") in option for option in task.options)
    app = app.selectbox(key="reassign_task").set_value(row.id).run()
    # Offered: the same group's other members only (not the other group, not the task's holder).
    assert app.selectbox(key="reassign_to").options == [f"g1a2 · {t('group.name', group=1)}"]
    app.selectbox(key="reassign_to").set_value("g1a2")
    app = button(app, t("admin.assign.reassign.submit")).click().run()
    [moved_text] = [s.value.replace("\\", "") for s in app.success]
    assert moved_text.startswith("任务（CC-000") and "已改派给 g1a2" in moved_text and "model-" not in moved_text
    with session_scope(studio, read_only=True) as session:
        moved = session.get(Assignment, row.id)
        assert session.get(User, moved.user_id).username == "g1a2"


def test_annotator_sidebar_shows_their_queue_progress(studio):
    app = open_page(signed_in(studio, "boss"), "admin-assignments")
    _assign_labeling(app)
    annotator = signed_in(studio, "g1a1")
    bars = [p.proto.text for p in annotator.get("progress")]
    assert any(text == t("workbench.progress.label", done="0", total="2", share="0.0%") for text in bars), bars


def test_assignments_page_draws_a_calibration_sample_once(studio):
    from db.store.models import CalibrationSample
    from ui.widgets import plain

    app = open_page(signed_in(studio, "boss"), "admin-assignments")
    [model] = [w for w in app.selectbox if w.form_id == "assign_calibration"]
    assert model.options == ["model-a", "model-b"]
    model.set_value("model-b")
    [size] = [w for w in app.number_input if w.form_id == "assign_calibration"]  # no seed: the server draws it
    size.set_value(2)
    app = button(app, t("admin.assign.calibration.submit")).click().run()
    assert not app.exception and not app.error
    with session_scope(studio, read_only=True) as session:
        (seed,) = set(session.exec(select(CalibrationSample.seed)).all())
    assert t("admin.assign.calibration.drawn", model=plain("model-b"), n=2, seed=seed) in texts(app)
    assert t("admin.assign.result", created=4, existing=0) in texts(app)
    with session_scope(studio, read_only=True) as session:
        rows = session.exec(select(CalibrationSample)).all()
        assigned = session.exec(select(Assignment).where(Assignment.kind == AssignmentKind.label)).all()
    assert len(rows) == 2 and {row.model for row in rows} == {"model-b"} and len(assigned) == 4
    [model] = [w for w in app.selectbox if w.form_id == "assign_calibration"]
    assert model.options == ["model-a"]  # a model is sampled once
    [size] = [w for w in app.number_input if w.form_id == "assign_calibration"]
    model.set_value("model-a")
    size.set_value(5)  # more than its two responses: refused with the reason, nothing drawn
    app = button(app, t("admin.assign.calibration.submit")).click().run()
    assert app.error and t("errors.calibration_too_few", model=plain("model-a"), available=2, n=5) in app.error[0].value
    with session_scope(studio, read_only=True) as session:
        assert len(session.exec(select(CalibrationSample)).all()) == 2


@pytest.mark.usefixtures("provisional_basis")  # the labels here are unchecked: the old reading
def test_exports_page_says_what_a_judgements_export_left_out_in_the_readers_language(studio):
    from db.store.models import Response
    from tests.support.factories import make_label

    with session_scope(studio) as session:
        response = session.exec(select(Response).order_by(Response.id)).first()  # CC-0001, model-a
        g1 = session.exec(select(User).where(User.username == "g1a1")).one()
        g2 = session.exec(select(User).where(User.username == "g2a1")).one()
        for criterion in ("c01", "c02", "c03"):
            make_label(session, response, criterion, True, g1)
            make_label(session, response, criterion, True, g2)
    for lang, expected in (
        ("zh", ["本次导出未包含以下内容", "1 个病例", "CC\\-0002", "1 个模型", "model\\-b"]),
        ("en", ["This export left out", "Cases where not every chosen model", "Models without a complete response"]),
    ):
        app = open_page(signed_in(studio, "boss", lang=lang), "admin-exports")
        app = [b for b in app.button if b.key == "build_judgements"][0].click().run()
        assert not app.exception and not app.error
        warning = "\n".join(str(element.value) for element in app.warning)
        for text in expected:
            assert text in warning, (lang, text, warning)
        assert "download_judgements" in [element.key for element in app.get("download_button")]


def test_exports_page_says_when_nothing_was_left_out(studio):
    app = open_page(signed_in(studio, "boss"), "admin-exports")
    app = [b for b in app.button if b.key == "build_judge-items"][0].click().run()
    assert not app.exception and not app.error
    assert not app.warning and translate("admin.export.left_out.none", "zh") in texts(app)


def test_the_count_table_shows_the_judge_decisions_an_import_added(studio):
    app = open_page(signed_in(studio, "boss"), "admin-import")
    lines = [
        {"judge": judge, "case_id": case_id, "model": model, "criterion_id": f"c{i:02d}", "met": i % 2 == 0}
        for judge in ("judge-x", "judge-y")
        for case_id in ("CC-0001", "CC-0002")
        for model in ("model-a", "model-b")
        for i in range(1, 4)
    ]
    content = ("\n".join(json.dumps(line) for line in lines) + "\n").encode("utf-8")
    app = _import(app, "judge", "decisions.jsonl", content)
    assert not app.exception and not app.error
    shown = app.dataframe[-1].value
    rows = dict(zip(shown[t("admin.import.count.what")], shown[t("admin.import.count.rows")], strict=True))
    with session_scope(studio, read_only=True) as session:
        stored = len(session.exec(select(JudgeDecision)).all())
    assert rows[t("admin.import.count.judge")] == stored == len(lines) == 24


def test_users_page_switches_language_without_a_streamlit_warning(studio, monkeypatch):
    """A language switch sets every picker's state; the role and group pickers then must not also carry a
    default (Streamlit logs a warning with a stack for a widget given both)."""
    from streamlit.elements.lib import policies

    logged: list[str] = []
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    monkeypatch.setattr(policies._LOGGER, "warning", lambda message, *args, **_: logged.append(message % args))
    app = open_page(signed_in(studio, "boss"), "admin-users")
    # An admin without a group: neither picker starts on its first choice.
    app = app.selectbox(key="edit_name").set_value("boss").run()
    assert app.selectbox(key="edit_role_boss").value == "admin"
    app = app.radio(key="lang_choice").set_value("en").run()
    assert not app.exception and app.title[0].value == translate("admin.users.title", "en")
    assert app.selectbox(key="edit_role_boss").value == "admin" and app.selectbox(key="edit_group_boss").value is None
    assert logged == []
