"""`clinconsensus report` end to end on a small database (SQLite and PostgreSQL), values checked by hand."""

from __future__ import annotations

import json

import pytest
from sklearn.metrics import f1_score

from cli.main import main
from db.rules.enums import Stage
from db.store.engine import get_engine
from db.store.models import JudgeDecision
from tests.support.basis import provisional_basis  # noqa: F401  (a fixture)
from tests.support.factories import make_case, make_label, make_response, make_user

# These tests read §4 as written (their labels carry no checks): the provisional basis, every model ranked.
pytestmark = pytest.mark.usefixtures("provisional_basis")


def populate_small_database(session) -> None:
    """Two cases (N = 3), two models, both groups; one adjudication, one check, one unresolved disagreement."""
    g1, g2 = make_user(session, "ann-1", group_no=1), make_user(session, "ann-2", group_no=2)
    checker = make_user(session, "chk-1", role="checker", group_no=1)
    referee = make_user(session, "chk-2", role="checker", group_no=2)
    case1, case2 = make_case(session, "CC-0001", n=3), make_case(session, "CC-0002", n=3, difficulty="high")
    responses = {
        "1a": make_response(session, case1, "model-a", "abcd"),
        "1b": make_response(session, case1, "model-b", "ab"),
        "2a": make_response(session, case2, "model-a", "abcdef"),
        "2b": make_response(session, case2, "model-b", "a"),
    }
    plan = {
        "1a": ([1, 1, 1], [1, 1, 1]),
        "1b": ([1, 0, 0], [1, 1, 0]),
        "2a": ([1, 1, 0], [1, 1, 0]),
        "2b": ([0, 0, 0], [0, 0, 0]),
    }
    for key, (first, second) in plan.items():
        for i, (one, two) in enumerate(zip(first, second), start=1):
            make_label(session, responses[key], f"c{i:02d}", bool(one), g1)
            make_label(session, responses[key], f"c{i:02d}", bool(two), g2)
    make_label(session, responses["1b"], "c02", False, referee, stage=Stage.adjudication)
    make_label(session, responses["2a"], "c03", True, checker, stage=Stage.check)  # group 1 final differs now
    for key, mets in (("1a", [1, 1, 1]), ("1b", [1, 0, 0])):
        for i, met in enumerate(mets, start=1):
            session.add(
                JudgeDecision(judge="jx", response_id=responses[key].id, criterion_id=f"c{i:02d}", met=bool(met))
            )
    session.commit()


@pytest.fixture
def small_database(engine, database_url, monkeypatch, session):
    populate_small_database(session)
    monkeypatch.setenv("DATABASE_URL", database_url)
    get_engine.cache_clear()
    yield database_url
    get_engine.cache_clear()


def test_report_command_writes_json_tables_and_html(small_database, tmp_path, capsys):
    json_path, out_dir = tmp_path / "report.json", tmp_path / "out"
    assert main(["report", "--k", "2", "--json", str(json_path), "--out", str(out_dir)]) == 0
    printed = capsys.readouterr().out
    assert "model-a" in printed and "pooled_mf1" in printed
    report = json.loads(json_path.read_text(encoding="utf-8"))

    assert (report["k"], report["n"]) == (2, 3)
    a, b = report["models"]["model-a"], report["models"]["model-b"]
    assert a == {
        "n_responses": 1,
        "rubric_accuracy": 1.0,
        "pass_at_k": 1.0,
        "cacs_at_k": 1.0,
        "cacs_by_k": {"1": 1.0, "2": 1.0, "3": 1.0},
        "mean_length": 4.0,
    }
    assert b["n_responses"] == 2 and b["rubric_accuracy"] == pytest.approx(1 / 6)
    assert b["pass_at_k"] == 0.0 and b["cacs_at_k"] == 0.0 and b["mean_length"] == 1.5
    assert b["cacs_by_k"]["1"] == pytest.approx(1 / 6)

    agreement = report["agreement"]["model-a"]
    assert agreement["n_aligned"] == 2
    assert agreement["case_mf1_mean"] == pytest.approx((1.0 + 0.4) / 2)
    assert agreement["case_mf1_median"] == pytest.approx(0.7)
    assert agreement["pooled_mf1"] == pytest.approx(5 / 11)
    assert agreement["annotators"] == [1, 1] and agreement["checkers"] == [1, 0]
    assert report["agreement"]["model-b"]["checkers"] == [0, 0]
    overall = f1_score([1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0], average="macro")
    assert report["agreement_overall"]["n_aligned"] == 4
    assert report["agreement_overall"]["pooled_mf1"] == pytest.approx(overall)

    judge = report["judges"]["jx"]
    assert judge["n_decisions"] == 6 and judge["mf1_group1"] == 1.0 and judge["mf1_gold"] == 1.0
    assert judge["mf1_group2"] == pytest.approx(f1_score([1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0], average="macro"))
    assert report["cross_grader"] == []
    counts = [
        a["n_responses"],
        agreement["n_aligned"],
        judge["n_decisions"],
        *agreement["annotators"],
        *agreement["checkers"],
        *report["pending"].values(),
        report["agreement_overall"]["n_aligned"],
    ]
    assert all(type(value) is int for value in counts)
    assert report["pending"] == {"unresolved_disagreements": 1, "incomplete_responses": 1, "provisional_responses": 0}
    assert report["gold_basis"] == "provisional" and report["min_responses"] == 1
    assert list(report["threshold_sensitivity"]) == []  # every default k2 exceeds N = 3
    assert report["slices"]["difficulty"] == {"high": {"model-b": 0.0}, "medium": {"model-a": 1.0, "model-b": 0.0}}
    assert report["length"]["pearson_cacs"] is not None
    assert set(report) >= {"confidence_intervals", "agreement_extra", "criterion_agreement", "low_agreement_cases"}

    for name in ("models", "agreement", "judges", "slices", "criterion_agreement", "case_mf1"):
        assert (out_dir / f"{name}.csv").stat().st_size > 0
    html = (out_dir / "report.html").read_text(encoding="utf-8")
    # plotly.js is inline (several MB), no script is fetched from the network
    assert "model-a" in html and "Plotly.newPlot" in html and len(html) > 3_000_000
    assert '<script src="http' not in html.replace(" ", "")


def test_report_with_a_judge_as_source(small_database, tmp_path):
    json_path = tmp_path / "judge.json"
    assert main(["report", "--k", "1", "--source", "judge:jx", "--json", str(json_path)]) == 0
    report = json.loads(json_path.read_text(encoding="utf-8"))
    assert report["models"]["model-a"]["n_responses"] == 1
    assert report["models"]["model-b"]["rubric_accuracy"] == pytest.approx(1 / 3)
    assert report["pending"]["incomplete_responses"] == 2


@pytest.mark.parametrize(
    "arguments, reason",
    [
        (["--k", "10"], "from 1 to 3"),
        (["--k", "0"], "from 1 to 3"),
        (["--k", "1", "--source", "judge:nobody"], "no judge decisions named 'nobody'"),
    ],
)
def test_bad_options_fail_with_one_line(small_database, tmp_path, capsys, arguments, reason):
    json_path = tmp_path / "report.json"
    assert main(["report", *arguments, "--json", str(json_path)]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("clinconsensus:")]
    assert len(errors) == 1 and reason in errors[0]  # (the other lines on stderr are progress)
    assert not json_path.exists()


def test_data_version_changes_when_labels_change(engine, session):
    from datetime import timedelta

    from db.store.data_version import data_version
    from db.store.models import Label

    populate_small_database(session)
    before = data_version(engine)
    assert data_version(engine) == before
    label = session.query(Label).filter(Label.stage == Stage.annotation).first()
    label.met = not label.met
    label.updated_at = label.updated_at + timedelta(seconds=5)
    session.commit()
    assert data_version(engine) != before


def test_fast_readers_of_the_report_frames_match_plain_queries(engine, session):
    import pandas as pd
    from sqlmodel import select

    from analysis import loader
    from db.store.models import Label

    populate_small_database(session)
    labels = loader.load_label_decisions(engine, users=True)
    assert list(labels.columns) == ["response_id", "criterion_id", "stage", "group_no", "met", "user_id"]
    plain = pd.DataFrame(
        [(r.response_id, r.criterion_id, r.stage, r.group_no, r.met, r.user_id) for r in session.exec(select(Label))],
        columns=labels.columns,
    )
    key = ["response_id", "criterion_id", "stage", "group_no"]
    assert (
        labels.sort_values(key, ignore_index=True)
        .astype(object)
        .equals(plain.sort_values(key, ignore_index=True).astype(object))
    )
    judge = loader.load_judge(engine).sort_values(["response_id", "criterion_id"], ignore_index=True)
    stored = sorted((d.judge, d.response_id, d.criterion_id, d.met) for d in session.exec(select(JudgeDecision)))
    assert list(judge.itertuples(index=False, name=None)) == sorted(stored, key=lambda row: (row[1], row[2]))
    assert judge["met"].dtype == bool and len(judge) == 6
    frames = loader.load_frames(engine)
    assert len(frames.labels) == len(plain) and list(frames.labels.columns) == list(labels.columns)
    # Equal strings are one object (a few distinct ids in millions of rows cost pointers, not strings).
    ids = labels["criterion_id"].tolist()
    first_of = {}
    for value in ids:
        assert first_of.setdefault(value, value) is value
    assert len(first_of) < len(ids)


def test_categorical_reads_hold_the_same_values_as_the_object_reads(engine, session):
    import pandas as pd

    from analysis import loader

    populate_small_database(session)
    pairs = [
        (
            loader.load_label_decisions(engine, users=True),
            loader.load_label_decisions(engine, users=True, categorical=True),
        ),
        (loader.load_judge(engine), loader.load_judge(engine, categorical=True)),
    ]
    for plain, coded in pairs:
        assert len(plain) > 0 and list(coded.columns) == list(plain.columns)
        for column in ("criterion_id", "stage", "judge"):
            if column in coded:
                assert isinstance(coded[column].dtype, pd.CategoricalDtype), column
                assert coded[column].astype(object).tolist() == plain[column].tolist(), column
        others = [column for column in plain.columns if not isinstance(coded[column].dtype, pd.CategoricalDtype)]
        assert coded[others].equals(plain[others])
    frames = loader.load_frames(engine)
    assert isinstance(frames.labels["criterion_id"].dtype, pd.CategoricalDtype)
    assert isinstance(frames.judge["judge"].dtype, pd.CategoricalDtype)


def test_packed_codes_hold_large_ids_on_both_databases(engine):
    from analysis import loader

    # 2 ** 31 / 2 ** 15: a response id past this overflowed PostgreSQL's 32-bit integers (4× the paper's scale).
    for response_id in (1, 65_537, 70_000, 30_000_000):
        packed = f"{response_id} * 64 + 2 * 16 + 1"
        codes = [("'c07'", [f"c{i:02d}" for i in range(1, 31)]), ("'judge-b'", ["judge-a", "judge-b"])]
        (column,) = loader._read_columns(
            engine, f"SELECT {loader._with_codes(packed, codes, engine.dialect.name)} AS c0", "i"
        )
        split = loader._split_codes(column, 2)
        assert split is not None
        rest, (criterion, judge) = split
        assert (int(rest[0]) >> 6, int(criterion[0]), int(judge[0])) == (response_id, 6, 1)


def test_the_judges_list_is_every_distinct_judge_on_both_databases(engine, session):
    from sqlalchemy import text

    from analysis import loader

    assert loader._distinct(engine, loader._JUDGES_SQL) == []  # no decision yet
    populate_small_database(session)
    response_ids = [row[0] for row in session.execute(text("SELECT id FROM response ORDER BY id")).all()]
    # Names whose order differs between byte order and a locale's, with a quote, in Chinese, and a prefix of another.
    names = ["judge-b", "Judge-B", "judge", "o'brien", "评审-1", "评审", "z judge", "judge-a"]
    for index, name in enumerate(names):
        for response_id in response_ids[: index % 3 + 1]:
            session.add(JudgeDecision(judge=name, response_id=response_id, criterion_id="c01", met=bool(index % 2)))
    session.commit()
    listed = loader._distinct(engine, loader._JUDGES_SQL)
    every = [row[0] for row in session.execute(text("SELECT DISTINCT judge FROM judge_decision")).all()]
    assert listed is not None and len(listed) == len(set(listed))
    assert sorted(listed) == sorted(every) and set(names) <= set(listed)


@pytest.mark.parametrize("how", ["too many values to code", "a value missing from the list"])
def test_the_fast_readers_fall_back_to_text_with_the_same_frames(engine, session, monkeypatch, how):
    from analysis import loader

    populate_small_database(session)
    coded = [
        loader.load_label_decisions(engine, users=True),
        loader.load_judge(engine),
        loader.load_label_decisions(engine, users=True, categorical=True),
    ]
    if how == "too many values to code":
        monkeypatch.setattr(loader, "MAX_CODED_VALUES", 0)
    else:
        listed = loader._distinct
        # The list read first misses a value that the rows then hold (written between the two reads).
        monkeypatch.setattr(loader, "_distinct", lambda engine, sql: (listed(engine, sql) or [])[1:])
    text = [
        loader.load_label_decisions(engine, users=True),
        loader.load_judge(engine),
        loader.load_label_decisions(engine, users=True, categorical=True),
    ]
    for before, after in zip(coded, text, strict=True):
        assert len(before) > 0
        assert before.astype(object).equals(after.astype(object))


def test_the_report_of_categorical_frames_is_the_report_of_object_frames():
    from dataclasses import replace

    from analysis.report import build_report, report_json
    from tools import metrics_reference as reference

    frames = reference.synthetic_frames(80, 5, n=30, seed=5, adjudication_share=0.5)
    as_categories = {
        "labels": frames.labels.astype({"criterion_id": "category", "stage": "category"}),
        "judge": frames.judge.astype({"criterion_id": "category", "judge": "category"}),
    }
    assert len(frames.labels) and len(frames.judge)
    plain = report_json(build_report(frames, 10, resamples=20))
    coded = report_json(build_report(replace(frames, **as_categories), 10, resamples=20))
    assert coded == plain


def test_fast_judge_reader_of_an_empty_table(engine):
    from analysis import loader

    judge = loader.load_judge(engine)
    assert judge.empty and list(judge.columns) == ["judge", "response_id", "criterion_id", "met"]


def test_report_json_text_is_the_standard_layout_with_numbers_in_the_shortest_form():
    import re

    from analysis.report import build_report, json_bytes, report_json
    from tools import metrics_reference as reference

    frames = reference.synthetic_frames(120, 6, n=30, seed=11, adjudication_share=1.0)
    document = report_json(build_report(frames, 10, resamples=20))
    text = json_bytes(document).decode("utf-8")
    standard = json.dumps(document, ensure_ascii=False, indent=2, allow_nan=False) + "\n"
    assert re.search(r"e-0\d", standard), "the data has a small p-value to spell"
    # Every value the same float (both write the shortest form that reads back exactly) ...
    assert json.loads(text) == json.loads(standard)
    # ... and the same lines, keys and order; only how a number is spelled may differ (7.8e-05 / 0.000078).
    number = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?(?=,?$)")
    lines, standard_lines = text.splitlines(), standard.splitlines()
    assert len(lines) == len(standard_lines)
    assert [number.sub("#", line) for line in lines] == [number.sub("#", line) for line in standard_lines]
    assert "NaN" not in text and "Infinity" not in text
