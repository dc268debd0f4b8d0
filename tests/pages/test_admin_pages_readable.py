"""The admin pages read as the issue asked: the import page per kind and translated, the user form kept
through a refusal, names beside usernames, a readable audit log, progress counted on one basis, exact
JSON error columns on the page and the command line."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from db.importers import ImportFailed, import_stream
from db.rules.limits import MAX_UPLOAD_MB
from db.store.engine import session_scope
from db.store.models import AuditLog, Case, User
from i18n import translate
from tests.support.apptest_helpers import button, open_page, signed_in, texts
from tests.support.factories import make_case, make_response, make_user


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


@pytest.fixture
def studio(app_database):
    with session_scope(app_database) as session:
        make_user(session, "boss", "admin")
        for group in (1, 2):
            make_user(session, f"g{group}a1", "annotator", group)
        session.exec(select(User).where(User.username == "g1a1")).one().display_name = "王晓"
        case = make_case(session, "CC-0001", n=3)
        make_response(session, case, model="model-a", text="回答一")
    return app_database


def _case_line(case_id: str) -> str:
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
    return json.dumps(record, ensure_ascii=False)


def _upload(app, name: str, content: bytes, mime: str = "application/jsonl"):
    [uploader] = app.file_uploader
    uploader.set_value((name, content, mime))
    return app.run()


def test_a_json_error_at_the_end_of_a_line_names_its_real_column(studio):
    broken = _case_line("CC-0301")[:-1]  # the closing brace is missing: the error is at the end of the line
    with pytest.raises(ImportFailed) as refused:
        import_stream(studio, "cases", "cut.jsonl", (broken + "\n").encode("utf-8"), actor="boss")
    column = len(broken) + 1
    assert f"at column {column})" in refused.value.errors[0]  # the command line's English line
    app = open_page(signed_in(studio, "boss"), "admin-import")
    app = _upload(app, "cut.jsonl", (broken + "\n").encode("utf-8"))
    app = button(app, t("admin.import.submit")).click().run()
    shown = texts(app).replace("\\", "")
    assert f"第 {column} 列" in shown and "第 1 列" not in shown
    middle = '{"case_id": "CC-1" "x": 1}'  # an error inside the line keeps the decoder's column
    with pytest.raises(ImportFailed) as refused:
        import_stream(studio, "cases", "mid.jsonl", (middle + "\n").encode("utf-8"), actor="boss")
    column = middle.index('"x"') + 1
    assert f"at column {column})" in refused.value.errors[0]


def test_the_import_page_asks_judge_fields_only_for_judge_files(studio):
    app = open_page(signed_in(studio, "boss"), "admin-import")
    labels = [w.label for w in (*app.selectbox, *app.text_input)]
    assert t("admin.import.judge") not in labels and t("admin.import.format") not in labels
    app.selectbox(key="import_kind").set_value("judge").run()
    labels = [w.label for w in (*app.selectbox, *app.text_input)]
    assert t("admin.import.judge") in labels and t("admin.import.format") in labels
    [uploader] = app.file_uploader
    assert uploader.label == t("admin.import.file") and uploader.help == t("admin.import.file.help", mb=MAX_UPLOAD_MB)


def test_a_wrong_file_type_is_refused_in_the_readers_language(studio):
    app = open_page(signed_in(studio, "boss", lang="zh"), "admin-import")
    app = _upload(app, "notes.txt", _case_line("CC-0401").encode("utf-8"), "text/plain")
    assert [e.value for e in app.error] == [t("admin.import.wrong_type", file="notes\\.txt")]
    [uploader] = app.file_uploader
    assert uploader.value is None  # taken out at once: the next click cannot import it
    app = button(app, t("admin.import.submit")).click().run()
    with session_scope(studio, read_only=True) as session:
        assert session.exec(select(Case).where(Case.case_id == "CC-0401")).first() is None


def test_the_uploader_is_emptied_after_an_import_so_a_second_click_imports_nothing(studio):
    app = open_page(signed_in(studio, "boss"), "admin-import")
    app = _upload(app, "more.jsonl", (_case_line("CC-0501") + "\n").encode("utf-8"))
    app = button(app, t("admin.import.submit")).click().run()
    assert [s.value for s in app.success] == [t("admin.import.done", file="more\\.jsonl")]  # kept over the rerun
    [uploader] = app.file_uploader
    assert uploader.value is None
    app = button(app, t("admin.import.submit")).click().run()
    assert [w.value for w in app.warning] == [t("admin.import.no_file")]
    with session_scope(studio, read_only=True) as session:
        imports = session.exec(
            select(AuditLog).where(AuditLog.entity_key == "more.jsonl", AuditLog.action == "import")
        ).all()
        assert sorted(entry.entity for entry in imports) == ["case_digests", "cases"]  # one import, not two


def test_the_add_user_form_keeps_its_fields_after_a_refusal_and_empties_after_success(studio):
    app = open_page(signed_in(studio, "boss"), "admin-users")
    app.text_input(key="add_username").input("g1a1")  # exists already
    app.text_input(key="add_display_name").input("李医生")
    app.selectbox(key="add_role").set_value("checker")
    app.selectbox(key="add_group").set_value(2)
    app.text_input(key="add_password").input("a-long-password-1")
    app = button(app, t("admin.users.add.submit")).click().run()
    assert app.error
    kept = (app.text_input(key="add_username").value, app.text_input(key="add_display_name").value)
    assert kept == ("g1a1", "李医生")
    assert (app.selectbox(key="add_role").value, app.selectbox(key="add_group").value) == ("checker", 2)
    assert app.text_input(key="add_password").value == "a-long-password-1"
    app.text_input(key="add_username").input("lidoc")
    app = button(app, t("admin.users.add.submit")).click().run()
    assert not app.error and t("admin.users.added", name="lidoc") in texts(app)
    assert app.text_input(key="add_username").value == "" and app.text_input(key="add_display_name").value == ""


def test_account_pickers_show_display_names_beside_usernames(studio):
    app = open_page(signed_in(studio, "boss"), "admin-users")
    for key in ("edit_name", "active_name", "identity_name", "password_name"):
        assert "王晓（g1a1）" in app.selectbox(key=key).options, key
    app = open_page(signed_in(studio, "boss", lang="en"), "admin-users")
    assert "王晓 (g1a1)" in app.selectbox(key="active_name").options


def test_the_audit_log_reads_as_fields_in_the_readers_zone(studio):
    with session_scope(studio) as session:
        from db.access import users

        boss = users.get_user(session, username="boss")
        users.update_account(session, username="g2a1", role="checker", group_no=2, actor=boss)
        users.add_user(
            session, username="dr_li", role="annotator", group_no=1, password="a-long-password-1", actor=boss
        )
    app = open_page(signed_in(studio, "boss"), "admin-audit-log")
    assert not app.exception
    shown = texts(app) + "\n".join(w.label for w in (*app.date_input, *app.selectbox))
    headers = [str(c) for frame in app.dataframe for c in frame.value.columns]
    assert "Asia/Shanghai" not in shown + " ".join(headers)
    assert t("review.audit_log.col.at", zone="北京时间，UTC+8") in headers
    assert t("review.audit_log.dates", zone="北京时间，UTC+8") in [w.label for w in app.selectbox]
    # Dates are picked only on request, and the picker starts filled in: never an empty "yyyy-mm-dd".
    assert not app.date_input
    app.selectbox(key="audit_log_period").set_value("custom").run()
    [picker] = app.date_input
    assert len(picker.value) == 2
    app.selectbox(key="audit_log_period").set_value("today").run()
    assert t("review.audit_log.count", total="3", shown="3") in texts(app)  # every entry was written today
    # The newest entry (the role change) is read field by field: names translated, codes named, no raw null.
    sign_in = app.dataframe[1].value  # the newest entry: the admin's sign-in, its times in the reader's zone
    times = dict(zip(sign_in[t("review.audit_log.col.field")], sign_in[t("review.audit_log.col.after")], strict=True))
    assert "T" not in times[t("review.audit_log.field.created_at")]
    entries = app.selectbox(key="audit_log_entry").options  # plain text, a session's hash cut short
    assert not any("\\" in option for option in entries) and "…" in entries[0] and len(entries[0]) < 80
    app.selectbox(key="audit_log_entry").set_value(1).run()  # the role change
    fields = app.dataframe[1].value
    by_field = dict(zip(fields[t("review.audit_log.col.field")], fields[t("review.audit_log.col.after")], strict=True))
    assert by_field[t("review.audit_log.field.role")] == t("role.checker")
    cells = " ".join(str(v) for frame in app.dataframe for v in frame.value.to_numpy().ravel())
    assert "null" not in cells and "None" not in cells and '{"' not in cells
    assert [e.label for e in app.expander] == [t("review.audit_log.raw")]


def test_progress_counts_each_row_on_one_basis_and_says_it(studio):
    app = open_page(signed_in(studio, "boss"), "admin-progress")
    metrics = {m.label: m.value for m in app.metric}
    assert metrics[t("admin.progress.approved")] == "1 / 1"  # cases with an approved rubric, out of all cases
    bars = [p.proto.text for p in app.get("progress")]
    assert any(text.startswith("评分标准编写任务：") and "项" in text for text in bars)
    assert any(text.startswith("回答标注任务：") for text in bars)
    assert t("admin.progress.tasks_caption") in texts(app)
