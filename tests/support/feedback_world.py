"""A small study with two labeling rounds, for the feedback tests (db/work/feedback.py, its pages, the browser)."""

from __future__ import annotations

from db.rules.enums import Stage
from db.store.engine import session_scope
from db.store.models import Response, User
from db.work.assignments import assign_labeling
from tests.support.factories import make_case, make_label, make_response, make_user

N = 3
RATIONALE = "指南推荐首选，组二判断正确"


def world(engine):
    """Round 1 (response A of CC-0001) fully labeled and adjudicated on c01; round 2 (B of CC-0002) unfinished.

    On A: ann1 says met on c01 and c03, not met on c02 (their checker corrected c02 to met);
    ann2 says not met on c01, met on c02 and c03; the adjudicator decided c01 not met.
    Gold of A is therefore c01 not met (adjudicated), c02 met (agreement), c03 met (agreement); both checkers
    confirmed the rest of their group's labels on A, so its gold is final (feedback compares with final gold).
    """
    with session_scope(engine) as s:
        people = {
            "admin": make_user(s, "admin", "admin"),
            "ann1": make_user(s, "ann1", "annotator", 1),
            "ann1b": make_user(s, "ann1b", "annotator", 1),
            "ann2": make_user(s, "ann2", "annotator", 2),
            "chk1": make_user(s, "chk1", "checker", 1),
            "chk2": make_user(s, "chk2", "checker", 2),
        }
        case = make_case(s, "CC-0001", n=N)
        a = make_response(s, case, "model-secret-a", "回答甲")
        other_case = make_case(s, "CC-0002", n=N)  # rounds that share no case open independently
        b = make_response(s, other_case, "model-secret-b", "回答乙")
        ids = {name: user.id for name, user in people.items()} | {"A": a.id, "B": b.id}
    with session_scope(engine) as s:
        admin = s.get(User, ids["admin"])
        assign_labeling(s, actor=admin, annotators=["ann1", "ann2"], response_ids=[ids["A"]])
    with session_scope(engine) as s:
        admin = s.get(User, ids["admin"])
        assign_labeling(s, actor=admin, annotators=["ann1", "ann2"], response_ids=[ids["B"]])
    with session_scope(engine) as s:
        p = {name: s.get(User, ids[name]) for name in ("ann1", "ann2", "chk1", "chk2")}
        a, b = (s.get(Response, ids[k]) for k in "AB")
        for cid, met in (("c01", True), ("c02", False), ("c03", True)):
            make_label(s, a, cid, met, p["ann1"])
        for cid, met in (("c01", False), ("c02", True), ("c03", True)):
            make_label(s, a, cid, met, p["ann2"])
        make_label(s, a, "c02", True, p["chk1"], stage=Stage.check, group_no=1)
        for cid, met in (("c01", True), ("c03", True)):  # the check confirms the rest of group 1's labels
            make_label(s, a, cid, met, p["chk1"], stage=Stage.check, group_no=1)
        for cid, met in (("c01", False), ("c02", True), ("c03", True)):
            make_label(s, a, cid, met, p["chk2"], stage=Stage.check, group_no=2)
        make_label(s, a, "c01", False, p["chk1"], stage=Stage.adjudication, note=RATIONALE)
        for cid in ("c01", "c02", "c03"):
            make_label(s, b, cid, False, p["ann1"])
        make_label(s, b, "c01", True, p["ann2"])  # group 2 has not finished B
    return ids
