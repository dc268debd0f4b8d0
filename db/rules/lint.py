"""Rubric rules and quality lint (pure: texts in, findings out; no SQL).

The authoring page shows the findings beside each criterion while a physician writes, and the
rubric audit shows the same findings to the checker beside each criterion it audits.

Errors block submission, and are exactly `blocking_problems` (which `db.rubrics.authoring.submit_rubric` enforces):
- `empty`      a criterion with no text (one empty row is one problem, not also a short count);
- `duplicate`  the same text as an earlier criterion (ignoring case, spaces and punctuation);
- `count`      a number of written criteria other than N.
Warnings are shown but may be accepted, because each has legitimate exceptions a physician judges:
- `too_short` / `too_long`   fewer than MIN_CHARS or more than MAX_CHARS characters;
- `near_duplicate`           character n-gram TF-IDF cosine similarity ≥ NEAR_DUPLICATE_SIMILARITY
                             with another criterion (often a rewording of the same check);
- `compound`                 one criterion bundling several checks (和 / 及 / 与 / 、 / 并且 / 以及 /
                             and …), which a grader cannot mark half met. Not counted: a joining word
                             that relates two things inside one check (需与肺结核相鉴别, 与医生讨论, 与…有关,
                             不与浓茶同服), words that merely contain one (及时就医, 及以上), and lists in
                             brackets, which give examples or spell out the one thing checked
                             (危险信号（如胸闷、气促）), and lists of examples or alternatives
                             (腹泻、皮疹等; 胃溃疡、出血史或肾功能不全者), the findings of one stated
                             basis or diagnosis (判断依据：…; 诊断为X伴Y和Z), and two sides named together
                             (区分A与B, 支持与不支持);
- `vague`                    wording a grader cannot verify (全面, 准确, 适当, 相关, 等, 必要时 …); not the
                             dosing phrase 必要时每4小时重复, nor 等 as "wait" (不要等到…).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from db.rules.config import RUBRIC_SIZE

ERROR, WARNING = "error", "warning"
MIN_CHARS = 8
MAX_CHARS = 120
NEAR_DUPLICATE_SIMILARITY = 0.8

COMPOUND_MARKERS = ("并且", "以及", "和", "及", "与", "、", "并同时", "同时", "and", "as well as")
VAGUE_TERMS = (
    "全面",
    "准确",
    "完整",
    "详细",
    "清晰",
    "适当",
    "相关",
    "必要时",
    "等",
    "合理",
    "恰当",
    "酌情",
    "尽量",
    "一定程度",
    "某些",
    "一些",
    "充分",
    "appropriate",
    "appropriately",
    "relevant",
    "etc",
    "as needed",
    "if necessary",
    "adequate",
    "reasonable",
)
# Words that merely contain a marker character (及时 = promptly, 等待 = wait, 温和 = mild …).
NOT_MARKERS = (
    "参与",
    "与否",
    "给与",
    "授与",
    "及时",
    "及早",
    "涉及",
    "危及",
    "普及",
    "波及",
    "以及时",
    "来不及",
    "及以上",
    "及以下",
    "及其",
    "及格",
    "顾及",
    "提及",
    "触及",
    "温和",
    "缓和",
    "和缓",
    "饱和",
    "中和",
    "总和",
    "调和",
    "和蔼",
    "平和",
    "柔和",
    "暖和",
    "等待",
    "等级",
    "等同",
    "相等",
    "平等",
    "同等",
    "等渗",
    "等量",
    "等于",
    "中等",
    "高等",
    "初等",
    "等分",
    "同时性",
    "相关性检验",
    "等到",
    "不要等",
    "不能等",
    "别等",
    "再等",
    "全面性",  # 全面性抽搐 = generalised seizure, a clinical term
)
# A joining word that relates two things within one check, not two checks: 与X相鉴别, 与医生讨论, 与…有关.
_RELATING = re.compile(
    r"(?:与|和|同|跟)(?=[^，。；,;]{0,24}?(?:相?鉴别|区分|区别|比较|对比|沟通|交流|讨论|联系|一致|相符|相悖|矛盾|"
    r"有关|相关|无关|交替|同服|间隔|配合|结合))"
)
# Brackets give examples or spell out the one thing checked: their lists are not separate checks.
_BRACKETED = re.compile(r"（[^（）]*）|\([^()]*\)")
# The stated basis of a judgement (判断依据：…) and a diagnosis with its features (诊断为X伴Y和Z) are one statement
# each: the findings listed in them are what that one statement holds, up to the end of the sentence.
_ONE_STATEMENT = re.compile(r"(?:判断依据[:：]|诊断为)[^。；;]*")
# Two sides named together are one thing: 区分A与B, 比较A和B, 支持与不支持, 阳性与阴性.
_TWO_SIDES = re.compile(
    r"(?:区分|区别|比较|对比|权衡)[^，。；,;]{0,16}?(?:与|和)|(\w{1,4})(?:与|和|及)不\1|阳性与阴性|利与弊"
)
# 同时 joins two checks only where it opens a clause (…，同时…); elsewhere it means "at the same time, also".
_ADVERB_AT_THE_SAME_TIME = re.compile(r"(?<![，,；;并])同时")
# A list that ends in 等 gives examples (腹泻、皮疹等不良反应), one that ends in 或 alternatives (胃溃疡、出血史或
# 肾功能不全者慎用): either is one check, so its enumeration commas are not joining words.
_EXAMPLES_OR_ALTERNATIVES = re.compile(r"(?:[^，。；,;、]{1,16}、)+[^，。；,;、]{1,16}?(?:等|或)")
# 必要时 in a dosing instruction (必要时每4–6小时重复, 必要时8小时后重复) is exact, not vague.
_DOSING_AS_NEEDED = re.compile(r"必要时(?=\s*(?:每|\d|可重复))")
_LATIN_WORD = re.compile(r"[a-z]")
_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)


# Blocking problems -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """A rule a rubric breaks. `row` is a 0-based position; None for the rubric as a whole."""

    code: str  # "empty" | "duplicate" | "count"
    row: int | None
    other: int | None = None  # for duplicates: the first row with the same text
    count: int | None = None
    expected: int | None = None


def normalized_criterion(text: str) -> str:
    """The text as compared for duplicates: NFKC, case-folded, without spaces or punctuation."""
    return _NOT_WORD.sub("", unicodedata.normalize("NFKC", text or "").casefold())


def blocking_problems(texts: Sequence[str], expected: int = RUBRIC_SIZE) -> list[Problem]:
    """The problems that block submission: empty criteria, exact duplicates, a count other than N."""
    problems: list[Problem] = []
    first_row: dict[str, int] = {}
    filled = 0
    for row, text in enumerate(texts):
        key = normalized_criterion(text)
        if not (text or "").strip() or not key:
            problems.append(Problem("empty", row))
            continue
        filled += 1
        if key in first_row:
            problems.append(Problem("duplicate", row, other=first_row[key]))
        else:
            first_row[key] = row
    empty = sum(problem.code == "empty" for problem in problems)
    # An empty row is one problem: when the rows are N and only empty ones fall short, the count is not told again.
    if filled != expected and not (empty and filled + empty == expected):
        problems.append(Problem("count", None, count=filled, expected=expected))
    return problems


# Lint ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    row: int | None  # 0-based criterion position; None for the rubric as a whole
    values: dict = field(default_factory=dict)  # what the message names: other row, words, counts


@dataclass(frozen=True)
class LintReport:
    findings: list[Finding]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def blocks_submission(self) -> bool:
        return bool(self.errors)

    def for_row(self, row: int) -> list[Finding]:
        return [f for f in self.findings if f.row == row]

    def rubric_level(self) -> list[Finding]:
        return [f for f in self.findings if f.row is None]


def _found_terms(text: str, terms: Sequence[str]) -> list[str]:
    lowered = text.casefold()
    for word in NOT_MARKERS:
        lowered = lowered.replace(word, " ")
    lowered = _DOSING_AS_NEEDED.sub(" ", lowered)
    found = []
    for term in terms:
        if _LATIN_WORD.match(term):
            if re.search(rf"\b{re.escape(term)}\b", lowered):
                found.append(term)
        elif term in lowered and not any(term in longer and longer in lowered for longer in found):
            found.append(term)
    return found


def _without_brackets(text: str) -> str:
    """The text with every bracketed part (nested ones too, innermost first) blanked out."""
    while True:
        blanked = _BRACKETED.sub(" ", text)
        if blanked == text:
            return text
        text = blanked


def _joining_words_only(text: str) -> str:
    """The text with what only looks like joining words blanked: brackets, relating words, examples, alternatives."""
    text = _RELATING.sub(" ", _without_brackets(text))
    text = _ADVERB_AT_THE_SAME_TIME.sub(" ", _TWO_SIDES.sub(" ", _ONE_STATEMENT.sub(" ", text)))
    return _EXAMPLES_OR_ALTERNATIVES.sub(lambda found: found.group(0).replace("、", " "), text)


def near_duplicates(texts: Sequence[str], threshold: float = NEAR_DUPLICATE_SIMILARITY) -> list[tuple[int, int, float]]:
    """Pairs (i, j, similarity), i < j, of non-empty, not identical criteria at or above `threshold`.

    scikit-learn is imported here, where it is used: the report and exports import this module's rules
    without ever comparing criteria."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    rows = [i for i, text in enumerate(texts) if normalized_criterion(text)]
    if len(rows) < 2:
        return []
    normalized = [normalized_criterion(texts[i]) for i in rows]
    matrix = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True).fit_transform(normalized)
    similarity = cosine_similarity(matrix)
    pairs = []
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            if normalized[a] != normalized[b] and similarity[a, b] >= threshold:
                pairs.append((rows[a], rows[b], float(similarity[a, b])))
    return pairs


def lint_rubric(texts: Sequence[str], expected: int = RUBRIC_SIZE) -> LintReport:
    """Every finding for the criteria `texts` (in editor order) of a rubric of `expected` criteria."""
    findings: list[Finding] = []
    for problem in blocking_problems(texts, expected):
        values: dict[str, object] = {}
        if problem.other is not None:
            values["other"] = problem.other + 1
        if problem.code == "count":
            values = {"count": problem.count, "expected": problem.expected}
        findings.append(Finding(problem.code, ERROR, problem.row, values))
    empty_rows = {f.row for f in findings if f.code == "empty"}

    for row, raw in enumerate(texts):
        if row in empty_rows:
            continue
        text = (raw or "").strip()
        if len(text) < MIN_CHARS:
            findings.append(Finding("too_short", WARNING, row, {"chars": len(text), "min": MIN_CHARS}))
        elif len(text) > MAX_CHARS:
            findings.append(Finding("too_long", WARNING, row, {"chars": len(text), "max": MAX_CHARS}))
        compound = _found_terms(_joining_words_only(text), COMPOUND_MARKERS)
        if compound:
            findings.append(Finding("compound", WARNING, row, {"words": "、".join(compound)}))
        vague = _found_terms(text, VAGUE_TERMS)
        if vague:
            findings.append(Finding("vague", WARNING, row, {"words": "、".join(vague)}))

    for a, b, similarity in near_duplicates(texts):
        percent = round(similarity * 100)
        findings.append(Finding("near_duplicate", WARNING, a, {"other": b + 1, "percent": percent}))
        findings.append(Finding("near_duplicate", WARNING, b, {"other": a + 1, "percent": percent}))

    findings.sort(key=lambda f: (f.row is not None, f.row if f.row is not None else -1, f.severity != ERROR))
    return LintReport(findings)
