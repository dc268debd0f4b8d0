"""The one place that turns the database into the frames the metric code reads.

Frames (column names are the contract of the metric and export code):
- cases:     case_pk, case_id, difficulty, task, task_labels, subject, subject_labels, user_role,
             register, macro_category, n_criteria (+ clinical_context, user_request, extra with text=True)
- criteria:  case_pk, rubric_version_id, position, criterion_id (+ text, tags with text=True) — the
             current approved rubric of each case
- responses: response_id, case_pk, case_id, model, length (+ text with text=True)
- labels:    response_id, criterion_id, stage, group_no, met, user_id (+ note with notes=True)
- judge:     judge, response_id, criterion_id, met
- users:     user_id, username, role, group_no
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from db.models import Case, Criterion, JudgeDecision, Label, Response, RubricStatus, RubricVersion, User
from db.taxonomy import get_taxonomy


@dataclass
class Frames:
    cases: pd.DataFrame
    criteria: pd.DataFrame
    responses: pd.DataFrame
    labels: pd.DataFrame
    judge: pd.DataFrame
    users: pd.DataFrame


def _read(engine: Engine, statement) -> pd.DataFrame:
    # Read-only: on SQLite a plain BEGIN, so a long report or export never holds the write lock.
    with engine.connect().execution_options(sqlite_read_only=True) as connection:
        return pd.read_sql(statement, connection)


def current_rubric_versions(engine: Engine) -> pd.DataFrame:
    """case_pk → rubric_version_id of the newest approved version."""
    newest = (select(RubricVersion.case_pk, func.max(RubricVersion.version).label("version"))
              .where(RubricVersion.status == RubricStatus.approved).group_by(RubricVersion.case_pk).subquery())
    statement = select(RubricVersion.case_pk, RubricVersion.id.label("rubric_version_id")).join(
        newest, (RubricVersion.case_pk == newest.c.case_pk) & (RubricVersion.version == newest.c.version))
    return _read(engine, statement)


def load_cases(engine: Engine, *, text: bool = False) -> pd.DataFrame:
    columns = [Case.id.label("case_pk"), Case.case_id, Case.difficulty, Case.task, Case.task_labels, Case.subject,
               Case.subject_labels, Case.user_role, Case.register_override.label("register_override")]
    if text:
        columns += [Case.clinical_context, Case.user_request, Case.extra]
    cases = _read(engine, select(*columns).order_by(Case.id))
    taxonomy = get_taxonomy()
    cases["task_labels"] = cases["task_labels"].map(_as_list)
    cases["subject_labels"] = cases["subject_labels"].map(_as_list)
    if text:
        cases["extra"] = cases["extra"].map(lambda value: _as_json(value) or {})
    cases["register"] = [taxonomy.register(role, override) for role, override
                         in zip(cases["user_role"], cases["register_override"])]
    cases["macro_category"] = cases["subject_labels"].map(taxonomy.macro_category)
    return cases.drop(columns="register_override")


def load_register_overrides(engine: Engine) -> pd.DataFrame:
    """case_pk, register_override: the optional `register` key as imported (None where absent)."""
    return _read(engine, select(Case.id.label("case_pk"), Case.register_override.label("register_override"))
                 .order_by(Case.id))


def load_criteria(engine: Engine, *, text: bool = False) -> pd.DataFrame:
    current = current_rubric_versions(engine)
    columns = [Criterion.rubric_version_id, Criterion.position, Criterion.criterion_id]
    if text:
        columns += [Criterion.text, Criterion.tags]
    criteria = _read(engine, select(*columns).join(RubricVersion, Criterion.rubric_version_id == RubricVersion.id)
                     .where(RubricVersion.status == RubricStatus.approved))
    criteria = criteria.merge(current, on="rubric_version_id", how="inner")
    if text:
        criteria["tags"] = criteria["tags"].map(_as_list)
    return criteria.sort_values(["case_pk", "position"], ignore_index=True)


def load_responses(engine: Engine, *, text: bool = False) -> pd.DataFrame:
    columns = [Response.id.label("response_id"), Response.case_pk, Case.case_id, Response.model, Response.length]
    if text:
        columns.append(Response.text)
    return _read(engine, select(*columns).join(Case, Response.case_pk == Case.id).order_by(Response.case_pk, Response.model))


def load_labels(engine: Engine, *, notes: bool = False) -> pd.DataFrame:
    columns = [Label.response_id, Label.criterion_id, Label.stage, Label.group_no, Label.met, Label.user_id]
    if notes:
        columns.append(Label.note)
    labels = _read(engine, select(*columns))
    labels["met"] = labels["met"].astype(bool)
    return labels


def load_judge(engine: Engine) -> pd.DataFrame:
    judge = _read(engine, select(JudgeDecision.judge, JudgeDecision.response_id, JudgeDecision.criterion_id,
                                 JudgeDecision.met))
    judge["met"] = judge["met"].astype(bool)
    return judge


def load_users(engine: Engine) -> pd.DataFrame:
    return _read(engine, select(User.id.label("user_id"), User.username, User.role, User.group_no))


def load_frames(engine: Engine, *, text: bool = False, notes: bool = False) -> Frames:
    cases = load_cases(engine, text=text)
    criteria = load_criteria(engine, text=text)
    cases["n_criteria"] = cases["case_pk"].map(criteria.groupby("case_pk").size()).fillna(0).astype(int)
    return Frames(cases=cases, criteria=criteria, responses=load_responses(engine, text=text),
                  labels=load_labels(engine, notes=notes), judge=load_judge(engine), users=load_users(engine))


def _as_json(value):
    if isinstance(value, str):
        import json

        return json.loads(value)
    return value


def _as_list(value) -> list:
    value = _as_json(value)
    return list(value) if value is not None else []
