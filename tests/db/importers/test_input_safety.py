"""Bad input never half-lands (docs/REFERENCE.md §6): importers, command-line options, export targets, CSV
cells, Markdown on pages and a full disk — each refused in one line naming file, line and field, alike on
SQLite and PostgreSQL, with the database exactly as before."""

from __future__ import annotations

import csv
import io
import json
import os
from contextlib import contextmanager

import pandas as pd
import pytest
from sqlalchemy import event, func, select, update
from sqlmodel import Session

from cli.main import main
from db import counts
from db.importers import import_file
from db.importers.labels import _check_label
from db.labeling import drafts as label_drafts
from db.store.engine import get_engine, session_scope
from db.store.models import Assignment, AuditLog, Label, User
from tests.pages.test_insights_pages import insight_data  # noqa: F401  (a fixture: flagged criteria to send back)
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_response, make_user
from tests.support.import_samples import (
    MODELS,
    case_record,
    label_record,
    refused,
    response_record,
    table_counts,
    write_jsonl,
)


@pytest.fixture
def prepared(engine, tmp_path):
    """Two cases with rubrics, responses of both models, annotators and checkers of both groups, an admin."""
    cases = [case_record("CC-0001"), case_record("CC-0002")]
    import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", cases))
    responses = [response_record(case["case_id"], model) for case in cases for model in MODELS]
    import_file(engine, "responses", write_jsonl(tmp_path / "responses.jsonl", responses))
    with Session(engine) as session:
        for name, role, group in (
            ("dr_a", "annotator", 1),
            ("dr_b", "annotator", 2),
            ("chk_a", "checker", 1),
            ("chk_b", "checker", 2),
            ("boss", "admin", None),
        ):
            make_user(session, name, role=role, group_no=group)
        session.commit()
    return engine


def write_text(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


# Repeated keys ------------------------------------------------------------------------------------


def _repeat_key(record: dict, key: str, first_value) -> str:
    """The JSON line of `record` with `key` written twice: `first_value` first, the record's value last."""
    text = json.dumps(record, ensure_ascii=False)
    return text.replace(f'"{key}": ', f'"{key}": {json.dumps(first_value, ensure_ascii=False)}, "{key}": ', 1)


REPEATED = [
    ("labels", lambda: _repeat_key(label_record(met=False), "met", True), "met"),
    ("responses", lambda: _repeat_key(response_record(model="model-b"), "model", "model-a"), "model"),
    ("cases", lambda: _repeat_key(case_record("CC-0009"), "criterion", "旧的标准"), "criterion"),
    (
        "judge",
        lambda: _repeat_key({"judge": "jx", **label_record(), "met": False}, "judge", "jy"),
        "judge",
    ),
]


@pytest.mark.parametrize(("kind", "line", "key"), REPEATED, ids=[kind for kind, _, _ in REPEATED])
def test_a_repeated_key_is_refused_not_last_wins(prepared, tmp_path, kind, line, key):
    path = write_text(tmp_path / f"{kind}.jsonl", line() + "\n")
    errors = refused(prepared, kind, path)
    assert errors[0] == f"{kind}.jsonl line 1: not accepted: key {key!r} appears twice in one object"


def test_a_repeated_key_in_an_official_judgement_file_is_refused(prepared, tmp_path):
    item = (
        '{"case_id": "CC-0001", "criteria_results": '
        '[{"criterion_id": "c01", "criteria_met": true, "criteria_met": false}]}'
    )
    path = write_text(tmp_path / "model-a_judge.json", f"[\n{item}\n]\n")
    errors = refused(prepared, "judge", path, judge="jx")
    assert errors[0] == "model-a_judge.json line 2: not accepted: key 'criteria_met' appears twice in one object"


# Empty files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["cases", "responses", "labels", "judge"])
@pytest.mark.parametrize("content", ["", "\n  \n\t\n"], ids=["0 bytes", "blank lines"])
def test_an_empty_file_is_refused(prepared, tmp_path, kind, content):
    path = write_text(tmp_path / f"{kind}.jsonl", content)
    assert refused(prepared, kind, path)[0] == f"{kind}.jsonl: the file is empty (no records)"


@pytest.mark.parametrize("content", ["", "\n \n"], ids=["0 bytes", "blank lines"])
def test_an_empty_official_judgement_file_is_refused(prepared, tmp_path, content):
    path = write_text(tmp_path / "model-a_judge.json", content)
    assert refused(prepared, "judge", path, judge="jx")[0] == "model-a_judge.json: the file is empty (no records)"


# Invisible and control characters in ids and names ----------------------------------------------------


def _case_with(field: str, value) -> dict:
    record = case_record("CC-0009")
    if field.startswith("rubrics"):
        record["rubrics"][0] = {**record["rubrics"][0], field.split(".")[1]: value}
    else:
        record[field] = value
    return record


INVISIBLE = [
    # kind, the record, the field as the message names it, the character
    ("cases", lambda: _case_with("case_id", "CC-0001\u200b"), "case_id", "U+200B"),
    ("cases", lambda: _case_with("rubrics.criterion_id", "c01\u202e"), "rubrics[0].criterion_id", "U+202E"),
    ("cases", lambda: _case_with("rubrics.tags", ["safety\u200d"]), "rubrics[0].tags[0]", "U+200D"),
    ("cases", lambda: _case_with("task_labels", ["鉴别诊断\u2028"]), "task_labels[0]", "U+2028"),
    ("cases", lambda: _case_with("subject", "心内科\u2066"), "subject", "U+2066"),
    ("responses", lambda: response_record(model="model-a\u200b"), "model", "U+200B"),
    ("labels", lambda: label_record(case_id="CC-0001\u200b"), "case_id", "U+200B"),
    ("labels", lambda: label_record(criterion_id="c01\x07"), "criterion_id", "U+0007"),
    ("labels", lambda: label_record(annotator="dr_a\u202e"), "annotator", "U+202E"),
    ("labels", lambda: label_record(model="model-a\x85"), "model", "U+0085"),
    ("judge", lambda: {"judge": "jx\u2029", **label_record()}, "judge", "U+2029"),
    ("judge", lambda: {"judge": "jx", **label_record(criterion_id="c01\ufeff")}, "criterion_id", "U+FEFF"),
]


@pytest.mark.parametrize(
    ("kind", "record", "field", "code"), INVISIBLE, ids=[f"{kind}-{field}" for kind, _, field, _ in INVISIBLE]
)
def test_invisible_or_control_characters_in_ids_are_refused(prepared, tmp_path, kind, record, field, code):
    path = write_jsonl(tmp_path / f"{kind}.jsonl", [record()])
    errors = refused(prepared, kind, path)
    assert errors[0] == f"{kind}.jsonl line 1: {field} contains an invisible or control character ({code})"


def test_the_labels_quick_test_refuses_what_the_model_refuses():
    class Everywhere(dict):
        def get(self, key, default=None):
            return (1, 1)

    class Targets:
        response = Everywhere()
        criteria = {1: {"c01": 1}}

        def locate(self, case_id, model, criterion_id, errors):
            return 1, 1, 1

    plain_row, errors = _check_label(label_record(), Targets())
    assert plain_row is not None and errors == []
    for row in (label_record(case_id="CC-0001\u200b"), label_record(note="理由\x00")):
        assert _check_label(row, Targets())[0] is None


# NUL anywhere ----------------------------------------------------------------------------------------

NUL = [
    ("cases", lambda: case_record("CC-0009", clinical_context="胸痛\x00两小时"), "clinical_context"),
    ("cases", lambda: case_record("CC-0009", source="x\x00"), "source"),
    ("responses", lambda: response_record(text="回答\x00"), "response"),
    ("labels", lambda: label_record(note="未提及\x00随访"), "note"),
    ("judge", lambda: {"judge": "jx", **label_record(), "explanation": "理由\x00"}, "explanation"),
    ("judge", lambda: {"judge": "jx", **label_record(), "meta": {"k\x00": 1}}, "key meta.k\\u0000"),
]


@pytest.mark.parametrize(("kind", "record", "field"), NUL, ids=[f"{kind}-{field!r}" for kind, _, field in NUL])
def test_nul_anywhere_is_refused_naming_the_field(prepared, tmp_path, kind, record, field):
    path = write_jsonl(tmp_path / f"{kind}.jsonl", [record()])
    errors = refused(prepared, kind, path)
    assert errors[0] == f"{kind}.jsonl line 1: not accepted: {field} contains a NUL character (\\u0000)"


def test_an_unpaired_surrogate_is_refused(prepared, tmp_path):
    path = write_text(tmp_path / "labels.jsonl", json.dumps(label_record(note="x\ud800")) + "\n")
    errors = refused(prepared, "labels", path)
    assert errors[0] == "labels.jsonl line 1: not accepted: note contains an unpaired surrogate (U+D800)"


# Who may be credited with a label ----------------------------------------------------------------------

AUTHORS = [
    (label_record(annotator="dr_b", group=1), "annotator 'dr_b' is in expert group 2, not group 1"),
    (
        label_record(annotator="boss", group=1),
        "annotator 'boss' is admin, not annotator: annotation labels are made by annotators",
    ),
    (
        label_record(annotator="chk_a", group=1),
        "annotator 'chk_a' is checker, not annotator: annotation labels are made by annotators",
    ),
    (
        label_record(annotator="dr_a", stage="check", group=1),
        "annotator 'dr_a' is annotator, not checker: check labels are made by checkers",
    ),
    (label_record(annotator="chk_b", stage="check", group=1), "annotator 'chk_b' is in expert group 2, not group 1"),
    (
        label_record(annotator="dr_a", stage="adjudication", group=None),
        "annotator 'dr_a' is annotator, not checker: adjudication labels are made by checkers",
    ),
]


@pytest.mark.parametrize(("row", "message"), AUTHORS, ids=[message.split(" is ")[0] for _, message in AUTHORS])
def test_a_label_credited_to_someone_who_may_not_make_it_is_refused(prepared, tmp_path, row, message):
    good = label_record(criterion_id="c02", annotator="dr_a", group=1)
    errors = refused(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", [good, row]))
    assert errors[0] == f"labels.jsonl line 2: {message}"


def test_labels_by_the_right_people_land(prepared, tmp_path):
    rows = [
        label_record(annotator="dr_a", group=1),
        label_record(annotator="dr_b", group=2),
        label_record(annotator="chk_a", stage="check", group=1),
        label_record(annotator="chk_b", stage="check", group=2),
        label_record(annotator="chk_b", stage="adjudication", group=None, met=False),
    ]
    assert import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows)).inserted == 5


def test_placeholders_take_the_group_of_their_row_and_keep_it(prepared, tmp_path):
    rows = [
        label_record(annotator="dr_new", group=2),
        label_record(annotator="chk_new", stage="check", group=1),
        label_record(annotator="chk_adj", stage="adjudication", group=None),
    ]
    summary = import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert summary.placeholders == ["dr_new", "chk_new", "chk_adj"]
    with Session(prepared) as session:
        accounts = {
            user.username: (user.role, user.group_no, user.is_active)
            for user in session.scalars(select(User).where(User.username.in_(summary.placeholders)))
        }
    assert accounts == {
        "dr_new": ("annotator", 2, False),
        "chk_new": ("checker", 1, False),
        "chk_adj": ("checker", None, False),
    }
    # A name first seen in group 1 is not credited to group 2 a line later, and nothing lands.
    rows = [label_record(criterion_id="c03", annotator="dr_two", group=1), label_record(annotator="dr_two", group=2)]
    errors = refused(prepared, "labels", write_jsonl(tmp_path / "labels2.jsonl", rows))
    assert errors[0] == "labels2.jsonl line 2: annotator 'dr_two' is in expert group 1, not group 2"


def test_a_placeholder_first_seen_adjudicating_takes_the_group_of_its_first_check(prepared, tmp_path):
    # The demo's files name a checker's adjudications before their group's checks, in one file or in two.
    rows = [
        label_record(annotator="chk_both", stage="adjudication", group=None),
        label_record(criterion_id="c02", annotator="chk_both", stage="check", group=1),
    ]
    summary = import_file(prepared, "labels", write_jsonl(tmp_path / "labels.jsonl", rows))
    assert summary.inserted == 2 and summary.placeholders == ["chk_both"]
    rows = [label_record(criterion_id="c04", annotator="chk_later", stage="adjudication", group=None)]
    import_file(prepared, "labels", write_jsonl(tmp_path / "labels2.jsonl", rows))
    rows = [label_record(criterion_id="c05", annotator="chk_later", stage="check", group=2)]
    assert import_file(prepared, "labels", write_jsonl(tmp_path / "labels3.jsonl", rows)).inserted == 1
    with Session(prepared) as session:
        accounts = {
            user.username: (user.role, user.group_no, user.is_active)
            for user in session.scalars(select(User).where(User.username.in_(["chk_both", "chk_later"])))
        }
        changes = session.scalars(
            select(AuditLog.entity_key).where(AuditLog.entity == "user", AuditLog.action == "update")
        ).all()
    assert accounts == {"chk_both": ("checker", 1, False), "chk_later": ("checker", 2, False)}
    assert sorted(changes) == ["chk_both", "chk_later"]  # the group set on an existing placeholder is audited
    # Once the group is known it holds: the same checker is not credited to the other group.
    rows = [label_record(criterion_id="c06", annotator="chk_later", stage="check", group=1)]
    errors = refused(prepared, "labels", write_jsonl(tmp_path / "labels4.jsonl", rows))
    assert errors[0] == "labels4.jsonl line 1: annotator 'chk_later' is in expert group 2, not group 1"


# Command-line options -----------------------------------------------------------------------------------


@pytest.fixture
def cli(database_url, monkeypatch, capsys):
    """`clinconsensus ARGS…` in this process on the test database: (exit code, stdout, stderr)."""
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    yield run
    get_engine().dispose()
    get_engine.cache_clear()


@pytest.mark.parametrize(
    ("actor", "reason"),
    [
        ("ci\x00bot", "--actor contains a NUL character (\\u0000)"),
        ("x" * 65, "--actor: at most 64 characters (got 65)"),
        ("ci\u200bbot", "--actor contains an invisible or control character (U+200B)"),
    ],
    ids=["NUL", "too long", "zero-width"],
)
def test_actor_is_refused_alike_on_both_databases(cli, tmp_path, actor, reason):
    path = write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001")])
    code, out, err = cli("import", "cases", str(path), "--actor", actor)
    assert (code, out, err) == (1, "", f"clinconsensus: {reason}\n")
    assert table_counts(get_engine())["Case"] == 0


def test_a_nul_in_any_option_is_refused_naming_it(cli, tmp_path):
    code, _, err = cli("export", "gold", str(tmp_path / "gold\x00.jsonl"))
    assert (code, err) == (1, "clinconsensus: TARGET contains a NUL character (\\u0000)\n")


# Export targets -------------------------------------------------------------------------------------------


def _one_line_refusal(result, expected: str) -> None:
    code, out, err = result
    assert code == 1 and err == f"clinconsensus: {expected}\n", err
    assert "Traceback" not in out + err


def test_export_gold_never_writes_through_a_symlink(cli, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    link = tmp_path / "gold.jsonl"
    link.symlink_to(victim)
    _one_line_refusal(cli("export", "gold", str(link)), f"{link}: is a symbolic link; refusing to write through it")
    assert victim.read_text(encoding="utf-8") == "keep me" and link.is_symlink()


def test_export_gold_creates_no_missing_parent(cli, tmp_path):
    target = tmp_path / "missing" / "deeper" / "gold.jsonl"
    _one_line_refusal(cli("export", "gold", str(target)), f"{target.parent}: no such folder (create it first)")
    assert not (tmp_path / "missing").exists()


def test_a_folder_where_a_file_belongs_and_the_other_way_round(cli, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    _one_line_refusal(cli("export", "gold", str(folder)), f"{folder}: is a folder; a file name is expected")
    _one_line_refusal(cli("audit", "verify", "--anchor", str(folder)), f"{folder}: is a folder; a file is expected")
    a_file = tmp_path / "a_file"
    a_file.write_text("x", encoding="utf-8")
    _one_line_refusal(cli("export", "release", str(a_file)), f"{a_file}: is a file; a folder is expected")
    _one_line_refusal(cli("report", "--out", str(a_file)), f"{a_file}: is a file; a folder is expected")
    assert a_file.read_text(encoding="utf-8") == "x"


def test_folder_exports_refuse_a_linked_folder_and_a_link_inside(cli, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "release"
    linked.symlink_to(elsewhere, target_is_directory=True)
    _one_line_refusal(
        cli("export", "release", str(linked)), f"{linked}: is a symbolic link; refusing to write through it"
    )
    _one_line_refusal(
        cli("report", "--out", str(linked)), f"{linked}: is a symbolic link; refusing to write through it"
    )
    assert list(elsewhere.iterdir()) == []
    # A link planted in the target folder under an output's name is replaced by the file, never followed.
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    folder = tmp_path / "public"
    folder.mkdir()
    (folder / "cases.jsonl").symlink_to(victim)
    code, _, err = cli("export", "release", str(folder))
    assert code == 0, err
    assert victim.read_text(encoding="utf-8") == "keep me" and not (folder / "cases.jsonl").is_symlink()


def test_report_json_refuses_a_link_and_a_missing_parent(cli, tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text("{}", encoding="utf-8")
    link = tmp_path / "report.json"
    link.symlink_to(victim)
    _one_line_refusal(cli("report", "--json", str(link)), f"{link}: is a symbolic link; refusing to write through it")
    missing = tmp_path / "nope" / "report.json"
    _one_line_refusal(cli("report", "--json", str(missing)), f"{missing.parent}: no such folder (create it first)")
    assert victim.read_text(encoding="utf-8") == "{}" and not missing.parent.exists()


# CSV cells ----------------------------------------------------------------------------------------------------

FORMULA_MODELS = ['=HYPERLINK("http://127.0.0.1:1")', "+1+2", "-2+3", "@SUM(A1)", "\t=1", "=1 ", "model-ok"]


def test_csv_text_cells_cannot_start_a_formula_and_numbers_stay_numbers():
    from analysis.exports.csv_cells import csv_text, neutral_text

    frame = pd.DataFrame({"model": FORMULA_MODELS, "diff": [-0.5, 1.0, -2.0, 0.0, 3.5, -1.25, 2.0], "n": range(7)})
    frame["=col"] = "x"
    rows = list(csv.reader(io.StringIO(csv_text(frame))))
    assert rows[0] == ["model", "diff", "n", "'=col"]
    for (model, diff, n, _), original, number, count in zip(rows[1:], FORMULA_MODELS, frame["diff"], range(7)):
        # A literal reading: text a spreadsheet would run gets an apostrophe, other text is as it was.
        assert model == ("'" + original if original[0] in "=+-@\t\r" else original)
        assert float(diff) == number and diff == repr(number) and int(n) == count
    assert neutral_text("\r=1") == "'\r=1" and neutral_text(-1.5) == -1.5 and neutral_text("a=b") == "a=b"


def test_report_out_tables_neutralise_model_names(engine, tmp_path):
    from analysis.report import run_report

    cases = [case_record("CC-0001")]
    import_file(engine, "cases", write_jsonl(tmp_path / "cases.jsonl", cases))
    models = ["=cmd|' /C calc'!A0", "@evil", "safe-model"]
    import_file(engine, "responses", write_jsonl(tmp_path / "r.jsonl", [response_record(model=m) for m in models]))
    with Session(engine) as session:
        make_user(session, "dr_a", group_no=1)
        make_user(session, "dr_b", group_no=2)
        session.commit()
    labels = [
        label_record(model=model, criterion_id=f"c{i:02d}", met=i <= 15, annotator=name, group=group)
        for model in models
        for i in range(1, 31)
        for name, group in (("dr_a", 1), ("dr_b", 2))
    ]
    import_file(engine, "labels", write_jsonl(tmp_path / "labels.jsonl", labels))
    out = tmp_path / "out"
    run_report(engine, out_dir=out, stream=io.StringIO())
    cells = [
        cell
        for path in sorted(out.glob("*.csv"))
        for row in csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline=""))
        for cell in row
    ]
    assert "'=cmd|' /C calc'!A0" in cells and "'@evil" in cells and "safe-model" in cells
    assert not [cell for cell in cells if cell[:1] in ("=", "+", "@", "\t", "\r")]
    assert [cell for cell in cells if cell.startswith("-")] == [c for c in cells if _is_number(c) and c.startswith("-")]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# Markdown on pages ----------------------------------------------------------------------------------------------

MARKDOWN_CRITERION = "![x](http://127.0.0.1:1/x)"
MARKDOWN_MODEL = "**b**"


@pytest.fixture
def markdown_names(app_database):
    from db.store.models import Criterion, JudgeDecision
    from tests.support.factories import make_label

    with Session(app_database, expire_on_commit=False) as session:
        g1, g2 = make_user(session, "ann-1", group_no=1), make_user(session, "ann-2", group_no=2)
        make_user(session, "boss", role="admin")
        case = make_case(session, "CC-0001", n=2)
        session.execute(
            update(Criterion).where(Criterion.criterion_id == "c02").values(criterion_id=MARKDOWN_CRITERION)
        )
        for i in range(4):
            response = make_response(session, case, f"{MARKDOWN_MODEL}{i}", f"第 {i} 个回答")
            for criterion in ("c01", MARKDOWN_CRITERION):
                make_label(session, response, criterion, i % 2 == 0, g1)
                make_label(session, response, criterion, i % 2 == 0, g2)
                session.add(JudgeDecision(judge="jx", response_id=response.id, criterion_id=criterion, met=i % 2 != 0))
        session.commit()
    return app_database


def test_the_judge_error_page_escapes_ids_and_model_names(markdown_names, provisional_basis):  # noqa: F811
    """The page's figures on the provisional basis: its labels are unchecked (the escaping is under test)."""
    from tests.support.apptest_helpers import open_page, signed_in
    from ui.text import plain

    app = open_page(signed_in(markdown_names, "boss", lang="en"), "analysis-judge-errors")
    assert not app.exception
    markdown = [element.value for kind in ("markdown", "caption") for element in getattr(app, kind)]
    shown = "\n".join(markdown)
    assert plain(MARKDOWN_MODEL + "0") in shown or plain(MARKDOWN_MODEL + "1") in shown, shown
    assert plain(MARKDOWN_CRITERION) in shown or plain("c01") in shown, shown
    assert "![x](" not in shown and MARKDOWN_MODEL not in shown
    # Pick the row of the criterion with Markdown in its id: its caption shows the id escaped.
    rows = app.selectbox(key="insights_error_row")
    choice = next(i for i, option in enumerate(rows.options) if MARKDOWN_CRITERION in option)
    rows.set_value(choice).run()
    captions = [element.value for element in app.caption]
    assert any(plain(MARKDOWN_CRITERION) in caption for caption in captions), captions
    assert not any("![x](" in caption for caption in captions)


# A full disk ------------------------------------------------------------------------------------------------------


@contextmanager
def disk_full(engine):
    """No transaction of `engine` may grow the database file: a real SQLITE_FULL on any write needing a page."""

    def limit(connection) -> None:
        pages = connection.exec_driver_sql("PRAGMA page_count").scalar()
        connection.exec_driver_sql(f"PRAGMA max_page_count = {pages}")

    event.listen(engine, "begin", limit)
    try:
        yield
    finally:
        event.remove(engine, "begin", limit)
        engine.dispose()  # the limit stays with the pooled connections


LONG_NOTE = "患者未提及随访安排" * 220  # about 2,000 characters, 6 kB: no page has room for it


def _label_count(engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(Label)).one()[0]


def test_a_label_save_on_a_full_disk_says_so_and_saves_nothing(sqlite_engine, monkeypatch):
    from db.rules.errors import DiskFull
    from ui import shell, widgets

    engine = sqlite_engine
    with session_scope(engine) as session:
        annotator = make_user(session, "ann1", "annotator", 1)
        case = make_case(session, "CC-0001", n=4)
        response = make_response(session, case, "model-a", "回答")
        session.add(
            Assignment(kind="label", case_pk=case.id, user_id=annotator.id, group_no=1, response_id=response.id)
        )
        counts.refresh_assignments(session, [response.id])
    with session_scope(engine) as session:
        bench = label_drafts.open_response(session, annotator, response.id)
    before = (_label_count(engine), table_counts(engine)["AuditLog"])
    with disk_full(engine), pytest.raises(DiskFull) as full, session_scope(engine) as session:
        label_drafts.save(
            session,
            annotator,
            response.id,
            rubric_version_id=bench.view.rubric_version_id,
            decisions={f"c{i:02d}": True for i in range(1, 5)},
            notes={f"c{i:02d}": LONG_NOTE for i in range(1, 5)},
            expected_versions=bench.view.expected_versions,
            active_ms=5_000,
        )
    assert (_label_count(engine), table_counts(engine)["AuditLog"]) == before
    assert str(full.value) == "the disk is full; nothing was saved"
    shown = []
    for lang in ("zh", "en"):
        monkeypatch.setattr(shell, "lang", lambda lang=lang: lang)
        shown.append(widgets.error_text(full.value))
    assert shown == ["磁盘已满，未保存任何内容。", "Disk full, nothing saved."]


def test_a_check_and_an_adjudication_on_a_full_disk_save_nothing(sqlite_engine):
    from db import review
    from db.rules.errors import DiskFull
    from tests.db.review.test_review import build_world, confirm_all, user

    engine = sqlite_engine
    ids, _, first, _ = build_world(engine)
    checker = user(engine, ids["chk1"])
    before = _label_count(engine)
    with disk_full(engine), pytest.raises(DiskFull), session_scope(engine) as session:
        review.save_checks(
            session,
            checker,
            response_id=first,
            decisions=[review.CheckInput(f"c{i:02d}", False, LONG_NOTE) for i in range(1, 5)],
        )
    assert _label_count(engine) == before
    confirm_all(engine, ids, first)
    adjudicator = user(engine, ids["chk2b"])
    before = _label_count(engine)
    with disk_full(engine), pytest.raises(DiskFull), session_scope(engine) as session:
        review.adjudicate(session, adjudicator, response_id=first, criterion_id="c01", met=False, rationale=LONG_NOTE)
    assert _label_count(engine) == before


def test_an_import_on_a_full_disk_says_so_and_lands_nothing(sqlite_engine, tmp_path):
    import_file(sqlite_engine, "cases", write_jsonl(tmp_path / "cases.jsonl", [case_record("CC-0001")]))
    path = write_jsonl(tmp_path / "more.jsonl", [case_record(f"CC-{i:04d}") for i in range(2, 40)])
    with disk_full(sqlite_engine):
        errors = refused(sqlite_engine, "cases", path)
    assert errors[0] == "more.jsonl: the disk is full; nothing was imported"


def test_a_page_write_on_a_full_disk_shows_one_line_and_saves_nothing(insight_data, provisional_basis):  # noqa: F811
    """The reliability page's "send back" writes a new rubric version with long comments (its labels are unchecked:
    the provisional basis)."""
    from tests.support.apptest_helpers import open_page, signed_in

    app = open_page(signed_in(insight_data, "boss", lang="zh"), "analysis-criteria")
    assert not app.exception
    areas = [area for area in app.text_area if area.key and area.key.startswith("insights_comment_")]
    if not areas:
        pytest.fail("the reliability page offers no criterion to send back")
    for area in areas:
        area.set_value(LONG_NOTE[:1_900])
    app.text_input(key="insights_author_CC-0001").set_value("author")
    before = table_counts(insight_data)
    with disk_full(get_engine(os.environ["DATABASE_URL"])):
        app.button[0].click().run()
    assert not app.exception
    assert [error.value for error in app.error] == ["磁盘已满，未保存任何内容。"]
    assert table_counts(insight_data) == before


def test_audit_entries_are_untouched_by_refused_imports(prepared, tmp_path):
    """A refused file leaves no audit entry behind (the log is part of 'exactly as before')."""
    with Session(prepared) as session:
        before = session.exec(select(func.count()).select_from(AuditLog)).one()[0]
    refused(prepared, "labels", write_jsonl(tmp_path / "l.jsonl", [label_record(annotator="boss")]))
    with Session(prepared) as session:
        assert session.exec(select(func.count()).select_from(AuditLog)).one()[0] == before


def test_the_dashboard_caption_of_judge_scored_models_escapes_their_names(app_database, tmp_path, monkeypatch):
    from judge.runner import RunOptions, run_judge
    from tests.judge import test_judge_new_model as new_model
    from tests.support.apptest_helpers import open_page, signed_in
    from tools.llm_server import LLMServer
    from ui.text import plain

    monkeypatch.setattr(new_model, "NEW", "**b**![x](http://127.0.0.1:1/x)")
    with Session(app_database) as session:
        new_model.build_world(session)
        make_user(session, "boss", "admin")
        session.commit()
    new_model.import_new_model(app_database, tmp_path)
    with LLMServer() as server:
        run_judge(app_database, RunOptions(base_url=server.url, model="judge-8b", judge="loopback", timeout=10))
    app = open_page(signed_in(app_database, "boss", lang="en"), "analysis-dashboard")
    app.number_input(key="analysis_k").set_value(new_model.K).run()
    app.selectbox(key="analysis_judge_scored").set_value("loopback").run()
    assert not app.exception
    captions = [element.value for element in app.caption]
    assert not any("**b**" in caption or "![x](" in caption for caption in captions), captions
    # The scores section names the compared models in a caption: escaped there too.
    app.segmented_control(key="analysis_section").set_value("scores").run()
    app.selectbox(key="pair_a").set_value(new_model.NEW).run()
    assert not app.exception
    captions = [element.value for element in app.caption]
    assert any(plain(new_model.NEW) in caption for caption in captions), captions
    assert not any("**b**" in caption or "![x](" in caption for caption in captions), captions
