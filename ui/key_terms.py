"""The key terms of a criterion that its response also uses, for the workbench to highlight while the
criterion has the focus ("头颅 CT", "血压", "急救电话").

Chinese has no spaces to split words on, so a term is a longest run of the criterion's own characters
(letters, digits, CJK) that the response contains too, at least two characters long, and not one of the
words every criterion starts with ("说明", "是否", "建议"). Pure: text in, terms out.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: A run of word characters: CJK, Latin letters, digits (a term never spans punctuation or a space).
_RUN = re.compile(r"[0-9A-Za-z\u4e00-\u9fff]+")
#: Longer shared runs are cut here: a criterion copied into the response would mark a whole sentence.
MAX_TERM = 12
MIN_TERM = 2
#: Words of the criterion's own phrasing (what to check, not what to find): never a key term alone.
_FRAMING = """
说明 指出 提及 提到 提示 提醒 建议 推荐 询问 是否 需要 需 应 应该 应当 可以 可能 进行 给出 回答 患者
明确 告知 包括 以及 或者 并且 出现 有无 情况 相关 具体 及时 注意 根据 对于 如果 时候
"""
FRAME_WORDS = frozenset(_FRAMING.split())


def _runs(text: str) -> list[str]:
    return _RUN.findall(text or "")


def _is_frame(term: str) -> bool:
    return term in FRAME_WORDS or all(term[i : i + 2] in FRAME_WORDS for i in range(0, len(term) - 1, 2))


@lru_cache(maxsize=1024)
def key_terms(criterion: str, response: str) -> tuple[str, ...]:
    """The criterion's terms the response contains, longest first (each at most once)."""
    found: list[str] = []
    for run in _runs(criterion):
        start = 0
        while start <= len(run) - MIN_TERM:
            size = min(MAX_TERM, len(run) - start)
            while size >= MIN_TERM and run[start : start + size] not in response:
                size -= 1
            if size < MIN_TERM:
                start += 1
                continue
            term = run[start : start + size]
            if not _is_frame(term) and term not in found:
                found.append(term)
            start += size
    return tuple(sorted(found, key=len, reverse=True))
