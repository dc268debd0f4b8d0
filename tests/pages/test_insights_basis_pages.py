"""The insights pages state their gold basis (docs/REFERENCE.md §4.1): final by default, with a caption of the
responses it counts; provisional only when asked, marked as such; the judge errors on each basis against an
independent pandas count of the labels as written."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sqlmodel import Session

from db.rules.enums import Stage
from db.rules.gold import FINAL, PROVISIONAL
from db.store.models import JudgeDecision
from i18n import translate
from tests.support.apptest_helpers import open_page, signed_in
from tests.support.factories import make_case, make_label, make_response, make_user

CRITERIA = ("c01", "c02", "c03", "c04")
N_FINAL, N_PROVISIONAL = 6, 6


@pytest.fixture
def basis_data(app_database):
    """Twelve responses on which both groups agree; both checkers confirmed the first six (final), nobody checked
    the other six (provisional). The judge says met on every decision. The database, and (final, met) per
    decision as written."""
    rng = np.random.default_rng(3)
    rows = []
    with Session(app_database, expire_on_commit=False) as session:
        annotators = {g: make_user(session, f"ann-{g}", group_no=g) for g in (1, 2)}
        checkers = {g: make_user(session, f"chk-{g}", role="checker", group_no=g) for g in (1, 2)}
        make_user(session, "boss", role="admin")
        case = make_case(session, "CC-0001", n=len(CRITERIA))
        for i in range(N_FINAL + N_PROVISIONAL):
            response = make_response(session, case, f"model-{i:02d}", f"第 {i} 个回答")
            for criterion in CRITERIA:
                met = bool(rng.random() < 0.5)
                rows.append((i < N_FINAL, met))
                for g in (1, 2):
                    make_label(session, response, criterion, met, annotators[g])
                    if i < N_FINAL:
                        make_label(session, response, criterion, met, checkers[g], stage=Stage.check, group_no=g)
                session.add(JudgeDecision(judge="jx", response_id=response.id, criterion_id=criterion, met=True))
        session.commit()
    return app_database, pd.DataFrame(rows, columns=["final", "met"])


def _caption(basis: str) -> str:
    counts = {"complete": 12, "final": N_FINAL, "provisional": N_PROVISIONAL, "checked1": N_FINAL, "checked2": N_FINAL}
    return translate(f"gold_basis.counts.{basis}", "en", **{k: f"{v:,}" for k, v in counts.items()})


@pytest.mark.parametrize("path", ["analysis-criteria", "analysis-judge-errors", "analysis-physicians"])
def test_each_page_states_final_by_default_and_provisional_on_request(basis_data, path):
    app = open_page(signed_in(basis_data[0], "boss", lang="en"), path)
    assert not app.exception, [e.value for e in app.exception]
    captions = [c.value for c in app.caption]
    assert _caption(FINAL) in captions and _caption(PROVISIONAL) not in captions
    app.toggle(key="insights_provisional").set_value(True).run()
    assert not app.exception, [e.value for e in app.exception]
    captions = [c.value for c in app.caption]
    assert _caption(PROVISIONAL) in captions and _caption(FINAL) not in captions
    assert _caption(PROVISIONAL).startswith("Provisional")  # marked as such


def test_judge_errors_count_final_responses_only_unless_asked(basis_data):
    engine, rows = basis_data
    # The judge says met everywhere: its false positives are the decisions whose gold is not met.
    wanted = {FINAL: int((rows["final"] & ~rows["met"]).sum()), PROVISIONAL: int((~rows["met"]).sum())}
    assert 0 < wanted[FINAL] < wanted[PROVISIONAL]
    app = open_page(signed_in(engine, "boss", lang="en"), "analysis-judge-errors")
    assert not app.exception, [e.value for e in app.exception]
    assert translate("insights.judges.count", "en", n=str(wanted[FINAL])) in [c.value for c in app.caption]
    app.toggle(key="insights_provisional").set_value(True).run()
    assert translate("insights.judges.count", "en", n=str(wanted[PROVISIONAL])) in [c.value for c in app.caption]
