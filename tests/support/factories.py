"""Small factories for tests: users, cases with rubrics, responses, labels."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, col, select

from db import counts
from db.rules.enums import NO_GROUP, RubricStatus, Stage
from db.rules.security import hash_password
from db.store.current_rubric import current_approved_version
from db.store.models import Case, Criterion, Label, Response, RubricVersion, User

DEFAULT_PASSWORD = "correct-horse-9"
_HASH_CACHE: dict[str, str] = {}


def make_user(
    session: Session,
    username: str,
    role: str = "annotator",
    group_no: int | None = 1,
    password: str = DEFAULT_PASSWORD,
    active: bool = True,
) -> User:
    if role == "admin":
        group_no = None
    if password not in _HASH_CACHE:
        _HASH_CACHE[password] = hash_password(password)
    user = User(
        username=username,
        display_name=username,
        role=role,
        group_no=group_no,
        password_hash=_HASH_CACHE[password],
        is_active=active,
    )
    session.add(user)
    session.flush()
    return user


def make_case(
    session: Session,
    case_id: str = "CC-0001",
    n: int = 30,
    status: str = RubricStatus.approved,
    author: User | None = None,
    **fields,
) -> Case:
    """A case with one rubric version of `n` criteria c01..cNN (no rubric when n == 0)."""
    values = dict(
        difficulty="medium",
        task="鉴别诊断",
        task_labels=["differential_diagnosis"],
        subject="心内科",
        subject_labels=["心内科"],
        user_role="患者家属",
        clinical_context=f"{case_id} 的临床背景",
        user_request="请问该怎么办？",
    )
    values.update(fields)
    case = Case(case_id=case_id, **values)
    session.add(case)
    session.flush()
    if n:
        make_rubric(session, case, n=n, status=status, author=author)
    return case


def make_rubric(
    session: Session,
    case: Case,
    n: int = 30,
    status: str = RubricStatus.approved,
    author: User | None = None,
    version: int = 1,
) -> RubricVersion:
    rubric = RubricVersion(case_pk=case.id, version=version, status=status, author_id=author.id if author else None)
    session.add(rubric)
    session.flush()
    for i in range(1, n + 1):
        session.add(
            Criterion(
                rubric_version_id=rubric.id,
                position=i,
                criterion_id=f"c{i:02d}",
                text=f"{case.case_id} 的第 {i} 条评分标准",
            )
        )
    session.flush()
    if status == RubricStatus.approved:
        counts.refresh_cases(session, [case.id])  # the case's current rubric changed
    return rubric


def make_response(session: Session, case: Case, model: str = "model-a", text: str = "回答内容") -> Response:
    # The code numbers the case's responses in the order made: unique within the case, the same every run
    # (a hash of the model name changed with the process and could collide).
    made = session.exec(select(func.count()).select_from(Response).where(col(Response.case_pk) == case.id)).one()
    response = Response(case_pk=case.id, model=model, text=text, length=len(text), code=f"R{case.id:05d}{made + 1:04d}")
    session.add(response)
    session.flush()
    return response


def make_label(
    session: Session,
    response: Response,
    criterion_id: str,
    met: bool,
    user: User,
    stage: str = Stage.annotation,
    group_no: int | None = None,
    note: str | None = None,
    rubric_version_id: int | None = None,
) -> Label:
    """A label made on `rubric_version_id`, by default on the current rubric of the response's case (as a save
    stamps it; `db.store.current_rubric`)."""
    group = NO_GROUP if stage == Stage.adjudication else (group_no if group_no is not None else user.group_no)
    if rubric_version_id is None:
        current = current_approved_version(session, response.case_pk)
        rubric_version_id = current.id if current is not None else None
    label = Label(
        response_id=response.id,
        criterion_id=criterion_id,
        stage=stage,
        group_no=group,
        met=met,
        user_id=user.id,
        note=note,
        rubric_version_id=rubric_version_id,
    )
    session.add(label)
    session.flush()
    counts.refresh(session, [response.id])
    return label


def log_factory_rows(session: Session, actor: str = "factory") -> None:
    """Audit entries for the labels and rubric versions the factories wrote directly, in the bulk
    form importers use, so `audit verify` replays them like imported rows."""
    from sqlmodel import select

    from db.access.audit import AuditWriter
    from db.access.audit_replay import bulk_label_row

    labels = session.exec(
        select(
            Case.case_id,
            Response.model,
            Label.criterion_id,
            Label.stage,
            Label.group_no,
            Label.met,
            User.username,
            Label.note,
        )
        .join(Response, Response.id == Label.response_id)
        .join(Case, Case.id == Response.case_pk)
        .join(User, User.id == Label.user_id)
    ).all()
    rubrics = []
    for version, case_id in session.exec(
        select(RubricVersion, Case.case_id).join(Case, Case.id == RubricVersion.case_pk)
    ):
        criteria = session.exec(
            select(Criterion).where(Criterion.rubric_version_id == version.id).order_by(Criterion.position)
        ).all()
        rubrics.append(
            {
                "case": case_id,
                "version": version.version,
                "status": version.status,
                "criteria": [{"criterion_id": c.criterion_id, "text": c.text, "tags": c.tags} for c in criteria],
            }
        )
    writer = AuditWriter(session, actor)
    # Rubrics first: a label is stamped with the rubric version current when it is written, and the replay
    # reads that version from the log's order.
    writer.record(action="import", entity="rubrics", entity_key="factory", after={"rows": rubrics})
    writer.record(
        action="import", entity="labels", entity_key="factory", after={"rows": [bulk_label_row(*row) for row in labels]}
    )
    _log_factory_accounts_and_texts(session, writer)


def _log_factory_accounts_and_texts(session: Session, writer) -> None:
    """Accounts, case records and response texts the factories wrote directly, as their writers log them."""
    from sqlmodel import select

    from db.access.audit_digest import CASE_COLUMNS, password_digest
    from db.access.audit_records import case_digests_entry, response_digests_entry

    for user in session.exec(select(User)).all():
        snapshot = {
            "role": user.role,
            "group": user.group_no,
            "active": user.is_active,
            "password": password_digest(user.password_hash),
            "identity": user.oidc_identity,
        }
        writer.record(action="create", entity="user", entity_key=user.username, after=snapshot)
    cases = session.exec(select(Case)).all()
    case_rows = [(case.case_id, {column: _case_value(case, column) for column in CASE_COLUMNS}) for case in cases]
    responses = session.exec(select(Case.case_id, Response.model, Response.text).join(Case)).all()
    for entry in (case_digests_entry("factory", case_rows), response_digests_entry("factory", responses)):
        if entry:
            writer.record(**entry)


def _case_value(case: Case, column: str):
    return case.register_override if column == "register" else getattr(case, column)
