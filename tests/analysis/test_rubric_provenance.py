"""report.json `rubric_provenance` (docs/REFERENCE.md §3.6) against counts taken straight from the stored rows."""

from __future__ import annotations

import io
import json
import statistics

from sqlmodel import select

from analysis.report import run_report
from db import rubrics
from db.rubrics.authoring import CriterionInput, default_criterion_ids
from db.store.models import CriterionProvenance, RubricVersion
from tests.db.rubrics.test_provenance import put_draft
from tests.db.rubrics.test_rubrics import assign
from tests.support.factories import make_case, make_user

N = 30


def author_case(session, author, case, generator, changes):
    texts = [f"{case.case_id} 第{i}条：说明本病例第{i}项具体处理要点" for i in range(1, N + 1)]
    put_draft(session, case, generator=generator, texts=texts)
    offered = rubrics.offered_draft(session, author, case.id)
    final = changes(list(texts))
    version = rubrics.save_rubric_draft(
        session,
        author,
        case.id,
        [CriterionInput(cid, text) for cid, text in zip(default_criterion_ids(N), final, strict=True)],
        base_version_id=None,
        expected_lock=None,
        from_draft=offered.id,
    )
    rubrics.submit_rubric(session, author, version.id, expected_lock=version.lock_version)
    session.commit()


def test_report_json_counts_equal_the_stored_origins(session, engine, tmp_path):
    anna = make_user(session, "anna", "annotator", 1)
    bo = make_user(session, "bo", "annotator", 2)
    cases = [
        make_case(session, "CC-0001", n=0, subject_labels=["心内科"]),
        make_case(session, "CC-0002", n=0, subject_labels=["眼科"]),
        make_case(session, "CC-0003", n=0, subject_labels=["心内科"]),
    ]
    make_case(session, "CC-0004", n=N)  # an imported rubric: no draft, not in the figures
    for author, case in zip((anna, bo, anna), cases, strict=True):
        assign(session, author, case)
    session.commit()

    def edit3_delete2_add2(texts):
        for i in range(3):
            texts[i] = texts[i] + "及其剂量"
        texts[3] = "新增：询问既往是否有消化道出血病史"
        texts[4] = "新增：说明何时需要拨打急救电话"
        return texts

    def accept_all(texts):
        return texts

    def rewrite_one(texts):
        texts[10] = texts[10].replace("具体", "")
        return texts

    author_case(session, anna, cases[0], "gen-a", edit3_delete2_add2)
    author_case(session, bo, cases[1], "gen-a", accept_all)
    author_case(session, anna, cases[2], "gen-b", rewrite_one)

    path = tmp_path / "report.json"
    run_report(engine, json_path=path, stream=io.StringIO())
    section = json.loads(path.read_text(encoding="utf-8"))["rubric_provenance"]

    rows = session.exec(select(CriterionProvenance, RubricVersion).join(RubricVersion)).all()
    origins = [p.origin for p, _v in rows]
    offered = len(origins) - origins.count("written")
    kept = origins.count("drafted") + origins.count("edited")
    distances = [p.edit_distance for p, _v in rows if p.origin == "edited"]
    assert section["overall"] == {
        "n_cases": 3,
        "offered": offered,
        "drafted": origins.count("drafted"),
        "edited": origins.count("edited"),
        "written": origins.count("written"),
        "deleted": origins.count("deleted"),
        "acceptance_rate": kept / offered,
        "median_edit_distance": statistics.median(distances),
    }
    assert (section["overall"]["edited"], section["overall"]["written"], section["overall"]["deleted"]) == (4, 2, 2)
    assert section["overall"]["offered"] == 90
    assert set(section["by_generator"]) == {"gen-a", "gen-b"}
    assert section["by_generator"]["gen-b"]["edited"] == 1 and section["by_generator"]["gen-b"]["n_cases"] == 1
    assert (
        section["by_author"]["bo"]["acceptance_rate"] == 1.0
        and section["by_author"]["bo"]["median_edit_distance"] is None
    )
    assert section["by_author"]["anna"]["n_cases"] == 2
    assert sum(f["n_cases"] for f in section["by_macro_category"].values()) == 3
