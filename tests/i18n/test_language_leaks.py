"""Every page of every role, on the demo data, in Chinese and in English: what the reader sees is in their language.

Each page is rendered headless (AppTest) for the demo's admin, an annotator and a checker of each
group, in zh and en; `tests.support.language_leaks` collects every text shown (headings, captions,
messages, widget labels and options, metrics, table headers and cells as formatted, the workbench's
texts) and the test fails on program identifiers (`unverifiable_reasoning`), `None`, untranslated
catalog keys, rates with more than one decimal, and English sentences on a Chinese page.
"""

from __future__ import annotations

import os
import re

import pytest

import i18n
from db.store.engine import get_engine, make_engine
from demo import generator as demo
from tests.conftest import new_sqlite_url
from tests.support.apptest_helpers import _clear_caches, open_page, signed_in
from tests.support.language_leaks import Shown, leaks, shown_texts

#: The analysis pages (dashboards/) are checked by their own tests.
ANALYSIS_PAGES = {"analysis-dashboard", "analysis-criteria", "analysis-judge-errors", "analysis-physicians"}
DEMO_READERS = ("admin", "anno1a", "anno2b", "check1", "check2")


@pytest.fixture(scope="module")
def demo_database(sqlite_template, tmp_path_factory):
    """The small demo in a SQLite file the app under test uses (built once for the module)."""
    url = new_sqlite_url(sqlite_template, tmp_path_factory.mktemp("language-demo"))
    saved = {name: os.environ.get(name) for name in ("DATABASE_URL", demo.PASSWORD_ENV)}
    os.environ["DATABASE_URL"] = url
    os.environ[demo.PASSWORD_ENV] = "demo-Test-pass-42"
    _clear_caches()
    engine = make_engine(url)
    demo.build_demo(engine, scale="small", seed=7)
    _add_judge_runs(engine)
    yield engine
    engine.dispose()
    get_engine(url).dispose()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _clear_caches()


def _add_judge_runs(engine) -> None:
    """A finished and a cancelled judge run, so the judge page shows its history table with every column."""
    from db.store.engine import session_scope
    from db.work import judge_runs

    with session_scope(engine) as session:
        for status in ("finished", "cancelled"):
            run = judge_runs.create_run(
                session,
                "admin",
                judge="judge-c",
                base_url="http://127.0.0.1:9/v1",
                model="qwen",
                template="official",
                template_sha256="0" * 64,
                params={},
            )
            run.items, run.done, run.wall_seconds = 120, 120 if status == "finished" else 7, 12.3456
            session.add(run)
            session.flush()
            judge_runs.end_run(session, run.id, status)


def _own_names(engine) -> set[str]:
    """Usernames, model and judge names: names, shown as they are in every language."""
    from sqlalchemy import select

    from db.store.engine import session_scope
    from db.store.models import JudgeDecision, JudgeRun, Response, User

    with session_scope(engine, read_only=True) as session:
        names = set(session.execute(select(User.username)).scalars())
        names |= set(session.execute(select(Response.model).distinct()).scalars())
        names |= set(session.execute(select(JudgeDecision.judge).distinct()).scalars())
        for judge, model in session.execute(select(JudgeRun.judge, JudgeRun.model)):
            names |= {judge, model}
    return names | {"demo"}  # the demo generator's actor name in the audit log


def _pages_of(engine, username: str) -> list[str]:
    app = signed_in(engine, username)
    urls = {info.get("url_pathname") or "home" for info in app._registered_pages.values()}  # home is the default
    return sorted(url for url in urls if url not in ANALYSIS_PAGES)


def test_the_detector_finds_each_kind_of_leak():
    wrong = [
        Shown("table header", "pooled_mf1"),
        Shown("caption", "标签：unverifiable_reasoning"),
        Shown("table cell 专家组", "None"),
        Shown("caption", "review.audit_log.title"),
        Shown("table cell 完成率", "68.421053", rate=True),
        Shown("caption", "一致率 85.25%"),
        Shown("caption", "The groups do not disagree here"),
        Shown("multiselect option", "responses"),
        Shown("selectbox option", "submitted"),
        Shown("table cell 创建时间", "2026-12-03T06:45:00+00:00"),
        Shown("selectbox placeholder", "Choose an option"),  # Streamlit's own, where the page gives none
    ]
    fine = [
        Shown("table cell 完成率", "68.4%", rate=True),
        Shown("error", "字段 `case_id` 缺失"),
        Shown("caption", "上传 JSON Lines 文件（UTF-8）"),
        Shown("selectbox option", "CC-0004 · 回答 R3E322F0C95 · model-alpha"),
        Shown("selectbox option", "anno1a"),
        Shown("table cell 创建时间", "2026-12-03 14:45"),
    ]
    assert [item.text for item in wrong if not leaks([item], "zh")] == []
    assert [item.text for item in fine if leaks([item], "zh", data={"anno1a"})] == []
    # In English, English is what the reader wants; a stored code is still not a name.
    assert leaks([Shown("caption", "The groups do not disagree here")], "en") == []
    assert leaks([Shown("selectbox option", "unverifiable_reasoning")], "en")
    assert leaks([Shown("multiselect option", "low")], "en")  # the difficulty's name is "Low"


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
@pytest.mark.parametrize("username", DEMO_READERS)
def test_every_page_speaks_the_readers_language(demo_database, username, lang):
    pages = _pages_of(demo_database, username)
    assert "home" in pages and len(pages) >= 3
    problems = []
    for url_path in pages:
        app = open_page(signed_in(demo_database, username, lang=lang), url_path)
        assert not app.exception, (url_path, [e.value for e in app.exception])
        shown = shown_texts(app)
        assert len(shown) >= 5, url_path  # the page rendered something to check
        problems += [f"{url_path}: {problem}" for problem in leaks(shown, lang, data=_own_names(demo_database))]
    assert sorted(set(problems)) == [], "\n".join(sorted(set(problems)))


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_the_new_model_page_speaks_the_readers_language_for_every_model(demo_database, lang):
    """Each model's pipeline (judges and their macro-F1, the sample, the calibrated score), not only the first's."""
    app = open_page(signed_in(demo_database, "admin", lang=lang), "admin-new-model")
    models = list(app.selectbox(key="new_model_pick").options)
    assert len(models) >= 2
    problems, judge_tables = [], 0
    for model in models:
        app.selectbox(key="new_model_pick").set_value(model).run()
        assert not app.exception, (model, [e.value for e in app.exception])
        found = leaks(shown_texts(app), lang, data=_own_names(demo_database))
        mf1 = i18n.translate("new_model.col.mf1_gold", lang)
        for frame in (f.value for f in app.dataframe if mf1 in f.value.columns):
            judge_tables += 1
            # macro-F1 is a score between 0 and 1, written as the dashboard writes it (0.512), never a percentage
            assert all(re.fullmatch(r"\d\.\d{3}|—", str(v)) for v in frame[mf1]), (model, list(frame[mf1]))
        problems += [f"admin-new-model {model}: {problem}" for problem in found]
    assert judge_tables >= 1  # the judges' table was read, not only the page's top
    assert sorted(set(problems)) == [], "\n".join(sorted(set(problems)))
