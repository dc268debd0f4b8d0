"""Synthetic ClinConsensus data: a small believable demo for trying the app, and the full-scale set.

`write_demo_files` writes the data as the JSON Lines files of docs/REFERENCE.md §3 (cases, responses, labels,
judge decisions) plus `plan.json` (who is assigned what). `build_demo` creates the demo accounts (the admin
and one team of eight physicians per 2,500 cases), writes the files to a temporary folder and loads them
through the importers — the one path into the database — then hands out work through the assignment and
rubric functions, so every page has something to show.

Scales (the work plan, one state per (case, model) response, is demo/plan.py):
- ``small``: 40 Chinese cases over all 8 macro-categories, 3 difficulties and both registers; 30 with an
  approved rubric of 30 criteria, the rest waiting for one (one of them submitted for audit, two not yet handed
  out); 5 models; a finished benchmark beside work in progress: four models final on 24 approved cases (both
  groups labeled and checked all 30 criteria, every disagreement adjudicated), all five on 6 of them (one
  labeling round whose feedback is open); the fifth model's calibration sample, mostly final; every other
  response in progress (one group only, partly labeled, unchecked, checked with disagreements open, unlabeled);
  2 judges on every response of an approved case.
- ``full``: 2,500 cases × 30 criteria × 11 models, both groups labeling every decision (1.65 M annotation
  labels), mostly final: 91 % of responses final, ≈ 95 % of (response, group) pairs checked with a check label
  on every decision (≈ 3.2 M label rows in all), the rest checked with disagreements open or unchecked in one or
  both groups; 3 judges on every decision.

Labels follow a latent "truth": each (response, criterion) is met with a probability that depends
on the model (ability, consistency, strengths by kind of criterion and by macro-category) and on
the case (difficulty, case effect), so models rank differently at different thresholds and by
different judges. Each group misses the truth ~6 % of the time (≈ 88 % agreement). The text of a
response mentions exactly the case facts its model "met", so a physician reading the demo finds
the labels plausible, and longer answers score a little higher.

Same scale, seed and sizes → byte-identical files.

Demo passwords are random per installation and printed once (`DemoResult.lines()`). Set
CLINCONSENSUS_DEMO_PASSWORD to give every demo account that one password instead (automated
browser tests log in with it). The demo goes only into a database without cases and without the
demo accounts; otherwise `build_demo` refuses with ValidationFailed and changes nothing.
"""

from __future__ import annotations

import json
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from db.access import independence, users
from db.access.policies import SystemActor
from db.importers import import_file
from db.rubrics.authoring import CriterionInput, save_rubric_draft, submit_rubric
from db.rules.config import get_settings
from db.rules.enums import AssignmentKind, RubricStatus
from db.rules.errors import ValidationFailed
from db.rules.progress_report import Progress, no_progress
from db.store.engine import session_scope
from db.store.models import Assignment, Case, Response, User
from db.work.assignments import assign_labeling, assign_rubric_authoring, rubric_states
from db.work.calibration import draw_calibration_sample
from db.work.feedback import set_feedback_open
from db.work.status import counts
from demo.content import (
    ADMIN,
    ANNOTATORS as ANNOTATORS,
    CASES_PER_TEAM as CASES_PER_TEAM,
    CHECKERS as CHECKERS,
    DEMO_PEOPLE as DEMO_PEOPLE,
    JUDGES,
    DemoPerson,
    demo_people as demo_people,
    demo_team,
    team_count,
    team_of_case,
)
from demo.drafts import add_demo_drafts
from demo.files import (
    demo_case_id,
    resolve_plan,
    write_demo_files as write_demo_files,
)
from demo.rubric_quality import add_rubric_quality

PASSWORD_ENV = "CLINCONSENSUS_DEMO_PASSWORD"
DEMO_ACTOR = "demo"
#: The demo's accounts are made by the generator itself, not by a signed-in admin.
DEMO_ACCOUNTS_ACTOR = SystemActor(DEMO_ACTOR)


# Building the demo in a database ---------------------------------------------------------------


@dataclass(frozen=True)
class DemoAccount:
    username: str
    role: str
    group_no: int | None
    password: str


@dataclass
class DemoResult:
    scale: str
    seed: int
    accounts: list[DemoAccount]
    password_from_env: bool
    counts: dict[str, Any] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    judges: list[str] = field(default_factory=list)
    import_lines: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """What was created, then the demo logins with their passwords (shown this once)."""
        c = self.counts
        labels = c.get("labels", {})
        out = [
            f"ClinConsensus demo ({self.scale}, seed {self.seed}) created:",
            f"  cases: {c.get('cases', 0):,} — {c.get('approved_rubrics', 0):,} with an approved rubric "
            f"({c.get('criteria', 0):,} criteria), {c.get('waiting_rubrics', 0):,} waiting for one "
            f"({c.get('submitted_rubrics', 0):,} submitted for audit)",
            f"  responses: {c.get('responses', 0):,} from {len(self.models)} models ({', '.join(self.models)})",
            f"  labels: {labels.get('annotation', 0):,} annotation, {labels.get('check', 0):,} check, "
            f"{labels.get('adjudication', 0):,} adjudication",
            f"  judge decisions: {c.get('judge_decisions', 0):,} ({', '.join(self.judges) or 'none'})",
            f"  assignments: {c.get('rubric_assignments', 0):,} rubric authoring, "
            f"{c.get('label_assignments', 0):,} labeling",
            "",
        ]
        if self.password_from_env:
            out.append(f"Demo logins (every account uses the password in {PASSWORD_ENV}):")
        else:
            out.append("Demo logins — the passwords are shown only this once; note them now:")
        width = max([8, *(len(account.username) for account in self.accounts)])
        for account in self.accounts:
            who = account.role + (f", group {account.group_no}" if account.group_no else "")
            password = "(from " + PASSWORD_ENV + ")" if self.password_from_env else account.password
            out.append(f"  {account.username:<{width}} {who:<20} {password}")
        return out


def demo_passwords(people: Sequence[DemoPerson] = DEMO_PEOPLE) -> tuple[dict[str, str], bool]:
    """username → password of `people` (demo_people of the demo's size): CLINCONSENSUS_DEMO_PASSWORD for all when
    set, else a fresh random one each."""
    fixed = get_settings().demo_password
    if fixed:
        return {person.username: fixed for person in people}, True
    return {person.username: secrets.token_urlsafe(9) for person in people}, False


def _refuse_if_not_empty(engine: Engine, people: Sequence[DemoPerson] = DEMO_PEOPLE) -> None:
    with session_scope(engine, read_only=True) as session:
        names = [p.username for p in people]
        present = sorted(session.exec(select(User.username).where(col(User.username).in_(names))).all())
        cases = session.exec(select(func.count()).select_from(Case)).one()
    if present:
        raise ValidationFailed(
            f"demo: this database already has the demo accounts ({', '.join(present)}); nothing was changed. "
            f"Use a new DATABASE_URL to build the demo again."
        )
    if cases:
        raise ValidationFailed(
            f"demo: this database already holds {cases:,} cases; the demo is built only into an empty database. "
            f"Nothing was changed — point DATABASE_URL at a new database."
        )


def build_demo(
    engine: Engine,
    *,
    scale: str = "small",
    seed: int = 7,
    progress: Progress = no_progress,
    n_cases: int | None = None,
    n_models: int | None = None,
    n_judges: int | None = None,
    cases_per_team: int = CASES_PER_TEAM,
) -> DemoResult:
    """Create the demo accounts and load the demo data set of `scale` through the importers.

    The accounts are the admin and one team of eight physicians per started block of `cases_per_team` cases
    (content.demo_people); each team labels, checks, adjudicates and authors its own block of cases.

    Passwords are random per installation and appear only in `DemoResult.lines()`; set
    CLINCONSENSUS_DEMO_PASSWORD (at least 8 characters) to give every demo account that password.
    Refuses (ValidationFailed, nothing changed) on a database that already has cases or demo accounts.
    """

    plan = resolve_plan(scale, n_cases, n_models, n_judges)
    people = demo_people(plan.n_cases, cases_per_team)
    _refuse_if_not_empty(engine, people)
    passwords, from_env = demo_passwords(people)
    if from_env:
        users.validate_password(passwords[ADMIN.username])

    with tempfile.TemporaryDirectory(prefix="clinconsensus-demo-") as folder:
        paths = write_demo_files(
            folder,
            scale=scale,
            seed=seed,
            n_cases=plan.n_cases,
            n_models=plan.n_models,
            n_judges=plan.n_judges,
            cases_per_team=cases_per_team,
            progress=progress,
        )
        _add_accounts(engine, people, passwords)
        import_lines = _import_files(engine, paths, ["cases", "responses"], progress)
        work = json.loads(paths["plan"].read_text(encoding="utf-8"))
        # The work is handed out and the calibration sample drawn before the physicians' labels come in, as
        # in a real round; then the labels, judged by the judges.
        pk_of = _hand_out_work(engine, work)
        _draw_calibration_sample(engine, work.get("calibration"))
        judge_stems = [judge.file_stem for judge in JUDGES[: plan.n_judges]]
        import_lines += _import_files(engine, paths, ["labels", *judge_stems], progress)

    if work["submitted_rubric"]:
        _submit_rubric(engine, work["submitted_rubric"], pk_of)
    add_demo_drafts(engine, submitted=1, waiting=1)  # demo/drafts.py: LLM drafts and what authors did with them
    _open_feedback(engine, work)
    _take_half_into_adjudication(engine, plan.n_cases, cases_per_team)
    add_rubric_quality(engine)
    accounts = [DemoAccount(p.username, p.role, p.group_no, passwords[p.username]) for p in people]
    return DemoResult(
        scale=scale,
        seed=seed,
        accounts=accounts,
        password_from_env=from_env,
        counts=demo_counts(engine),
        models=work["models"],
        judges=work["judges"],
        import_lines=import_lines,
    )


def _add_accounts(engine: Engine, people: Sequence[DemoPerson], passwords: dict[str, str]) -> None:
    """Every demo person's account, with their password."""
    with session_scope(engine) as session:
        for person in people:
            users.add_user(
                session,
                username=person.username,
                role=person.role,
                group_no=person.group_no,
                password=passwords[person.username],
                display_name=person.display_name,
                actor=DEMO_ACCOUNTS_ACTOR,
            )


def _import_files(engine: Engine, paths: dict[str, Path], keys: list[str], progress: Progress) -> list[str]:
    """The files of `keys` (cases, responses, labels, a judge's file stem) through the importers, in that order;
    their summary lines."""
    import_lines: list[str] = []
    for key in keys:
        kind = key if key in ("cases", "responses", "labels") else "judge"
        summary = import_file(engine, kind, paths[key], actor=DEMO_ACTOR, progress=counting(progress, paths[key].name))
        import_lines.extend(summary.lines())
    return import_lines


#: What an importer's progress counts, by the note it gives ("lines" as it reads, "done" at the end).
COUNTED = {"lines": "lines read", "done": "records imported"}


def counting(progress: Progress, file_name: str) -> Progress:
    """`progress` with the file and what its figures count in each line ("labels.jsonl: records imported"),
    so "4,912/4,912" says of what."""

    def report(done: int, total: int | None = None, note: str = "") -> None:
        progress(done, total, f"{file_name}: {COUNTED.get(note, note)}".rstrip(": "))

    return report


def _demo_user(session: Session, username: str) -> User:
    """A demo account the generator added a moment ago: it exists."""
    user = users.get_user(session, username=username)
    if user is None:
        raise LookupError(f"the demo account {username} is missing")
    return user


def _hand_out_work(engine: Engine, work: dict) -> dict[str, int]:
    """The admin assigns rubric authoring and labeling as plan.json says, one labeling round per entry (all responses
    of its cases, or of its `models` only); returns each case's key by case id."""
    with session_scope(engine) as session:
        admin = _demo_user(session, ADMIN.username)
        for author, case_ids in work["rubric_authoring"].items():
            assign_rubric_authoring(session, actor=admin, annotators=[author], case_ids=case_ids)
        pk_of = dict(session.exec(select(Case.case_id, Case.id)).all())
        for item in work["labeling"]:
            case_pks = [pk_of[case_id] for case_id in item["case_ids"]]
            response_ids: list[int] = []
            for model in item.get("models") or [None]:
                response_ids += _responses_of(session, case_pks, model)
            assign_labeling(session, actor=admin, annotators=item["annotators"], response_ids=response_ids)
    return pk_of


def _responses_of(session: Session, case_pks: list[int], model: str | None = None) -> list[int]:
    """The responses of the cases `case_pks` (of `model` only, when given)."""
    response_ids: list[int] = []
    for start in range(0, len(case_pks), 500):
        query = select(Response.id).where(col(Response.case_pk).in_(case_pks[start : start + 500]))
        if model is not None:
            query = query.where(col(Response.model) == model)
        response_ids += [r for r in session.exec(query).all() if r is not None]
    return response_ids


def _draw_calibration_sample(engine: Engine, planned: dict | None) -> None:
    """The admin draws the planned model's calibration sample with the plan's seed and size (the draw of
    `clinconsensus assign calibration`); the plan laid its labels on the responses that draw picks."""
    if not planned:
        return
    with session_scope(engine) as session:
        admin = _demo_user(session, ADMIN.username)
        draw = draw_calibration_sample(
            session, actor=admin, model=planned["model"], n=planned["size"], seed=planned["seed"]
        )
        if sorted(draw.case_ids) != sorted(planned["case_ids"]):
            raise RuntimeError(
                f"demo: the calibration draw of {planned['model']} picked other cases than planned "
                f"({', '.join(draw.case_ids)})"
            )


def _open_feedback(engine: Engine, work: dict) -> None:
    """The admin opens the feedback of the finished round plan.json names (its annotators see where gold differed
    from their labels, and those labels are final)."""
    index = work.get("feedback_round")
    if index is None:
        return
    with session_scope(engine) as session:
        admin = _demo_user(session, ADMIN.username)
        first_case = work["labeling"][index]["case_ids"][0]
        case_pk = session.exec(select(Case.id).where(col(Case.case_id) == first_case)).one()
        round_at = session.exec(
            select(Assignment.created_at).where(
                col(Assignment.kind) == AssignmentKind.label, col(Assignment.case_pk) == case_pk
            )
        ).first()
        if round_at is None:
            raise LookupError(f"demo: no labeling round holds {first_case}")
        set_feedback_open(session, actor=admin, round_at=round_at, is_open=True)


def _submit_rubric(engine: Engine, submitted: dict, pk_of: dict[str, int]) -> None:
    """The one rubric plan.json names is drafted by its author and submitted for audit."""
    with session_scope(engine) as session:
        author = _demo_user(session, submitted["author"])
        criteria = [
            CriterionInput(c["criterion_id"], c["criterion"], tuple(c.get("tags", ()))) for c in submitted["criteria"]
        ]
        draft = save_rubric_draft(
            session,
            author,
            pk_of[submitted["case_id"]],
            criteria,
            base_version_id=None,
            expected_lock=None,
            expected_size=len(criteria),
        )
        submit_rubric(session, author, draft.id, expected_lock=draft.lock_version, expected_size=len(criteria))


def _take_half_into_adjudication(engine: Engine, n_cases: int, cases_per_team: int = CASES_PER_TEAM) -> None:
    """Each checker has taken the first half of their team's checked responses into adjudication (a queue to
    work on at once), and the other half waits to be taken in.

    What a checker may take in (`ready_for_adjudication`) is group-wide: every checker of a group sees all of the
    group's checked responses, whichever team's, and an opening is per checker. So each checker takes only
    responses of their own team's cases — the first half of those ready to them — as the physicians of one
    hospital would: every checker's queue is the size of one team's, and about half of each group's checked
    responses are taken in, each by one checker. With one team this is the first half of the whole ready list,
    as `take_into_adjudication` takes it."""
    teams = team_count(n_cases, cases_per_team)
    with session_scope(engine) as session:
        team_of_response: dict[int, int] = {}
        if teams > 1:
            team_of = {demo_case_id(i): team_of_case(i, cases_per_team).number for i in range(n_cases)}
            rows = session.exec(select(Response.id, Case.case_id).join(Case, col(Case.id) == col(Response.case_pk)))
            team_of_response = {response_id: team_of[case_id] for response_id, case_id in rows if response_id}
        for number in range(1, teams + 1):
            for person in demo_team(number).checkers.values():
                checker = _demo_user(session, person.username)
                ready = independence.ready_for_adjudication(session, checker)
                own = [r for r in ready if team_of_response.get(r, 1) == number]
                chosen = own[: (len(own) + 1) // 2]
                if chosen == ready[: len(chosen)]:
                    independence.take_into_adjudication(session, checker, limit=len(chosen))
                else:  # not at the head of the group-wide list: one opening each
                    for response_id in chosen:
                        independence.open_adjudication(session, checker, response_id)


def demo_counts(engine: Engine) -> dict[str, Any]:
    """`clinconsensus status` counts plus rubric states and assignments, for the demo summary."""

    with session_scope(engine, read_only=True) as session:
        result = counts(session)
        case_pks = session.exec(select(Case.id)).all()
        states = rubric_states(session, case_pks)
        by_kind = dict(session.exec(select(Assignment.kind, func.count()).group_by(Assignment.kind)).all())
    result["approved_rubrics"] = sum(1 for state in states.values() if state == RubricStatus.approved)
    result["waiting_rubrics"] = len(case_pks) - result["approved_rubrics"]
    result["submitted_rubrics"] = sum(1 for state in states.values() if state == RubricStatus.submitted)
    result["rubric_assignments"] = by_kind.get(AssignmentKind.rubric.value, 0)
    result["label_assignments"] = by_kind.get(AssignmentKind.label.value, 0)
    return result
