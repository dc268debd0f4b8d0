"""The rubric-level judge prompt (docs/REFERENCE.md §3.5): one definition for the SFT export and the judge runner.

A template is Python `str.format` text with the fields {user_message}, {response} and {rubric_item}
(literal braces doubled), exactly as the official judge fills its prompt. The default template is
the official judge's inference prompt, so a judge trained on our SFT export is run, by us or by
the official script, with the prompt it was trained on.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from string import Formatter

from db.rules.errors import ValidationFailed

TEMPLATE_DIR = Path(__file__).with_name("templates")
#: Named templates: the official judge's inference prompt (default) and a Chinese one.
TEMPLATES = {"official": TEMPLATE_DIR / "judge_prompt.txt", "zh": TEMPLATE_DIR / "judge_prompt_zh.txt"}
DEFAULT_TEMPLATE_NAME = "official"
DEFAULT_TEMPLATE = TEMPLATES[DEFAULT_TEMPLATE_NAME]
TEMPLATE_FIELDS = ("user_message", "response", "rubric_item")

#: How the official tools read a judge's answer (first match, any letter case).
CRITERIA_MET = re.compile(r'"criteria_met"\s*:\s*(true|false)', re.IGNORECASE)
_THINKING = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)


def user_message(clinical_context: str, user_request: str) -> str:
    """What annotators and judges read as the user's message (docs/REFERENCE.md §3.1)."""
    return f"{clinical_context}\n\n{user_request}"


def template_path(choice: str | Path | None) -> Path:
    """The file of a template choice: official (default), zh, or a path to a file."""
    if choice is None or str(choice) == "":
        return DEFAULT_TEMPLATE
    if isinstance(choice, str) and choice in TEMPLATES:
        return TEMPLATES[choice]
    return Path(choice)


def template_name(choice: str | Path | None) -> str:
    """How a run record names its template: official, zh or the file's name."""
    if choice is None or str(choice) == "":
        return DEFAULT_TEMPLATE_NAME
    if isinstance(choice, str) and choice in TEMPLATES:
        return choice
    return Path(choice).name


def _pieces(template: str, where: str) -> list[tuple[str, str | None]]:
    """(literal text, field or None) pairs of a str.format template, checked field by field."""
    try:
        parsed = list(Formatter().parse(template))
    except ValueError as error:
        raise ValidationFailed(
            f"{where}: not a str.format template ({error}; write literal braces as {{{{ and }}}})"
        ) from None
    pieces = []
    for literal, name, spec, conversion in parsed:
        if name is not None and name not in TEMPLATE_FIELDS:
            raise ValidationFailed(
                f"{where}: unknown placeholder {{{name}}} (the fields are "
                + ", ".join("{" + field + "}" for field in TEMPLATE_FIELDS)
                + "; write literal braces as {{ and }})"
            )
        if spec or conversion:
            raise ValidationFailed(f"{where}: placeholder {{{name}}} must be plain (no format spec or conversion)")
        pieces.append((literal, name))
    missing = [field for field in TEMPLATE_FIELDS if field not in {name for _, name in pieces}]
    if missing:
        raise ValidationFailed(
            f"{where}: the template lacks the placeholder(s) " + ", ".join("{" + field + "}" for field in missing)
        )
    return pieces


def read_template(choice: str | Path | None = None) -> str:
    """The text of a template choice, checked: str.format fields {user_message}, {response}, {rubric_item}."""
    path = template_path(choice)
    try:
        template = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise ValidationFailed(f"{path}: no such template file (or official, zh)") from None
    except UnicodeDecodeError as error:
        raise ValidationFailed(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    _pieces(template, str(path))
    return template


def template_sha256(template: str) -> str:
    return hashlib.sha256(template.encode("utf-8")).hexdigest()


def json_body(text: str) -> str:
    """The JSON string literal of `text` without its quotes.

    JSON escapes character by character, so bodies of pieces concatenate to the body of the whole:
    a prompt row is assembled from pieces encoded once per case, response and criterion.
    """
    return json.dumps(text, ensure_ascii=False)[1:-1]


class PromptTemplate:
    """A judge prompt template split once into literal parts and fields, filled as `str.format` fills it.

    `fill` takes plain values; `fill_json_body` takes the values' JSON bodies (`json_body`) and gives
    the body of the filled prompt — how SFT rows are assembled without encoding each prompt. Text
    inside a value is never filled again (braces in a response stay as they are).
    """

    def __init__(self, template: str, where: str = "template") -> None:
        pieces = _pieces(template, where)
        self.literals = [literal for literal, _ in pieces]
        self.names = [name for _, name in pieces]
        self.json_literals = [json_body(literal) for literal in self.literals]

    @staticmethod
    def _join(literals: list[str], names: list[str | None], values: dict[str, str]) -> str:
        out = []
        for literal, name in zip(literals, names):
            out.append(literal)
            if name is not None:
                out.append(values[name])
        return "".join(out)

    def fill(self, **values: str) -> str:
        return self._join(self.literals, self.names, values)

    def fill_json_body(self, bodies: dict[str, str]) -> str:
        return self._join(self.json_literals, self.names, bodies)


def fill_template(template: str, **values: str) -> str:
    """The prompt for one (user message, response, rubric item)."""
    return PromptTemplate(template).fill(**values)


def judge_answer(explanation: str, met: bool) -> str:
    """The judge's answer: a fenced JSON block with `explanation` and `criteria_met`."""
    return (
        "```json\n" + json.dumps({"explanation": explanation, "criteria_met": bool(met)}, ensure_ascii=False) + "\n```"
    )


def parse_judge_output(text: str | None) -> bool | None:
    """criteria_met of a judge's answer, or None when it cannot be read.

    The official rule (the first `"criteria_met": true|false`), applied after a leading
    <think>…</think> block, which a reasoning model may fill with drafts of its answer.
    """
    if not text:
        return None
    match = CRITERIA_MET.search(_THINKING.sub("", text, count=1))
    return None if match is None else match.group(1).lower() == "true"
