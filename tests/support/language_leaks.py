"""What a rendered page shows, as the reader sees it, and the texts in it that are not in their language.

`shown_texts(app)` collects every text an AppTest run put on the page: headings, Markdown, captions,
messages, widget labels and options, metrics, table headers and cells (as their column format shows
them), and the texts the decision workbench component receives. `leaks(shown, lang)` lists what
a physician or admin should never read: program identifiers (`unverifiable_reasoning`), `None`,
catalog keys that were not translated, rates with more than one decimal, and, on a Chinese page,
English sentences.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

import i18n

#: Table columns that hold a technical record on purpose (the audit log's stored before/after JSON).
RECORD_COLUMNS = {"review.audit_log.col.before", "review.audit_log.col.after"}

_SNAKE = re.compile(r"(?<![\w./@:-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w.@-])")
_NONE = re.compile(r"(?<![\w-])(?:None|nan|NaN|null)(?![\w-])")
_CATALOG_KEY = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_@]+){1,}$")
_LONG_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d{2,}(?![\d])")
_ENGLISH_RUN = re.compile(r"[A-Za-z][a-z]+(?:[ ,;:'’-]+[A-Za-z][a-z]*){2,}")
#: How the database and the exports write a time (ISO 8601); pages show "2026-12-02 20:15" in the reader's zone.
_STORED_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d|\d\d:\d\d(?::\d\d)?(?:\.\d+)?(?:\+00:00|Z)\b")
_CJK = re.compile(r"[\u4e00-\u9fff]")
#: Words a Chinese page showed untranslated: a field name, a zone's id, a date pattern, a metric's code.
_ZH_UNTRANSLATED = re.compile(r"(?<![\w/])(?:subject|Asia/Shanghai|yyyy-mm-dd|YYYY-MM-DD|MF1)(?![\w/])")
#: An English count that dodges its plural ("5 response(s)") or gets it wrong ("1 warnings"); "Group 1 labels"
#: names a group, not a count.
_ENGLISH_PLURAL = re.compile(
    r"\b\d[\d,]*\s+[a-z]+\(s\)|(?<![\d.,])(?<![Gg]roup )(?<![Rr]ound )\b1\s+"
    r"(?:warnings|responses|cases|criteria|labels|models|rubrics|decisions|problems|errors|rows|files|rounds|checks|"
    r"comments)\b"
)
#: English words a Chinese page may show: names of programs, formats and standards.
_ALLOWED_ENGLISH = ("JSON Lines", "OpenAI", "Language / 语言", "语言 / Language")


@dataclass(frozen=True)
class Shown:
    where: str  # the kind of element and, for a table, the column
    text: str
    rate: bool = False  # a number shown as a share (a percentage column)


def _children(node) -> Iterator:
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            yield child
            yield from _children(child)


def _table(element, record_headers: set[str]) -> Iterator[Shown]:
    frame = element.value
    try:
        config = json.loads(element.proto.columns or "{}")
    except ValueError:
        config = {}
    for column in frame.columns:
        setting = config.get(str(column), {})
        if setting.get("hidden"):
            continue
        header = setting.get("label") or str(column)
        yield Shown("table header", header)
        if header in record_headers or str(column) in record_headers:
            continue
        fmt = (setting.get("type_config") or {}).get("format")
        for value in frame[column].tolist()[:200]:
            if isinstance(value, bool):
                continue
            if isinstance(value, float):
                if math.isnan(value):
                    yield Shown(f"table cell {header}", "None")
                    continue
                if fmt and "%" in fmt and re.fullmatch(r".*%\.\d+f.*", fmt):
                    digits = int(re.search(r"%\.(\d+)f", fmt)[1])
                    yield Shown(f"table cell {header}", re.sub(r"%\.\d+f", f"{value:.{digits}f}", fmt), True)
                elif fmt in ("percent",):
                    yield Shown(f"table cell {header}", f"{value:.0%}", True)
                else:
                    yield Shown(f"table cell {header}", repr(value), True)
                continue
            if value is None:
                yield Shown(f"table cell {header}", "None")
                continue
            if isinstance(value, (list, tuple)):
                for item in value:
                    yield Shown(f"table cell {header}", str(item))
                continue
            yield Shown(f"table cell {header}", str(value))


def _workbench(data: dict) -> Iterator[Shown]:
    for name, text in (data.get("texts") or {}).items():
        yield Shown(f"workbench text {name}", str(text))
    for name in ("meta", "text_title", "items_title"):
        yield Shown(f"workbench {name}", str(data.get(name) or ""))
    message = data.get("message") or {}
    if message.get("text"):
        yield Shown("workbench message", str(message["text"]))
    for item in data.get("items") or []:
        yield Shown("workbench item title", str(item.get("title") or ""))
        for line in item.get("lines") or []:
            yield Shown("workbench item line", str(line.get("label") or ""))
            yield Shown("workbench item line", str(line.get("value") or ""))


def shown_texts(app) -> list[Shown]:
    """Every text the page (main area and sidebar) shows after an AppTest run."""
    record_headers = {i18n.translate(key, lang) for key in RECORD_COLUMNS for lang in i18n.LANGUAGES}
    found: list[Shown] = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "text", "error", "warning", "success", "info"):
        found += [Shown(kind, str(element.value)) for element in getattr(app, kind)]
    found += [Shown("exception", str(element.value)) for element in app.exception]
    for kind in ("button", "checkbox", "toggle", "text_input", "text_area", "number_input", "date_input"):
        for element in getattr(app, kind):
            found.append(Shown(f"{kind} label", str(element.label)))
            for extra in ("help", "placeholder"):
                text = getattr(element.proto, extra, "")
                if text:
                    found.append(Shown(f"{kind} {extra}", str(text)))
    for kind in ("selectbox", "multiselect", "radio"):
        for element in getattr(app, kind):
            found.append(Shown(f"{kind} label", str(element.label)))
            found += [Shown(f"{kind} option", str(option)) for option in element.options]
            if getattr(element.proto, "help", ""):
                found.append(Shown(f"{kind} help", str(element.proto.help)))
            if kind in ("selectbox", "multiselect"):
                placeholder = element.proto.placeholder
                empty = kind == "multiselect" or not element.proto.HasField("default")
                if placeholder:
                    found.append(Shown(f"{kind} placeholder", str(placeholder)))
                elif empty:
                    # Nothing chosen and no placeholder of ours: the browser shows Streamlit's English one.
                    found.append(Shown(f"{kind} placeholder", "Choose an option"))
    for element in app.metric:
        found += [Shown("metric label", str(element.label)), Shown("metric value", str(element.value))]
    for element in app.expander:
        found.append(Shown("expander label", str(element.label)))
    for element in app.tabs:
        found.append(Shown("tab label", str(element.label)))
    for element in app.dataframe:
        found += list(_table(element, record_headers))
    for node in _children(app._tree):
        kind = getattr(node, "type", None)
        if kind == "bidi_component" and node.proto.component_name == "clinconsensus_workbench":
            found += list(_workbench(json.loads(node.proto.json)))
        elif kind == "file_uploader":
            found.append(Shown("file_uploader label", str(node.proto.label)))
            if node.proto.help:
                found.append(Shown("file_uploader help", str(node.proto.help)))
        elif kind == "progress":
            found.append(Shown("progress", str(node.proto.text)))
    return found


@lru_cache(maxsize=1)
def vocabulary_codes() -> frozenset[str]:
    """Stored codes a reader should see by their name: enum values, taxonomy ids, audit words."""
    from db.access.audit import AUDIT_ACTIONS, AUDIT_ENTITIES
    from db.rules import enums
    from db.rules.taxonomy import get_taxonomy

    codes = set(AUDIT_ACTIONS) | set(AUDIT_ENTITIES)
    for value in vars(enums).values():
        if isinstance(value, type) and issubclass(value, Enum):
            codes |= {str(member.value) for member in value if isinstance(member.value, str)}
    raw = get_taxonomy().raw
    for kind in ("capability_families", "task_themes", "macro_categories", "difficulties", "failure_tags"):
        codes |= {entry["id"] for entry in raw.get(kind, [])}
    codes |= {entry["id"] for entry in raw["register"]["values"]}
    return frozenset(code for code in codes if code and code.isascii() and code == code.lower())


def _english_sentences(text: str) -> list[str]:
    for allowed in _ALLOWED_ENGLISH:
        text = text.replace(allowed, " ")
    runs = []
    for match in _ENGLISH_RUN.finditer(text):
        words = re.findall(r"[A-Za-z]+", match.group())
        if len(words) >= 3 and sum(len(word) > 2 for word in words) >= 2:
            runs.append(match.group())
    return runs


def leaks(shown: Iterable[Shown], lang: str, data: Iterable[str] = ()) -> list[str]:
    """`where: problem: text` for each text the reader should not see in `lang`; `data` are texts that
    are people's or things' own names (usernames, model names), shown as they are."""
    keys = set(i18n.catalog())
    # A text the catalog gives in `lang` is translated, even when it reads like a code ("assignment").
    translated = {texts[lang] for texts in i18n.catalog().values()} | {"English", "中文"}
    codes = vocabulary_codes() - set(data) - translated
    own_names = set(data)
    problems = []
    for item in shown:
        text = item.text.replace("\\", "")
        if not text.strip():
            continue
        # A code span shows a field or value of a file format as typed: not a sentence to translate.
        prose = re.sub(r"`[^`]*`", " ", text)
        if text.strip() in keys or (_CATALOG_KEY.match(text.strip()) and text.count(".") >= 2):
            problems.append(f"{item.where}: catalog key: {text!r}")
        for match in _SNAKE.findall(prose):
            problems.append(f"{item.where}: identifier {match!r} in {text[:120]!r}")
        if _NONE.search(prose):
            problems.append(f"{item.where}: None in {text[:120]!r}")
        if item.rate and _LONG_DECIMAL.search(text):
            problems.append(f"{item.where}: rate with more than one decimal: {text!r}")
        elif not item.rate and "%" in text and re.search(r"\d+\.\d{2,}\s*%", text):
            problems.append(f"{item.where}: rate with more than one decimal: {text[:120]!r}")
        elif not item.rate and _LONG_DECIMAL.search(text) and re.search(r"\d\.\d{4,}", text):
            problems.append(f"{item.where}: unrounded number in {text[:120]!r}")
        if _STORED_TIME.search(prose):
            problems.append(f"{item.where}: a stored UTC time instead of the reader's local time: {text[:80]!r}")
        bare = text.strip()
        if bare in codes:
            problems.append(f"{item.where}: stored code instead of its name: {bare!r}")
        elif (
            lang == "zh" and bare not in own_names | translated and re.fullmatch(r"[A-Za-z][a-z]{2,}(?: [a-z]+)?", bare)
        ):
            problems.append(f"{item.where}: English word in a Chinese page: {bare!r}")
        if lang == "zh":
            problems += [f"{item.where}: English in a Chinese page: {run!r}" for run in _english_sentences(prose)]
            if bare not in own_names and (match := _ZH_UNTRANSLATED.search(prose)):
                problems.append(f"{item.where}: untranslated {match.group()!r} in a Chinese page: {text[:80]!r}")
        elif match := _ENGLISH_PLURAL.search(prose):
            problems.append(f"{item.where}: count without its plural: {match.group()!r} in {text[:80]!r}")
    return problems
