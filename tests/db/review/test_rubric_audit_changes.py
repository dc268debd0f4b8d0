"""A resubmitted rubric tells the checker which criteria changed since the returned version."""

from __future__ import annotations

from sqlmodel import select

from db import review
from db.rules.enums import RubricStatus
from db.store.models import Criterion
from tests.support.factories import make_case, make_rubric, make_user


def test_changed_criteria_since_the_last_return(session):
    author = make_user(session, "ann1", "annotator", 1)
    checker = make_user(session, "chk2", "checker", 2)
    case = make_case(session, "CC-0001", n=30, status=RubricStatus.returned, author=author)
    resubmitted = make_rubric(session, case, n=30, status=RubricStatus.submitted, author=author, version=2)
    for criterion in session.exec(select(Criterion).where(Criterion.rubric_version_id == resubmitted.id)).all():
        if criterion.criterion_id in ("c03", "c17"):
            criterion.text += "（已按审核意见改写）"
            session.add(criterion)
    session.flush()
    view = review.rubric_for_review(session, checker, resubmitted.id)
    assert view.changed_since_return == {"c03", "c17"}
    # a first submission has nothing to compare with
    fresh = make_case(session, "CC-0002", n=30, status=RubricStatus.submitted, author=author)
    first = session.exec(select(Criterion.rubric_version_id).where(Criterion.criterion_id == "c01")).all()[-1]
    assert fresh is not None
    assert review.rubric_for_review(session, checker, first).changed_since_return == frozenset()
