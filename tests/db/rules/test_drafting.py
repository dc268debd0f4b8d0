"""Reading a drafted answer and deciding each criterion's origin (db/rules/drafting.py), against literal readings."""

from __future__ import annotations

import json
import random
from functools import cache

from db.rules.drafting import DELETED, DRAFTED, EDITED, MAX_CRITERION_CHARS, WRITTEN, edit_distance, origins, read_draft

TAGS = ("missing_emergency_trigger", "follow_up_incompleteness")


def literal_distance(a: str, b: str) -> int:
    """Levenshtein distance by its recursive definition."""

    @cache
    def d(i: int, j: int) -> int:
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    return d(len(a), len(b))


def test_edit_distance_equals_the_recursive_definition_on_random_texts():
    rng = random.Random(7)
    alphabet = "血压升高心率头痛ab"
    for _ in range(300):
        a = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        b = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        assert edit_distance(a, b) == literal_distance(a, b), (a, b)
    assert edit_distance("建议复查血常规", "建议一周后复查血常规") == 3


def test_a_clean_answer_is_kept_whole_with_known_tags_only():
    items = [{"criterion": f"第{i}条：说明具体的用药剂量与疗程", "tags": [TAGS[0], "no_such_tag"]} for i in range(5)]
    reading = read_draft("好的：\n```json\n" + json.dumps(items, ensure_ascii=False) + "\n```", 5, TAGS)
    assert reading is not None
    assert [item["criterion"] for item in reading.criteria] == [item["criterion"] for item in items]
    assert all(item["tags"] == [TAGS[0]] for item in reading.criteria)
    assert reading.dropped() == {"duplicates": 0, "beyond_n": 0, "invalid": 0, "too_long": 0, "control": 0}


def test_not_json_is_unreadable_and_an_object_is_not_a_list():
    assert read_draft("第一条：……", 30) is None
    assert read_draft('{"criterion": "x"}', 30) is None
    assert read_draft("[1, 2", 30) is None


def test_duplicates_extras_invalid_long_and_control_characters_are_counted():
    items = [
        {"criterion": "说明需要立即就医的危险信号"},
        {"criterion": "说明需要立即就医的危险信号。"},  # the same after punctuation is ignored
        {"criterion": "给出 明确的\n复诊时间\x07"},
        {"criterion": ""},
        {"tags": ["x"]},
        42,
        {"criterion": "长" * (MAX_CRITERION_CHARS + 10)},
        {"criterion": "第四条标准"},
        {"criterion": "第五条标准，超出 N 的部分"},
    ]
    reading = read_draft(json.dumps(items, ensure_ascii=False), 4, TAGS)
    assert reading is not None
    texts = [item["criterion"] for item in reading.criteria]
    assert texts == ["说明需要立即就医的危险信号", "给出 明确的 复诊时间", "长" * MAX_CRITERION_CHARS, "第四条标准"]
    assert reading.dropped() == {"duplicates": 1, "beyond_n": 1, "invalid": 3, "too_long": 1, "control": 1}


def test_fewer_than_n_are_kept_as_they_are():
    reading = read_draft(json.dumps([{"criterion": "唯一的一条标准内容"}], ensure_ascii=False), 30)
    assert reading is not None and len(reading.criteria) == 1


def test_origins_of_kept_edited_written_and_deleted_criteria():
    drafted = ["建议复查血常规", "说明出现胸痛应立即就医", "给出阿司匹林的剂量", "提醒戒烟", "说明随访时间为两周"]
    submitted = [
        "说明出现胸痛应立即就医",  # kept (moved)
        "建议一周后复查血常规",  # edited: 3 insertions
        "询问既往是否有消化道出血史",  # written
        "说明随访时间为两周",  # kept
    ]
    found = origins(submitted, drafted)
    by_row = {o.row: o for o in found if o.row is not None}
    assert (by_row[0].origin, by_row[0].draft) == (DRAFTED, 1)
    assert (by_row[1].origin, by_row[1].draft, by_row[1].distance) == (EDITED, 0, 3)
    assert by_row[2].origin == WRITTEN and by_row[2].draft is None
    assert (by_row[3].origin, by_row[3].draft) == (DRAFTED, 4)
    deleted = sorted(o.draft for o in found if o.origin == DELETED)
    assert deleted == [2, 3]
    # every drafted criterion is accounted for exactly once
    assert sorted(o.draft for o in found if o.draft is not None) == list(range(len(drafted)))


def test_a_twice_drafted_text_is_kept_once_and_without_a_draft_everything_is_written():
    assert [o.origin for o in origins(["甲乙丙丁", "甲乙丙丁"], ["甲乙丙丁"])] == [DRAFTED, WRITTEN]
    assert [o.origin for o in origins(["一", "二"], [])] == [WRITTEN, WRITTEN]
