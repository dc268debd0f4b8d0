"""Labels that count (docs/REFERENCE.md §4): only labels made on the case's current rubric count, everywhere.

One world: three cases of four criteria, two models, labels of every stage made on rubric version 1. Case
CC-0001 then gets an approved version 2 (same criterion ids, texts changed) and group 1 relabels one of its
responses on it. Every figure a reader gives (report.json, the gold, judgements and SFT exports, `status`,
the labeling queue, the check queue, the unresolved count, the progress page) is compared with a plain
recomputation written here from the label rows and the definitions of §4, not through our functions.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import timedelta
from itertools import count

import pytest
from alembic import command
from sqlalchemy import select, text

from analysis.exports.gold import export_gold
from analysis.exports.judgements import export_judgements
from analysis.exports.sft import export_sft
from analysis.loader import load_frames
from analysis.report import build_report, report_json
from db import counts, labeling, review
from db.importers import import_file
from db.migrations.upgrade import upgrade
from db.rules.enums import RubricStatus
from db.store.engine import make_engine, session_scope, sqlite_foreign_keys_off
from db.store.migrate import alembic_config
from db.store.models import Case, Criterion, Label, Response, RubricVersion, User, utcnow
from db.work import progress as progress_queries, status
from db.work.assignments import assign_labeling
from tests.support import recount
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_label, make_response, make_rubric, make_user
from tests.support.import_samples import write_jsonl

# These tests read §4 as written (their labels carry no checks): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")

N = 4
CRITERIA = [f"c{i:02d}" for i in range(1, N + 1)]
MODELS = ("model-a", "model-b")


def _annotate(s, response, people, g1: list[bool], g2: list[bool]) -> None:
    for criterion_id, met1, met2 in zip(CRITERIA, g1, g2):
        make_label(s, response, criterion_id, met1, people["a1"])
        make_label(s, response, criterion_id, met2, people["a2"])


def _approve_version_2(s, case: Case, checker: User) -> RubricVersion:
    version = make_rubric(s, case, n=N, status=RubricStatus.submitted, version=2)
    for criterion in s.execute(select(Criterion).where(Criterion.rubric_version_id == version.id)).scalars():
        criterion.text += "（第二版改写）"
    s.flush()
    review.approve_rubric(s, checker, version.id, seen_lock_version=version.lock_version)
    return version


def build_world(engine) -> dict:
    """The world of the module docstring; returns the people's ids and the responses by (case, model)."""
    with session_scope(engine) as s:
        people = {
            "admin": make_user(s, "admin", "admin", None),
            "a1": make_user(s, "a1", "annotator", 1),
            "a2": make_user(s, "a2", "annotator", 2),
            "k1": make_user(s, "k1", "checker", 1),
            "k2": make_user(s, "k2", "checker", 2),
            "k3": make_user(s, "k3", "checker", 1),
        }
        cases = {case_id: make_case(s, case_id, n=N) for case_id in ("CC-0001", "CC-0002", "CC-0003")}
        responses = {(c, m): make_response(s, cases[c], m) for c in cases for m in MODELS}
        s.flush()
        assign_labeling(s, actor=people["admin"], annotators=["a1", "a2"])
        yes, no = True, False
        # CC-0001/model-a: a disagreement on c04, a group-1 check on c01, an adjudication on c02.
        _annotate(s, responses[("CC-0001", "model-a")], people, [yes, yes, no, yes], [yes, no, no, no])
        make_label(s, responses[("CC-0001", "model-a")], "c01", no, people["k1"], stage="check")
        make_label(s, responses[("CC-0001", "model-a")], "c02", yes, people["k3"], stage="adjudication")
        # CC-0001/model-b: both groups agree everywhere — complete on version 1, nothing once version 2 is current.
        _annotate(s, responses[("CC-0001", "model-b")], people, [yes, no, yes, yes], [yes, no, yes, yes])
        # CC-0002: complete for both models (one disagreement adjudicated).
        _annotate(s, responses[("CC-0002", "model-a")], people, [yes, yes, yes, no], [yes, yes, yes, no])
        _annotate(s, responses[("CC-0002", "model-b")], people, [no, yes, no, no], [no, yes, yes, no])
        make_label(s, responses[("CC-0002", "model-b")], "c03", yes, people["k3"], stage="adjudication")
        # CC-0003: model-a complete, model-b with an unresolved disagreement on c02.
        _annotate(s, responses[("CC-0003", "model-a")], people, [yes, yes, no, no], [yes, yes, no, no])
        _annotate(s, responses[("CC-0003", "model-b")], people, [yes, no, yes, yes], [yes, yes, yes, yes])
        make_label(s, responses[("CC-0003", "model-b")], "c01", yes, people["k2"], stage="check")

        version_2 = _approve_version_2(s, cases["CC-0001"], people["k2"])
        # Group 1 relabels CC-0001/model-a on version 2 (the rows are replaced, as a save replaces them).
        relabeled = dict(zip(CRITERIA, [no, yes, yes, no]))
        for label in s.execute(
            select(Label).where(
                Label.response_id == responses[("CC-0001", "model-a")].id,
                Label.stage == "annotation",
                Label.group_no == 1,
            )
        ).scalars():
            label.met = relabeled[label.criterion_id]
            label.rubric_version_id = version_2.id
            label.updated_at = utcnow()
        counts.refresh(s, [responses[("CC-0001", "model-a")].id])  # as every writer of labels does
        return {
            "people": {name: user.id for name, user in people.items()},
            "responses": {key: response.id for key, response in responses.items()},
        }


# The plain recomputation: rows in, the definitions of §4 applied one by one --------------------------------


def plain(s) -> dict:
    newest: dict[int, tuple[int, int]] = {}
    for case_pk, number, version_id in s.execute(
        select(RubricVersion.case_pk, RubricVersion.version, RubricVersion.id).where(
            RubricVersion.status == RubricStatus.approved
        )
    ):
        if case_pk not in newest or number > newest[case_pk][0]:
            newest[case_pk] = (number, version_id)
    current = {case_pk: version_id for case_pk, (_, version_id) in newest.items()}
    criteria = defaultdict(list)
    for version_id, criterion_id in s.execute(select(Criterion.rubric_version_id, Criterion.criterion_id)):
        criteria[version_id].append(criterion_id)
    responses = {
        rid: (case_id, case_pk, model)
        for rid, case_id, case_pk, model in s.execute(
            select(Response.id, Case.case_id, Case.id, Response.model).join(Case, Case.id == Response.case_pk)
        )
    }
    cells: dict[tuple[int, str], dict] = defaultdict(dict)
    counting = defaultdict(int)
    older = 0
    own = defaultdict(lambda: {"fresh": 0, "stale": 0})  # (response, group) -> annotation labels
    labeled_by = defaultdict(set)  # (user, group) -> responses with their counting annotation labels
    rows = s.execute(
        select(
            Label.response_id,
            Label.criterion_id,
            Label.stage,
            Label.group_no,
            Label.met,
            Label.rubric_version_id,
            Label.user_id,
        )
    ).all()
    for rid, criterion_id, stage, group_no, met, version_id, user_id in rows:
        counts = version_id is not None and version_id == current.get(responses[rid][1])
        if stage == "annotation":
            own[(rid, group_no)]["fresh" if counts else "stale"] += 1
        if not counts:
            older += 1
            continue
        counting[stage] += 1
        cells[(rid, criterion_id)][(stage, group_no)] = bool(met)
        if stage == "annotation":
            labeled_by[(user_id, group_no)].add(rid)
    gold, finals_of, unresolved = {}, {}, 0
    for (rid, criterion_id), labels in cells.items():
        finals = {}
        for g in (1, 2):
            for stage in ("check", "annotation"):
                if (stage, g) in labels:
                    finals[g] = labels[(stage, g)]
                    break
        finals_of[(rid, criterion_id)] = finals
        if ("adjudication", 0) in labels:
            gold[(rid, criterion_id)] = (labels[("adjudication", 0)], "adjudicated")
        elif len(finals) == 2 and finals[1] == finals[2]:
            gold[(rid, criterion_id)] = (finals[1], "agreement")
        elif len(finals) == 1:
            gold[(rid, criterion_id)] = (next(iter(finals.values())), "single")
        elif len(finals) == 2:
            unresolved += 1
    complete, aligned = set(), set()
    for rid, (_, case_pk, _) in responses.items():
        ids = criteria.get(current.get(case_pk), [])
        if ids and all((rid, c) in gold for c in ids):
            complete.add(rid)
        if ids and all(len(finals_of.get((rid, c), {})) == 2 for c in ids):
            aligned.add(rid)
    return dict(
        responses=responses,
        current=current,
        criteria=criteria,
        gold=gold,
        complete=complete,
        aligned=aligned,
        unresolved=unresolved,
        counting=dict(counting),
        older=older,
        own=own,
        labeled_by=labeled_by,
    )


def _state(expected: dict, rid: int, group_no: int) -> str:
    """docs/REFERENCE.md's labeling states: waiting, stale, done, partial, todo."""
    case_pk = expected["responses"][rid][1]
    version_id = expected["current"].get(case_pk)
    if version_id is None:
        return "waiting"
    labels = expected["own"][(rid, group_no)]
    if labels["stale"]:
        return "stale"
    if labels["fresh"] >= len(expected["criteria"][version_id]):
        return "done"
    return "partial" if labels["fresh"] else "todo"


# The tests --------------------------------------------------------------------------------------------------


def test_report_figures_count_only_labels_on_the_current_rubric(engine):
    build_world(engine)
    with session_scope(engine, read_only=True) as s:
        expected = plain(s)
    document = report_json(build_report(load_frames(engine), k=2, resamples=20))
    for model in MODELS:
        complete = [r for r in expected["complete"] if expected["responses"][r][2] == model]
        aligned = [r for r in expected["aligned"] if expected["responses"][r][2] == model]
        assert document["models"][model]["n_responses"] == len(complete)
        assert document["agreement"][model]["n_aligned"] == len(aligned)
    assert document["agreement_overall"]["n_aligned"] == len(expected["aligned"])
    assert document["pending"]["unresolved_disagreements"] == expected["unresolved"]
    assert document["pending"]["incomplete_responses"] == len(expected["responses"]) - len(expected["complete"])
    # The world is built so that the rule matters: CC-0001/model-b is complete on version 1 only.
    assert expected["older"] > 0 and document["models"]["model-b"]["n_responses"] == 1


def test_gold_judgements_and_sft_exports_hold_only_labels_on_the_current_rubric(engine, tmp_path):
    build_world(engine)
    with session_scope(engine, read_only=True) as s:
        expected = plain(s)
    names = expected["responses"]
    wanted_gold = {
        (names[rid][0], names[rid][2], criterion_id, met, source)
        for (rid, criterion_id), (met, source) in expected["gold"].items()
    }

    export_gold(engine, tmp_path / "gold.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "gold.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {(r["case_id"], r["model"], r["criterion_id"], r["met"], r["source"]) for r in rows} == wanted_gold

    export_judgements(engine, tmp_path / "judgements", source="gold", k=2)
    complete_cases = sorted(
        case_id
        for case_id in {name[0] for name in names.values()}
        if all(rid in expected["complete"] for rid, name in names.items() if name[0] == case_id)
    )
    lines = (tmp_path / "judgements" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["case_id"] for line in lines] == complete_cases == ["CC-0002"]

    export_sft(engine, tmp_path / "sft", dev_fraction=0.0)
    exported = set()
    for name in ("train.jsonl", "dev.jsonl"):
        path = tmp_path / "sft" / name
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                meta = json.loads(line)["meta"]
                exported.add((meta["case_id"], meta["model"], meta["criterion_id"]))
    assert exported == {(case_id, model, criterion_id) for case_id, model, criterion_id, _, _ in wanted_gold}


def test_status_and_page_counts_count_only_labels_on_the_current_rubric(engine):
    world = build_world(engine)
    ids = world["people"]
    with session_scope(engine, read_only=True) as s:
        expected = plain(s)
        users = {name: s.get(User, uid) for name, uid in ids.items()}

        labels = status.counts(s)["labels"]
        assert labels == {
            "total": sum(expected["counting"].values()),
            "annotation": expected["counting"].get("annotation", 0),
            "check": expected["counting"].get("check", 0),
            "adjudication": expected["counting"].get("adjudication", 0),
            "on_older_rubric": expected["older"],
        }

        for name, group_no in (("a1", 1), ("a2", 2)):
            queue = labeling.labeling_queue(s, users[name])
            assert {item.response_id: item.status for item in queue.items} == {
                rid: _state(expected, rid, group_no) for rid in expected["responses"]
            }
        a2_queue = {item.response_id: item.status for item in labeling.labeling_queue(s, users["a2"]).items}
        assert a2_queue[world["responses"][("CC-0001", "model-a")]] == "stale"

        queue = review.check_queue(s, users["k1"], annotator_id=ids["a1"])
        assert sorted(item.response_id for item in queue) == sorted(expected["labeled_by"][(ids["a1"], 1)])
        for item in queue:
            assert item.n_labels == expected["own"][(item.response_id, 1)]["fresh"]
        assert world["responses"][("CC-0001", "model-b")] not in {item.response_id for item in queue}

        # the admin's sidebar counts every open disagreement; a checker's only those on responses they took into
        # adjudication (none here: independence), so it stays 0 whatever the other group labeled
        assert progress_queries.unresolved_disagreement_count(s, users["admin"]) == expected["unresolved"]
        assert progress_queries.unresolved_disagreement_count(s, users["k1"]) == 0
        report = progress_queries.progress(s, actor=users["admin"])
        done = {row["username"]: row["label_done"] for row in report.people}
        assert done["a1"] == sum(_state(expected, rid, 1) == "done" for rid in expected["responses"])
        assert done["a2"] == sum(_state(expected, rid, 2) == "done" for rid in expected["responses"])
        assert report.overall["unresolved_disagreements"] == expected["unresolved"]


def test_imported_labels_are_stamped_with_the_version_current_at_import(engine, tmp_path):
    with session_scope(engine) as s:
        make_user(s, "a1", "annotator", 1)
        checker = make_user(s, "k2", "checker", 2)
        case = make_case(s, "CC-0001", n=N)
        make_response(s, case, "model-a")
        case_pk = case.id
    rows = [
        {"case_id": "CC-0001", "model": "model-a", "criterion_id": c, "met": True, "stage": "annotation",
         "group": 1, "annotator": "a1"}
        for c in CRITERIA
    ]  # fmt: skip
    import_file(engine, "labels", write_jsonl(tmp_path / "v1.jsonl", rows))
    with session_scope(engine) as s:
        version_1 = s.execute(select(RubricVersion.id).where(RubricVersion.case_pk == case_pk)).scalar_one()
        assert set(s.execute(select(Label.rubric_version_id)).scalars()) == {version_1}
        version_2 = _approve_version_2(s, s.get(Case, case_pk), s.get(User, checker.id)).id
    with session_scope(engine, read_only=True) as s:
        assert status.counts(s)["labels"]["total"] == 0
        assert status.counts(s)["labels"]["on_older_rubric"] == N
    import_file(engine, "labels", write_jsonl(tmp_path / "v2.jsonl", rows[:2]))
    with session_scope(engine, read_only=True) as s:
        stamps = dict(s.execute(select(Label.criterion_id, Label.rubric_version_id)).all())
        assert stamps == {"c01": version_2, "c02": version_2, "c03": version_1, "c04": version_1}
        assert status.counts(s)["labels"]["annotation"] == 2


# The migration's backfill ----------------------------------------------------------------------------------

_names = count()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def blank_database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'stamps.db'}"
    pg_server = request.getfixturevalue("pg_server")
    name = f"cc_stamps_{os.getpid()}_{next(_names)}"
    with pg_server.admin_engine.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    return pg_server.url(name)


def test_revision_0011_stamps_each_label_with_the_version_current_when_it_was_written(blank_database_url):
    engine = make_engine(blank_database_url)
    try:
        upgrade(engine)
        start = utcnow() - timedelta(days=30)
        with session_scope(engine) as s:
            people = {"a1": make_user(s, "a1", "annotator", 1), "a2": make_user(s, "a2", "annotator", 2)}
            case = make_case(s, "CC-0001", n=N)
            version_1 = s.execute(select(RubricVersion).where(RubricVersion.case_pk == case.id)).scalar_one()
            version_1.reviewed_at = start + timedelta(days=1)
            version_2 = make_rubric(s, case, n=N, version=2)
            version_2.reviewed_at = start + timedelta(days=10)
            draft_only = make_case(s, "CC-0002", n=N, status=RubricStatus.draft)
            response, other = make_response(s, case), make_response(s, draft_only)
            written = {"c01": start, "c02": start + timedelta(days=5), "c03": start + timedelta(days=20)}
            for criterion_id, moment in written.items():
                for name in ("a1", "a2"):
                    label = make_label(s, response, criterion_id, True, people[name])
                    label.created_at = label.updated_at = moment
            make_label(s, other, "c01", True, people["a1"])
            ids = (version_1.id, version_2.id)
        with engine.begin() as connection:
            connection.execute(text("UPDATE label SET rubric_version_id = NULL"))  # as labels were before 0011
        with engine.connect() as connection, sqlite_foreign_keys_off(connection):  # as every migration runs
            config = alembic_config()
            config.attributes["connection"] = connection
            command.downgrade(config, "0010_feedback_figures")
            connection.commit()
        upgrade(engine)
        with session_scope(engine, read_only=True) as s:
            stamps = {
                (case_id, criterion_id): version_id
                for case_id, criterion_id, version_id in s.execute(
                    select(Case.case_id, Label.criterion_id, Label.rubric_version_id)
                    .join(Response, Response.id == Label.response_id)
                    .join(Case, Case.id == Response.case_pk)
                )
            }
            # before every approval: the first approved version; between: version 1; after the second: version 2
            assert stamps == {
                ("CC-0001", "c01"): ids[0],
                ("CC-0001", "c02"): ids[0],
                ("CC-0001", "c03"): ids[1],
                ("CC-0002", "c01"): None,  # no approved version to stamp: counts nowhere
            }
            # the kept figures were rebuilt with the stamps: only the two labels on version 2 count
            labels = status.counts(s)["labels"]
            assert (labels["annotation"], labels["on_older_rubric"]) == (2, 5)
            assert review.unresolved_count(s) == 0
    finally:
        engine.dispose()


def test_approving_a_new_version_rewrites_every_kept_figure_of_the_case(engine):
    """An approval alone (no label touched) takes the old labels out of the response status, the unresolved
    count, the check queue and the assignment states, as a recount from the labels that count gives them."""
    with session_scope(engine) as s:
        admin, a1, a2 = make_user(s, "admin", "admin", None), make_user(s, "a1"), make_user(s, "a2", group_no=2)
        k1, k2 = make_user(s, "k1", "checker", 1), make_user(s, "k2", "checker", 2)
        case = make_case(s, "CC-0001", n=N)
        response = make_response(s, case)
        assign_labeling(s, actor=admin, annotators=["a1", "a2"])
        _annotate(s, response, {"a1": a1, "a2": a2}, [True] * N, [True, True, True, False])
    with session_scope(engine, read_only=True) as s:
        assert review.unresolved_count(s) == 1
        assert [item.status for item in labeling.labeling_queue(s, s.get(User, a1.id)).items] == ["done"]
        assert len(review.check_queue(s, s.get(User, k1.id), annotator_id=a1.id)) == 1
    with session_scope(engine) as s:
        _approve_version_2(s, s.get(Case, case.id), s.get(User, k2.id))
    with session_scope(engine, read_only=True) as s:
        assert review.unresolved_count(s) == 0
        assert recount.kept_status(s).empty and recount.recount_status(s).empty
        assert [item.status for item in labeling.labeling_queue(s, s.get(User, a1.id)).items] == ["stale"]
        assert review.check_queue(s, s.get(User, k1.id), annotator_id=a1.id) == []
