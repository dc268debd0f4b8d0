"""Demo drafts (docs/REFERENCE.md §4.3): a deterministic in-process generator drafts the criteria of a few
cases waiting for a rubric, and their authors work on them as physicians do — accepting most, editing
some, deleting some and adding what the draft missed — then submit, so the provenance figures of the
dashboard and report.json are not empty. One more drafted case is left waiting on its author's page.
"""

from __future__ import annotations

import random

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from db.rubrics.authoring import CriterionInput, default_criterion_ids, offered_draft, save_rubric_draft, submit_rubric
from db.rules.config import RUBRIC_SIZE
from db.rules.enums import AssignmentKind
from db.store.engine import session_scope
from db.store.models import Assignment, Case, RubricVersion, User
from db.work.drafting import Drafted, store_drafts

GENERATOR = "demo-drafter"
_CHECKS = (
    "明确给出{subject}相关的初步判断",
    "说明需要立即就医的危险信号",
    "建议完善与本例相关的关键检查",
    "给出药物的具体剂量与疗程",
    "提醒用药禁忌与相互作用",
    "说明复诊或随访的时间",
    "解释检查结果异常的临床意义",
    "给出生活方式调整的具体建议",
    "说明何时需要转诊专科",
    "提示可能的鉴别诊断",
)
_ADDED = ("询问既往过敏史与用药史", "说明症状加重时拨打120", "提醒家属记录症状变化时间")


def draft_texts(case: Case, n: int = RUBRIC_SIZE) -> list[str]:
    """The generator's n criteria for a case: a fixed function of the case (its id and specialty)."""
    rng = random.Random(case.case_id)
    texts = []
    for i in range(n):
        check = _CHECKS[(i + rng.randrange(len(_CHECKS))) % len(_CHECKS)].format(subject=case.subject or "本病")
        texts.append(f"{check}（第{i + 1}点）")
    return texts


def add_demo_drafts(engine: Engine, *, submitted: int = 2, waiting: int = 1) -> int:
    """Drafts for the first cases waiting for a rubric; `submitted` of them worked on and submitted by their
    authors, `waiting` left for the author. Returns how many cases were drafted."""
    with session_scope(engine) as session:
        started = set(session.exec(select(RubricVersion.case_pk)).all())
        rows = session.exec(
            select(Case, Assignment.user_id)
            .join(Assignment, col(Assignment.case_pk) == col(Case.id))
            .where(col(Assignment.kind) == AssignmentKind.rubric)
            .order_by(col(Case.id))
        ).all()
        chosen = [(case, user_id) for case, user_id in rows if case.id not in started][: submitted + waiting]
        store_drafts(
            session,
            None,
            GENERATOR,
            "demo",
            [
                Drafted(
                    f"demo-draft-{case.case_id}",
                    case.id,
                    case.case_id,
                    True,
                    [{"criterion": text, "tags": []} for text in draft_texts(case)],
                )
                for case, _user in chosen
            ],
        )
        for number, (case, user_id) in enumerate(chosen[:submitted]):
            author = session.get_one(User, user_id)
            draft = offered_draft(session, author, case.id)
            assert draft is not None
            texts = _authored(draft.texts(), number)
            ids = default_criterion_ids(RUBRIC_SIZE)
            version = save_rubric_draft(
                session,
                author,
                case.id,
                [CriterionInput(cid, text) for cid, text in zip(ids, texts, strict=True)],
                base_version_id=None,
                expected_lock=None,
                from_draft=draft.id,
            )
            submit_rubric(session, author, version.id, expected_lock=version.lock_version)
        return len(chosen)


def _authored(drafted: list[str], number: int) -> list[str]:
    """What an author makes of a draft: 2 + number edited, 1 + number deleted and replaced by written ones."""
    texts = list(drafted)
    for i in range(2 + number):
        texts[3 * i] = texts[3 * i].replace("说明", "写明", 1).replace("给出", "列出", 1) + "，并注明依据"
    for j in range(1 + number):
        texts[-1 - j] = _ADDED[j % len(_ADDED)]
    return texts
