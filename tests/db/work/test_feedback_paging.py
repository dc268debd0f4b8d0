"""Feedback a page at a time: the pages together are exactly the full listing, compared with final gold
(SQLite and PostgreSQL)."""

from __future__ import annotations

import random

import pytest

from db.rules import gold
from db.rules.enums import Stage
from db.rules.errors import ValidationFailed
from db.store.engine import session_scope
from db.store.models import User
from db.work import feedback
from db.work.assignments import assign_labeling
from tests.support.factories import make_case, make_label, make_response, make_user
from tests.support.final_reading import final_responses

N_CRITERIA = 4


def study(engine) -> dict[str, int]:
    """Three cases × four responses in one round, random labels of both groups; by response, three shapes:
    both groups check every criterion and every disagreement is adjudicated (final), checks on some criteria
    and some adjudications (provisional or open), both groups check every criterion with disagreements left
    open (final only where the groups agree everywhere), the groups agree and only group 1 checks (provisional)."""
    rng = random.Random(7)
    labels = []
    with session_scope(engine) as s:
        admin = make_user(s, "admin", "admin")
        ann1, ann2 = make_user(s, "ann1", "annotator", 1), make_user(s, "ann2", "annotator", 2)
        chk1, chk2 = make_user(s, "chk1", "checker", 1), make_user(s, "chk2", "checker", 2)
        responses = []
        for case_no in (3, 1, 2):  # made out of case-id order: the listing sorts
            case = make_case(s, f"CC-{case_no:04d}", n=N_CRITERIA)
            responses += [make_response(s, case, f"model-{case_no}-{i}", f"回答 {case_no}-{i}") for i in range(4)]
        assign_labeling(s, actor=admin, annotators=["ann1", "ann2"], response_ids=[r.id for r in responses])
        for index, response in enumerate(responses):
            shape = index % 4
            for number in range(1, N_CRITERIA + 1):
                cid = f"c{number:02d}"
                met1, met2 = rng.random() < 0.5, rng.random() < 0.5
                met2 = met1 if shape == 3 else met2
                rows = [(Stage.annotation, 1, met1, ann1), (Stage.annotation, 2, met2, ann2)]
                if shape == 3:
                    rows.append((Stage.check, 1, met1, chk1))  # group 1 confirms; group 2 is never checked
                if shape in (0, 2) or (shape == 1 and rng.random() < 0.3):
                    met1 = rng.random() < 0.5
                    rows.append((Stage.check, 1, met1, chk1))
                if shape in (0, 2) or (shape == 1 and rng.random() < 0.2):
                    met2 = rng.random() < 0.5
                    rows.append((Stage.check, 2, met2, chk2))
                if (shape == 0 and met1 != met2) or (shape == 1 and rng.random() < 0.3):
                    rows.append((Stage.adjudication, None, rng.random() < 0.5, chk1))
                for stage, group_no, met, who in rows:
                    kwargs = {"stage": stage} if stage != Stage.annotation else {}
                    if stage == Stage.check:
                        kwargs["group_no"] = group_no
                    make_label(
                        s, response, cid, met, who, note="理由" if stage == Stage.adjudication else None, **kwargs
                    )
                    labels.append((response.id, cid, stage.value, group_no, met))
        ids = {"admin": admin.id, "ann1": ann1.id, "ann2": ann2.id}
    with session_scope(engine) as s:
        actor = s.get(User, ids["admin"])
        (state,) = feedback.round_states(s, actor=actor)
        feedback.set_feedback_open(s, actor=actor, round_at=state.round_at, is_open=True)
    study.labels = labels  # type: ignore[attr-defined]
    return ids


def expected(labels, group_no: int) -> tuple[set[tuple[int, str]], int, int, int, int]:
    """Read independently of db.rules.gold, with pandas: decisions of final responses (§4.1, read literally)
    where gold (the adjudication, else the agreeing groups' final label) differs from the group's annotation
    label; the group's annotation labels; those of them on responses that are not final; of those responses,
    the provisional ones (every decision has gold) and the open ones (a disagreement nobody adjudicated)."""
    import pandas as pd

    frame = pd.DataFrame(labels, columns=gold.LABEL_COLUMNS)
    frame["group_no"] = frame["group_no"].fillna(0).astype(int)
    final = final_responses(frame)
    wide = frame.pivot_table(
        index=["response_id", "criterion_id"], columns=["stage", "group_no"], values="met", aggfunc="first"
    )

    def column(stage, group):
        return wide[(stage, group)] if (stage, group) in wide.columns else pd.Series(pd.NA, index=wide.index)

    g1 = column("check", 1).combine_first(column("annotation", 1))
    g2 = column("check", 2).combine_first(column("annotation", 2))
    adjudicated = column("adjudication", 0)
    gold_met = adjudicated.combine_first(g1.where(g1 == g2))
    unresolved = (adjudicated.isna() & g1.notna() & g2.notna() & (g1 != g2)).groupby(level="response_id").any()
    mine = column("annotation", group_no).dropna()
    on_final = mine[mine.index.get_level_values("response_id").isin(final)]
    differs = on_final[on_final.astype(bool) != gold_met.reindex(on_final.index).astype(bool)]
    waiting = set(mine.index.get_level_values("response_id")) - final
    open_ = {r for r in waiting if unresolved.get(r, False)}
    return set(differs.index), len(mine), len(mine) - len(on_final), len(waiting - open_), len(open_)


def flatten(responses):
    return [
        (
            r.case.case_id,
            r.code,
            r.text,
            r.round_at,
            [
                (d.criterion_id, d.position, d.criterion_text, d.my_met, d.gold_met, d.gold_source, d.rationale)
                for d in r.decisions
            ],
        )
        for r in responses
    ]


@pytest.mark.parametrize("page_size", [1, 3, 5, 100])
def test_the_pages_together_are_the_full_listing(engine, page_size):
    ids = study(engine)
    for name, group_no in (("ann1", 1), ("ann2", 2)):
        with session_scope(engine, read_only=True) as s:
            user = s.get(User, ids[name])
            full = feedback.my_feedback(s, user)
            pages, page = [], 0
            while True:
                view = feedback.my_feedback(s, user, page=page, page_size=page_size)
                assert (view.compared, view.differing, view.awaiting_gold, view.total_responses) == (
                    full.compared,
                    full.differing,
                    full.awaiting_gold,
                    full.total_responses,
                )
                if not view.responses:
                    break
                assert len(view.responses) <= page_size
                pages.append(view.responses)
                page += 1
        assert flatten([r for chunk in pages for r in chunk]) == flatten(full.responses)
        assert len(pages) == -(-full.total_responses // page_size)
        assert full.total_responses == len(full.responses)
        keys = [(r.case.case_id, r.code) for r in full.responses]
        assert keys == sorted(keys)
        # independently: gold of every label as made, against the group's annotation label
        wanted, n_mine, n_no_gold, provisional, open_ = expected(study.labels, group_no)  # type: ignore[attr-defined]
        assert full.differing == len(wanted) > 0
        assert (full.compared, full.awaiting_gold) == (n_mine - n_no_gold, n_no_gold)
        assert n_no_gold > 0 and full.compared > 0
        assert (full.provisional_responses, full.open_responses) == (provisional, open_)
        assert provisional > 0 and open_ > 0
        shown = {(r.code, d.criterion_id) for r in full.responses for d in r.decisions}
        codes = {r.code: r for r in full.responses}
        assert len(shown) == len(wanted) and len(codes) == len(full.responses)
        assert full.total_responses == len({r for r, _ in wanted})


def test_a_page_that_does_not_exist_is_refused(engine):
    ids = study(engine)
    with session_scope(engine, read_only=True) as s:
        user = s.get(User, ids["ann1"])
        for page, size in ((-1, 5), (0, 0)):
            with pytest.raises(ValidationFailed) as refused:
                feedback.my_feedback(s, user, page=page, page_size=size)
            assert refused.value.key == "errors.feedback_page"
        assert feedback.my_feedback(s, user, page=999, page_size=5).responses == []
