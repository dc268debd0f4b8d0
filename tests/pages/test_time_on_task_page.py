"""The admin's progress page shows time on task: per-annotator medians and very fast saves."""

from __future__ import annotations

from sqlmodel import select

from db import counts, labeling
from db.labeling import drafts as label_drafts
from db.store.engine import session_scope
from db.store.models import Assignment, Response, User
from i18n import translate
from tests.support.apptest_helpers import app_database, open_page, signed_in  # noqa: F401
from tests.support.factories import make_case, make_response, make_user


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


def test_progress_page_lists_median_active_time_and_fast_saves(app_database):  # noqa: F811
    with session_scope(app_database) as s:
        make_user(s, "boss", "admin")
        ann = make_user(s, "g1a1", "annotator", 1)
        case = make_case(s, "CC-0001", n=30)
        for model in ("m1", "m2", "m3"):
            response = make_response(s, case, model=model, text="回答")
            s.add(Assignment(kind="label", case_pk=case.id, response_id=response.id, user_id=ann.id, group_no=1))
            counts.refresh_assignments(s, [response.id])
    # 90 s, 12 s (under a second per criterion) and 40 s of active time
    with session_scope(app_database) as s:
        ann = s.exec(select(User).where(User.username == "g1a1")).one()
        for response, active_ms in zip(s.exec(select(Response).order_by(Response.id)).all(), (90_000, 12_000, 40_000)):
            view = labeling.response_for_labeling(s, ann, response.id)
            label_drafts.save(
                s,
                ann,
                response.id,
                rubric_version_id=view.rubric_version_id,
                decisions={c.criterion_id: True for c in view.criteria},
                expected_versions={},
                active_ms=active_ms,
            )
    app = open_page(signed_in(app_database, "boss"), "admin-progress")
    assert not app.exception
    tables = [frame.value for frame in app.dataframe if t("workbench.time.col.median") in frame.value.columns]
    assert len(tables) == 1
    row = tables[0].iloc[0]
    assert row[t("workbench.time.col.user")] == "g1a1"
    assert row[t("workbench.time.col.saves")] == 3
    assert row[t("workbench.time.col.median")] == "40.0"  # median of 90, 12, 40 seconds
    assert row[t("workbench.time.col.per_criterion")] == f"{40 / 30:.1f}"
    assert row[t("workbench.time.col.fast")] == 1
    assert row[t("workbench.time.col.fast_share")] == "33.3%"
