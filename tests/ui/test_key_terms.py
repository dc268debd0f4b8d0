"""The key terms a criterion shares with its response (ui/key_terms.py), checked against a literal reading:
every term is a run of the criterion's word characters found in the response, no shorter than two
characters, not a framing word, listed once, longest first; and the workbench sends them per item."""

from __future__ import annotations

import re

from ui.key_terms import FRAME_WORDS, MAX_TERM, key_terms

RESPONSE = "建议尽快完善头颅 CT 检查，监测血压，并记录每日头痛发作的时间与持续时长。出现意识障碍时立即拨打急救电话。"


def test_terms_are_what_criterion_and_response_share():
    terms = key_terms("推荐完善头颅 CT 平扫以排除出血", RESPONSE)
    assert terms == ("完善头颅", "CT")
    terms = key_terms("提示出现意识障碍时应立即拨打急救电话", RESPONSE)
    assert terms == ("立即拨打急救电话", "出现意识障碍时")


def test_every_term_is_a_shared_run_of_word_characters_longest_first():
    criterion = "提醒记录头痛发作的时间与持续时长，并监测血压（每日早晚各一次）"
    terms = key_terms(criterion, RESPONSE)
    assert terms and list(terms) == sorted(terms, key=len, reverse=True) and len(set(terms)) == len(terms)
    for term in terms:
        assert term in criterion and term in RESPONSE
        assert re.fullmatch(r"[0-9A-Za-z\u4e00-\u9fff]{2,}", term) and len(term) <= MAX_TERM
        assert term not in FRAME_WORDS


def test_framing_words_and_single_characters_are_not_terms():
    assert key_terms("询问是否需要", "是否需要询问") == ()
    assert key_terms("说明血", "说明血") == ()  # "血" alone is one character, "说明" frames the check
    assert key_terms("头痛", "") == ()
