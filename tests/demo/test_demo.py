"""The demo and full-scale synthetic data: files, reproducibility, import, accounts, queues, re-runs."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import select

from db import review
from db.access import users
from db.access.audit import verify_chain
from db.access.audit_replay import verify_audit
from db.access.users import authenticate
from db.importers import import_file
from db.rubrics.authoring import blocking_problems
from db.rules.enums import AssignmentKind, RubricStatus
from db.rules.errors import ValidationFailed
from db.rules.taxonomy import get_taxonomy
from db.store.engine import session_scope
from db.store.models import Assignment, Case, JudgeDecision, Label, Response, RubricVersion, User
from db.work.assignments import my_queue, rubric_authors
from db.work.status import counts
from demo import generator as demo
from tests.support.factories import make_case, make_user

PASSWORD = "demo-Test-pass-42"
CJK = range(0x4E00, 0xA000)


def _lines(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _has_chinese(text: str) -> bool:
    return any(ord(ch) in CJK for ch in text)


@pytest.fixture
def fixed_password(monkeypatch):
    monkeypatch.setenv(demo.PASSWORD_ENV, PASSWORD)
    return PASSWORD


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    return demo.write_demo_files(tmp_path_factory.mktemp("small"), scale="small", seed=7)


# Files ---------------------------------------------------------------------------------------


def test_small_cases_cover_specialties_difficulties_registers_and_themes(small_files):
    cases = _lines(small_files["cases"])
    taxonomy = get_taxonomy()
    assert len(cases) == 40
    assert len({c["case_id"] for c in cases}) == 40
    assert {c["difficulty"] for c in cases} == {"low", "medium", "high"}
    macros = {taxonomy.macro_category(c["subject_labels"]) for c in cases}
    assert len(macros) == 8 and "other" not in macros
    registers = Counter(taxonomy.register(c["user_role"]) for c in cases)
    assert registers["lay"] >= 5 and registers["professional"] >= 5
    themes = {taxonomy.canonical_theme(label) for c in cases for label in c["task_labels"]}
    assert None not in themes and len(themes) == 12
    # Some labels are given by their Chinese name, which the importer canonicalises.
    assert any(label != taxonomy.canonical_theme(label) for c in cases for label in c["task_labels"])
    for c in cases:
        assert list(c) == [
            "case_id",
            "difficulty",
            "task",
            "task_labels",
            "subject",
            "subject_labels",
            "user_role",
            "clinical_context",
            "user_request",
            "rubrics",
        ]
        assert _has_chinese(c["clinical_context"]) and _has_chinese(c["user_request"])
        assert "{age}" not in c["clinical_context"]
        assert len(c["rubrics"]) in (0, 30)
    with_rubric = [c for c in cases if c["rubrics"]]
    assert len(with_rubric) == 30
    for c in with_rubric:
        texts = [item["criterion"] for item in c["rubrics"]]
        assert blocking_problems(texts, 30) == [], c["case_id"]
        assert [item["criterion_id"] for item in c["rubrics"]] == [f"c{i:02d}" for i in range(1, 31)]
        assert all(_has_chinese(text) for text in texts)


def test_small_responses_labels_and_judges_have_the_promised_shape(small_files):
    cases = {c["case_id"]: c for c in _lines(small_files["cases"])}
    responses = _lines(small_files["responses"])
    assert len(responses) == 200
    models = {r["model"] for r in responses}
    assert len(models) == 5
    assert Counter(r["case_id"] for r in responses) == dict.fromkeys(cases, 5)
    lengths = [len(r["response"]) for r in responses]
    assert min(lengths) < 0.6 * max(lengths)
    assert all(_has_chinese(r["response"]) for r in responses)

    labels = _lines(small_files["labels"])
    approved = {case_id for case_id, c in cases.items() if c["rubrics"]}
    assert {row["case_id"] for row in labels} <= approved
    stages = Counter(row["stage"] for row in labels)
    assert stages["annotation"] > 1000 and stages["check"] > 0 and 0 < stages["adjudication"] < stages["check"]
    demo_names = {p.username for p in demo.DEMO_PEOPLE}
    assert {row["annotator"] for row in labels} <= demo_names
    for row in labels:
        if row["stage"] == "adjudication":
            assert row["group"] is None and row["annotator"] in {"check1", "check2"}
        else:
            assert row["group"] in (1, 2)
            person = next(p for p in demo.DEMO_PEOPLE if p.username == row["annotator"])
            assert person.group_no == row["group"]
            assert person.role == ("annotator" if row["stage"] == "annotation" else "checker")

    # Both groups label part of the responses; some responses stay unlabeled.
    per_response = defaultdict(set)
    annotation = defaultdict(dict)
    for row in labels:
        if row["stage"] == "annotation":
            per_response[(row["case_id"], row["model"])].add(row["group"])
            annotation[(row["case_id"], row["model"], row["criterion_id"])][row["group"]] = row["met"]
    approved_responses = {(r["case_id"], r["model"]) for r in responses if r["case_id"] in approved}
    assert approved_responses - set(per_response), "some responses should be unlabeled"
    assert any(groups == {1} for groups in per_response.values())
    assert any(groups == {2} for groups in per_response.values())
    both = [v for v in annotation.values() if len(v) == 2]
    agreement = sum(v[1] == v[2] for v in both) / len(both)
    assert 0.82 <= agreement <= 0.95

    for stem in ("judge_a", "judge_b"):
        decisions = _lines(small_files[stem])
        assert len(decisions) == len(approved_responses) * 30
        assert all(set(d) == {"judge", "case_id", "model", "criterion_id", "met"} for d in decisions)


def test_files_are_byte_identical_for_a_seed_and_differ_for_another(tmp_path):
    def digest(folder, **options):
        paths = demo.write_demo_files(tmp_path / folder, **options)
        return {key: path.read_bytes() for key, path in paths.items()}

    for options in ({"scale": "small"}, {"scale": "full", "n_cases": 40, "n_models": 4, "n_judges": 2}):
        first = digest("a", seed=11, **options)
        again = digest("b", seed=11, **options)
        other = digest("c", seed=12, **options)
        assert first == again
        assert first["labels"] != other["labels"] and first["responses"] != other["responses"]


def test_full_scale_writer_labels_every_decision_by_both_groups(tmp_path):
    paths = demo.write_demo_files(tmp_path, scale="full", seed=7, n_cases=60, n_models=6, n_judges=3)
    cases = _lines(paths["cases"])
    assert len(cases) == 60 and all(len(c["rubrics"]) == 30 for c in cases)
    assert len(_lines(paths["responses"])) == 360
    labels = _lines(paths["labels"])
    stages = Counter((row["stage"], row["group"]) for row in labels)
    assert stages[("annotation", 1)] == stages[("annotation", 2)] == 60 * 6 * 30
    assert stages[("check", 1)] > 0 and stages[("check", 2)] > 0 and stages[("adjudication", None)] > 0
    for stem in ("judge_a", "judge_b", "judge_c"):
        assert len(_lines(paths[stem])) == 60 * 6 * 30
    # Models differ: the strongest model meets clearly more criteria than the weakest.
    rate = defaultdict(list)
    for row in labels:
        if row["stage"] == "annotation":
            rate[row["model"]].append(row["met"])
    shares = {model: sum(v) / len(v) for model, v in rate.items()}
    assert shares["model-alpha"] - min(shares.values()) > 0.1


def test_every_written_line_imports_without_placeholders(sqlite_engine, tmp_path):
    paths = demo.write_demo_files(tmp_path, scale="full", seed=3, n_cases=25, n_models=3, n_judges=2)
    with session_scope(sqlite_engine) as session:
        for person in demo.DEMO_PEOPLE:
            make_user(session, person.username, role=person.role, group_no=person.group_no)
    for kind, key in [
        ("cases", "cases"),
        ("responses", "responses"),
        ("labels", "labels"),
        ("judge", "judge_a"),
        ("judge", "judge_b"),
    ]:
        summary = import_file(sqlite_engine, kind, paths[key], actor="test")
        lines = len(paths[key].read_text(encoding="utf-8").splitlines())
        assert summary.records == lines and summary.inserted == lines
        assert summary.placeholders == [] and not summary.unknown_task_labels
    with session_scope(sqlite_engine, read_only=True) as session:
        status = counts(session)
    assert status["cases"] == 25 and status["criteria"] == 25 * 30 and status["responses"] == 75
    assert status["judge_decisions"] == 2 * 25 * 3 * 30


def test_writer_rejects_bad_sizes_and_scales(tmp_path):
    with pytest.raises(ValidationFailed, match="scale"):
        demo.write_demo_files(tmp_path, scale="huge")
    with pytest.raises(ValidationFailed, match="n_models"):
        demo.write_demo_files(tmp_path, scale="full", n_models=12)


# Building into a database --------------------------------------------------------------------


def test_small_demo_builds_with_queues_for_every_role(engine, fixed_password):
    result = demo.build_demo(engine, scale="small", seed=7)
    c = result.counts
    assert c["cases"] == 40 and c["approved_rubrics"] == 30 and c["waiting_rubrics"] == 10
    # one rubric submitted by plan.json, one drafted by the demo's generator and submitted (demo/drafts.py)
    assert c["submitted_rubrics"] == 2 and c["criteria"] == 900 and c["responses"] == 200
    assert c["labels"]["annotation"] > 1000 and c["labels"]["check"] > 0 and c["labels"]["adjudication"] > 0
    assert c["judge_decisions"] == 2 * 30 * 5 * 30
    assert c["rubric_assignments"] == 8  # two waiting cases are left for the admin to hand out
    assert c["users"] == len(demo.DEMO_PEOPLE)
    with session_scope(engine, read_only=True) as session:
        per_judge = dict(session.exec(select(JudgeDecision.judge, func.count()).group_by(JudgeDecision.judge)).all())
    assert per_judge == {"judge-a": 4500, "judge-b": 4500}
    text = "\n".join(result.lines())
    assert "40" in text and all(p.username in text for p in demo.DEMO_PEOPLE)
    # Chinese theme names were canonicalised; no label or account was unknown to the importers.
    imported = "\n".join(result.import_lines)
    assert "does not know" not in imported and "inactive accounts" not in imported

    for person in demo.DEMO_PEOPLE:
        user = authenticate(engine, username=person.username, password=fixed_password)
        assert user is not None and user.role == person.role and user.group_no == person.group_no
    assert authenticate(engine, username="admin", password="wrong-password") is None
    with session_scope(engine) as session:
        assert session.exec(select(func.count()).select_from(User).where(User.is_active.is_(False))).one() == 0

        # Every annotator has labeling work; a response has at most one annotator per group.
        for group in (1, 2):
            for person in demo.ANNOTATORS[group]:
                user = session.exec(select(User).where(User.username == person.username)).one()
                queue = my_queue(session, user, AssignmentKind.label)
                assert queue and any(not item["done"] for item in queue)
        pairs = session.exec(
            select(Assignment.response_id, Assignment.group_no, func.count())
            .where(Assignment.kind == AssignmentKind.label)
            .group_by(Assignment.response_id, Assignment.group_no)
        ).all()
        assert pairs and all(n == 1 for _r, _g, n in pairs)
        # Labels were made by the assigned annotator of each group.
        assigned = {
            (r, g): u
            for r, g, u in session.exec(
                select(Assignment.response_id, Assignment.group_no, Assignment.user_id).where(
                    Assignment.kind == AssignmentKind.label
                )
            ).all()
        }
        labelled = session.exec(
            select(Label.response_id, Label.group_no, Label.user_id).where(Label.stage == "annotation").distinct()
        ).all()
        assert all(assigned[(r, g)] == u for r, g, u in labelled)
        # Nobody labels a case whose rubric they author.
        label_work = session.exec(
            select(Assignment.case_pk, Assignment.user_id).where(Assignment.kind == AssignmentKind.label)
        ).all()
        authors = rubric_authors(session, {case_pk for case_pk, _user in label_work})
        assert all(user_id not in authors[case_pk] for case_pk, user_id in label_work)

        submitted = session.exec(
            select(RubricVersion).where(
                RubricVersion.status == RubricStatus.submitted, RubricVersion.draft_id.is_(None)
            )
        ).one()  # plan.json's (the other one started from a demo draft: demo/drafts.py)
        author = session.get(User, submitted.author_id)
        assert author.role == "annotator"
        assert (
            session.exec(
                select(Assignment).where(
                    Assignment.kind == AssignmentKind.rubric,
                    Assignment.case_pk == submitted.case_pk,
                    Assignment.user_id == author.id,
                )
            ).first()
            is not None
        )
        # An unresolved disagreement is left for adjudication.
        finals = defaultdict(dict)
        for response_id, criterion_id, stage, group_no, met in session.exec(
            select(Label.response_id, Label.criterion_id, Label.stage, Label.group_no, Label.met)
        ).all():
            key = (response_id, criterion_id)
            if stage == "check" or (stage == "annotation" and group_no not in finals[key]):
                finals[key][group_no] = met
            elif stage == "adjudication":
                finals[key]["adj"] = met
        open_disagreements = [k for k, v in finals.items() if 1 in v and 2 in v and v[1] != v[2] and "adj" not in v]
        assert open_disagreements
        assert verify_chain(session).ok
        # The log explains every label, rubric and assignment the demo made (imports, assignments, authoring).
        replayed = verify_audit(session)
        assert replayed.ok, replayed.problems[:5]
        assert replayed.replay.labels > 0 and replayed.replay.assignments > 0
        # Checkers have adjudication work: disagreements on responses they took in, and more checked ones to take in.
        checker = users.get_user(session, username=demo.CHECKERS[1].username)
        assert review.adjudication_queue(session, checker)
        assert review.ready_for_adjudication(session, checker)


def test_random_passwords_are_printed_once_and_let_each_account_in(sqlite_engine, monkeypatch):
    monkeypatch.delenv(demo.PASSWORD_ENV, raising=False)
    result = demo.build_demo(sqlite_engine, scale="small", seed=5)
    passwords = {account.username: account.password for account in result.accounts}
    assert len(set(passwords.values())) == len(passwords)
    text = "\n".join(result.lines())
    for username, password in passwords.items():
        assert password in text
        assert authenticate(sqlite_engine, username=username, password=password) is not None


def test_demo_refuses_a_database_that_holds_cases(engine, fixed_password):
    with session_scope(engine) as session:
        make_case(session, "REAL-0001")
    with pytest.raises(ValidationFailed, match="already holds 1 cases"):
        demo.build_demo(engine, scale="small")
    with session_scope(engine, read_only=True) as session:
        assert session.exec(select(func.count()).select_from(User)).one() == 0
        assert session.exec(select(func.count()).select_from(Response)).one() == 0


def test_a_too_short_fixed_password_is_refused_before_anything_lands(sqlite_engine, monkeypatch):
    monkeypatch.setenv(demo.PASSWORD_ENV, "short")
    with pytest.raises(ValidationFailed, match="password"):
        demo.build_demo(sqlite_engine, scale="small")
    with session_scope(sqlite_engine, read_only=True) as session:
        assert session.exec(select(func.count()).select_from(User)).one() == 0
        assert session.exec(select(func.count()).select_from(Case)).one() == 0


def test_command_line_prints_logins_then_refuses_a_second_run_and_changes_nothing(
    sqlite_url, monkeypatch, capsys, fixed_password
):
    from cli.main import main
    from db.store.engine import make_engine

    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    assert main(["demo", "--scale", "small", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "check2" in out and demo.PASSWORD_ENV in out and fixed_password not in out
    engine = make_engine(sqlite_url)
    try:
        with session_scope(engine, read_only=True) as session:
            before = counts(session), session.exec(select(func.count()).select_from(Assignment)).one()
        assert main(["demo", "--scale", "small"]) == 1
        assert "already has the demo accounts" in capsys.readouterr().err
        with pytest.raises(ValidationFailed, match="nothing was changed"):
            demo.build_demo(engine, scale="small")
        with session_scope(engine, read_only=True) as session:
            after = counts(session), session.exec(select(func.count()).select_from(Assignment)).one()
        assert after == before
    finally:
        engine.dispose()


def test_command_line_builds_the_full_density_at_any_number_of_cases(sqlite_url, monkeypatch, capsys, fixed_password):
    from cli.main import main
    from db.store.engine import make_engine

    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    with pytest.raises(SystemExit) as refused:
        main(["demo", "--scale", "full", "--cases", "0"])
    assert refused.value.code == 2 and "--cases: must be at least 1, found 0" in capsys.readouterr().err
    assert main(["demo", "--scale", "full", "--cases", "6"]) == 0
    engine = make_engine(sqlite_url)
    try:
        with session_scope(engine, read_only=True) as session:
            figures = counts(session)
            per_model = session.exec(select(Response.model, func.count()).group_by(Response.model)).all()
    finally:
        engine.dispose()
    assert figures["cases"] == 6
    # the full scale's eleven models, each answering every case, both groups labeling all 30 criteria of each
    assert len(per_model) == 11 and {n for _, n in per_model} == {6}
    assert figures["labels"]["annotation"] == 6 * 11 * 30 * 2
