"""The words our component puts in place of Streamlit's English widget texts (ui.chrome_language)."""

from __future__ import annotations

import re

from ui.chrome_language import chrome_texts

CJK = re.compile(r"[\u4e00-\u9fff]")


def test_a_chinese_page_replaces_streamlits_fixed_strings_with_ours():
    texts = chrome_texts("zh")
    exact = dict(texts["exact"])
    assert exact["Choose an option"] == "请选择"
    assert exact["Choose options"] == "请选择（可多选）"
    assert exact["Select all"] == "全选"
    assert exact["Upload"] == "上传"
    assert dict(texts["patterns"])["Help for {label}"] == "{label}的说明"
    # Every replacement reads Chinese, and no English string is replaced twice.
    assert all(CJK.search(ours) for _, ours in texts["exact"] + texts["patterns"])
    assert len(exact) == len(texts["exact"])


def test_an_english_page_replaces_nothing_so_the_originals_come_back():
    assert chrome_texts("en") == {"exact": [], "patterns": []}


def test_every_pattern_keeps_the_widgets_label():
    for english, ours in chrome_texts("zh")["patterns"]:
        assert english.count("{label}") == 1 and ours.count("{label}") == 1, english
