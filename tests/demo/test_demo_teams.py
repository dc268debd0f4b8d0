"""The demo's people grow with its cases: one team of eight physicians per started block of cases."""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import select

from db.access.audit import verify_chain
from db.access.audit_replay import verify_audit
from db.access.users import USERNAME_PATTERN, authenticate
from db.rules.enums import AssignmentKind
from db.rules.errors import ValidationFailed
from db.store.engine import session_scope
from db.store.models import AdjudicationOpening, Assignment, Case, Response, User
from demo import generator as demo
from demo.content import CASES_PER_TEAM, demo_people, demo_team, team_count

PASSWORD = "demo-Test-pass-42"
CJK = range(0x4E00, 0xA000)
TEAM_SIZE = 10


def _lines(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _team_of(case_ids: list[str], cases_per_team: int) -> dict[str, int]:
    """case id → team number, from the order the cases were written in."""
    return {case_id: i // cases_per_team + 1 for i, case_id in enumerate(case_ids)}


def _members(team: int) -> dict[str, tuple[str, int | None]]:
    return {p.username: (p.role, p.group_no) for p in demo_team(team).people}


@pytest.fixture
def fixed_password(monkeypatch):
    monkeypatch.setenv(demo.PASSWORD_ENV, PASSWORD)
    return PASSWORD


# People --------------------------------------------------------------------------------------


def test_one_team_per_started_block_of_cases_and_team_one_is_todays_people():
    assert CASES_PER_TEAM == 2500
    assert demo_people(1) == demo_people(2500) == demo.DEMO_PEOPLE
    assert [team_count(n) for n in (1, 2500, 2501, 5000, 5001, 10_000)] == [1, 1, 2, 2, 3, 4]
    assert [team_count(n, TEAM_SIZE) for n in (1, 10, 11, 25, 30)] == [1, 1, 2, 3, 3]
    assert [p.username for p in demo_people(30)] == [
        "admin", "anno1a", "anno1b", "anno1c", "anno2a", "anno2b", "anno2c", "check1", "check2",
    ]  # fmt: skip
    assert demo.demo_people(30)[1].display_name == "王晓"

    people = demo_people(25, TEAM_SIZE)
    assert len(people) == 1 + 3 * 8 and people[:9] == demo.DEMO_PEOPLE
    assert len({p.username for p in people}) == len(people)
    assert len({p.display_name for p in people}) == len(people)
    for person in people:
        assert USERNAME_PATTERN.match(person.username), person.username
        assert any(ord(ch) in CJK for ch in person.display_name), person.display_name
    for team in (2, 3):
        members = demo_team(team)
        assert Counter((p.role, p.group_no) for p in members.people) == {
            ("annotator", 1): 3,
            ("annotator", 2): 3,
            ("checker", 1): 1,
            ("checker", 2): 1,
        }
        assert {p.username for p in members.people} == {f"{p.username}-t{team}" for p in demo.DEMO_PEOPLE[1:]}
        assert members.checkers[1].username == f"check1-t{team}"
        assert all(p.username in {q.username for q in people} for p in members.people)
    with pytest.raises(ValidationFailed, match="cases_per_team"):
        demo_people(25, 0)


# Files ---------------------------------------------------------------------------------------


def _bytes(paths: dict[str, Path]) -> dict[str, bytes]:
    return {key: path.read_bytes() for key, path in paths.items()}


def test_files_of_one_team_are_the_same_with_or_without_the_team_size(tmp_path):
    for options, n_cases in (
        ({"scale": "small"}, 40),
        ({"scale": "full", "n_cases": 30, "n_models": 3, "n_judges": 1}, 30),
    ):
        default = _bytes(demo.write_demo_files(tmp_path / "default", seed=5, **options))
        explicit = _bytes(
            demo.write_demo_files(tmp_path / "explicit", seed=5, cases_per_team=CASES_PER_TEAM, **options)
        )
        exact = _bytes(demo.write_demo_files(tmp_path / "exact", seed=5, cases_per_team=n_cases, **options))
        teams = _bytes(demo.write_demo_files(tmp_path / "teams", seed=5, cases_per_team=TEAM_SIZE, **options))
        assert default == explicit == exact
        # The cases and responses do not depend on who works on them; the labels and the plan do.
        assert teams["cases"] == default["cases"] and teams["responses"] == default["responses"]
        assert teams["labels"] != default["labels"] and teams["plan"] != default["plan"]
    with pytest.raises(ValidationFailed, match="cases_per_team"):
        demo.write_demo_files(tmp_path / "none", scale="small", cases_per_team=0)


@pytest.mark.parametrize("scale", ["small", "full"])
def test_every_label_and_every_assignment_belongs_to_the_cases_team(tmp_path, scale):
    paths = demo.write_demo_files(tmp_path, scale=scale, seed=7, n_cases=25, n_models=3, cases_per_team=TEAM_SIZE)
    team_of = _team_of([c["case_id"] for c in _lines(paths["cases"])], TEAM_SIZE)
    seen: Counter[tuple[int, str]] = Counter()
    for row in _lines(paths["labels"]):
        team = team_of[row["case_id"]]
        role, group = _members(team)[row["annotator"]]  # KeyError: someone of another team
        if row["stage"] == "adjudication":
            assert role == "checker"
        else:
            assert group == row["group"]
            assert role == ("annotator" if row["stage"] == "annotation" else "checker")
            assert row["stage"] != "check" or row["annotator"] == demo_team(team).checkers[row["group"]].username
        seen[(team, row["stage"])] += 1
    # Every team labels its cases, and checks and adjudications happen in more than one team.
    assert all(seen[(team, "annotation")] > 0 for team in (1, 2, 3))
    assert len({team for team, stage in seen if stage == "check"}) >= 2
    assert len({team for team, stage in seen if stage == "adjudication"}) >= 2

    plan = json.loads(paths["plan"].read_text(encoding="utf-8"))
    for item in plan["labeling"]:
        teams = {team_of[case_id] for case_id in item["case_ids"]}
        assert len(teams) == 1
        assert set(item["annotators"]) <= set(_members(teams.pop()))
    for author, case_ids in plan["rubric_authoring"].items():
        assert {team_of[case_id] for case_id in case_ids} == {int(author.rsplit("-t", 1)[1]) if "-t" in author else 1}
    if scale == "small":
        authoring_teams = {team_of[c] for ids in plan["rubric_authoring"].values() for c in ids}
        assert len(authoring_teams) >= 2  # the last waiting cases are left for the admin to hand out


def _labeling_per_annotator(paths: dict[str, Path]) -> Counter[str]:
    plan = json.loads(paths["plan"].read_text(encoding="utf-8"))
    work: Counter[str] = Counter()
    for item in plan["labeling"]:
        for annotator in item["annotators"]:
            work[annotator] += len(item["case_ids"])
    return work


def test_an_annotators_labeling_work_does_not_grow_with_the_number_of_teams(tmp_path):
    options = {"scale": "full", "seed": 7, "n_models": 1, "n_judges": 0, "cases_per_team": TEAM_SIZE}
    one = _labeling_per_annotator(demo.write_demo_files(tmp_path / "one", n_cases=TEAM_SIZE, **options))
    three = _labeling_per_annotator(demo.write_demo_files(tmp_path / "three", n_cases=3 * TEAM_SIZE, **options))
    assert len(one) == 6 and len(three) == 18
    assert sum(three.values()) == 3 * sum(one.values()) == 3 * 2 * TEAM_SIZE
    assert max(three.values()) <= max(one.values()) < TEAM_SIZE


# Building into a database --------------------------------------------------------------------


def test_demo_of_three_teams_builds_accounts_queues_and_adjudication_per_team(sqlite_engine, fixed_password):
    result = demo.build_demo(sqlite_engine, scale="small", seed=7, n_cases=25, cases_per_team=TEAM_SIZE)
    people = demo_people(25, TEAM_SIZE)
    assert [(a.username, a.role, a.group_no) for a in result.accounts] == [
        (p.username, p.role, p.group_no) for p in people
    ]
    text = "\n".join(result.lines())
    assert all(f"  {p.username} " in text for p in people)
    assert "does not know" not in "\n".join(result.import_lines)
    assert result.counts["users"] == len(people) == 25
    for person in people:
        user = authenticate(sqlite_engine, username=person.username, password=fixed_password)
        assert user is not None and (user.role, user.group_no) == (person.role, person.group_no)

    with session_scope(sqlite_engine, read_only=True) as session:
        name_of = dict(session.exec(select(User.id, User.username)).all())
        display = dict(session.exec(select(User.username, User.display_name)).all())
        assert display["anno1a"] == "王晓" and display["check2-t3"] == demo_team(3).checkers[2].display_name
        case_ids = sorted(session.exec(select(Case.case_id)).all())
        team_of = _team_of(case_ids, TEAM_SIZE)
        case_of_response = dict(
            session.exec(select(Response.id, Case.case_id).join(Case, Case.id == Response.case_pk)).all()
        )
        assignments = session.exec(select(Assignment.kind, Assignment.case_pk, Assignment.user_id)).all()
        case_of_pk = dict(session.exec(select(Case.id, Case.case_id)).all())
        per_user: Counter[str] = Counter()
        for kind, case_pk, user_id in assignments:
            username = name_of[user_id]
            assert username in _members(team_of[case_of_pk[case_pk]]), (kind, username)
            if kind == AssignmentKind.label:
                per_user[username] += 1
        assert set(per_user) == {p.username for p in people if p.role == "annotator"}

        openings = session.exec(select(AdjudicationOpening.user_id, AdjudicationOpening.response_id)).all()
        taken: Counter[str] = Counter()
        for user_id, response_id in openings:
            username = name_of[user_id]
            assert username in _members(team_of[case_of_response[response_id]])
            taken[username] += 1
        assert set(taken) == {p.username for p in people if p.role == "checker"}
        assert session.exec(select(func.count()).select_from(AdjudicationOpening)).one() == len(set(openings))
        assert verify_chain(session).ok
        assert verify_audit(session).ok


def test_each_checker_takes_half_of_their_teams_ready_responses(sqlite_engine, fixed_password):
    from db.access import independence

    demo.build_demo(sqlite_engine, scale="small", seed=7, n_cases=25, cases_per_team=TEAM_SIZE)
    with session_scope(sqlite_engine, read_only=True) as session:
        case_of_response = dict(
            session.exec(select(Response.id, Case.case_id).join(Case, Case.id == Response.case_pk)).all()
        )
        team_of = _team_of(sorted(set(case_of_response.values())), TEAM_SIZE)
        for group in (1, 2):
            total_ready = total_taken = 0
            for team in (1, 2, 3):
                checker = session.exec(
                    select(User).where(User.username == demo_team(team).checkers[group].username)
                ).one()
                taken = independence.opened_by(session, checker.id)
                left = [
                    r
                    for r in independence.ready_for_adjudication(session, checker)
                    if team_of[case_of_response[r]] == team
                ]
                # Half of the team's ready responses (rounded up) were taken in, the rest waits.
                assert len(taken) - len(left) in (0, 1) and taken
                total_ready += len(taken) + len(left)
                total_taken += len(taken)
            assert total_ready / 2 <= total_taken <= total_ready / 2 + 3


def test_one_team_takes_the_same_adjudication_queue_as_before(sqlite_engine, fixed_password):
    from db.access import independence

    demo.build_demo(sqlite_engine, scale="small", seed=7)
    with session_scope(sqlite_engine, read_only=True) as session:
        order = {
            response_id: (case_id, code)
            for response_id, case_id, code in session.exec(
                select(Response.id, Case.case_id, Response.code).join(Case, Case.id == Response.case_pk)
            ).all()
        }
        for person in demo.CHECKERS.values():
            checker = session.exec(select(User).where(User.username == person.username)).one()
            taken = independence.opened_by(session, checker.id)
            left = independence.ready_for_adjudication(session, checker)
            # The first half of the group's whole ready list (case order), as one team has always taken it.
            assert taken and left and len(taken) == (len(taken) + len(left) + 1) // 2
            assert max(order[r] for r in taken) < min(order[r] for r in left)


def test_command_line_demo_makes_a_team_per_block_of_cases(sqlite_url, monkeypatch, capsys, fixed_password):
    from cli.main import build_parser, main
    from db.store.engine import make_engine

    help_text = build_parser()._subparsers._group_actions[0].choices["demo"].format_help()
    assert "team of eight physicians" in help_text and "2,500" in help_text
    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    monkeypatch.setattr(demo, "build_demo", functools.partial(demo.build_demo, cases_per_team=3))
    assert main(["demo", "--scale", "full", "--cases", "7"]) == 0
    out = capsys.readouterr().out
    assert "check2-t3" in out and "anno1a-t2" in out and "check2-t4" not in out
    engine = make_engine(sqlite_url)
    try:
        with session_scope(engine, read_only=True) as session:
            users = session.exec(select(User.username)).all()
            cases = session.exec(select(func.count()).select_from(Case)).one()
    finally:
        engine.dispose()
    assert cases == 7 and len(users) == 1 + 3 * 8 and "anno2c-t3" in users
