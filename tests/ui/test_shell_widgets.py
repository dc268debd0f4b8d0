"""Shared widgets: user text is shown as typed, never as Markdown or HTML."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from ui.widgets import WORD_JOINER, plain

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "![x](http://example.invalid/a.png)",
    "[点这里](http://example.invalid/)",
    ":red[红色] :material/home: $x^2$ **粗体** # 标题",
]


def _run(script: str) -> AppTest:
    return AppTest.from_string(script, default_timeout=30).run()


def test_show_text_renders_hostile_text_verbatim_as_plain_text():
    app = _run(
        "from ui.widgets import show_text\n"
        f"for value in {HOSTILE!r}:\n"
        "    show_text(value)\n"
        "show_text('第一行\\n第二行')\n"
    )
    assert not app.exception
    assert [element.value for element in app.text] == [*HOSTILE, "第一行\n第二行"]
    assert not app.markdown  # nothing went through a Markdown renderer


def test_show_text_of_nothing_says_empty():
    app = _run("from ui.widgets import show_text\nshow_text('  ')\nshow_text(None)\n")
    assert not app.text and len(app.caption) == 2


def test_plain_escapes_every_markdown_and_html_character():
    for value in HOSTILE:
        escaped = plain(value)
        unescaped = escaped.replace("\\", "").replace(WORD_JOINER, "")
        assert unescaped == " ".join(value.split())
        for special in "<>[]()!*#:$`_":
            assert f"{special}" not in escaped.replace(f"\\{special}", "")
    assert "http://" not in plain("see http://example.invalid").replace("\\", "")  # no bare address to autolink
    assert plain("a\nb") == "a b"  # a label stays one line
    assert plain(None) == ""


def test_case_card_shows_every_field_as_text():
    app = _run(
        "from ui.widgets import case_card\n"
        "case_card({'case_id': 'CC-<b>1</b>', 'difficulty': 'high', 'task': '鉴别诊断', 'subject': '心内科',\n"
        "           'user_role': '患者家属', 'clinical_context': '![x](http://example.invalid/a.png)',\n"
        "           'user_request': '<img src=x onerror=alert(1)>'})\n"
    )
    assert not app.exception
    values = [element.value for element in app.text]
    assert {
        "高",
        "鉴别诊断",
        "心内科",
        "患者家属",
        "![x](http://example.invalid/a.png)",
        "<img src=x onerror=alert(1)>",
    } <= set(values)
    heading = app.markdown[0].value
    assert "<b>" not in heading.replace("\\<b\\>", "") and "CC" in heading


def test_progress_bar_states_done_and_total():
    app = _run("from ui.widgets import progress_bar\nprogress_bar(3, 4)\nprogress_bar(0, 0)\n")
    assert [p.value for p in app.get("progress")] == [75, 0]


def test_an_english_page_names_the_category_beside_the_cases_own_specialty_and_asker(monkeypatch):
    import json

    from db.rules.taxonomy import DEFAULT_TAXONOMY_FILE
    from ui import widgets

    taxonomy = json.loads(DEFAULT_TAXONOMY_FILE.read_text("utf-8"))
    neurology = next(m for m in taxonomy["macro_categories"] if "神经内科" in m["specialties"])
    lay = next(v for v in taxonomy["register"]["values"] if v["id"] == "lay")
    professional = next(v for v in taxonomy["register"]["values"] if v["id"] == "professional")

    monkeypatch.setattr(widgets, "lang", lambda: "en")
    assert widgets.subject_text("神经内科") == f"神经内科 ({neurology['en']})"
    assert widgets.asker_text("患者家属") == f"患者家属 ({lay['en']})"
    assert widgets.asker_text("社区护士") == f"社区护士 ({professional['en']})"  # 护士 is a professional word
    assert widgets.subject_text("某个未列出的科室") == "某个未列出的科室"  # no category to name
    assert widgets.subject_text(None) == widgets.asker_text("") == "—"
    monkeypatch.setattr(widgets, "lang", lambda: "zh")
    assert widgets.subject_text("神经内科") == "神经内科" and widgets.asker_text("患者家属") == "患者家属"
