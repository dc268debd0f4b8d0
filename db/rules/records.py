"""The records of ClinConsensus files (docs/REFERENCE.md §3.1–§3.5) as pydantic models: each field's rule, once.

The importers check every line with these models, the release export checks every case with
`release_case_model(size)`, and the release's `schema.json` is that model's JSON Schema. A refused
record is described by `describe`: one line per problem naming the field (`rubrics[6].criterion is
blank`); the caller adds the file and the line. Lengths come from `db.rules.limits`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from db.rules import limits
from db.rules.config import get_settings
from db.rules.errors import Said
from db.rules.limits import InputRejected

DifficultyName = Literal["low", "medium", "high"]
RegisterName = Literal["lay", "professional"]
StageName = Literal["annotation", "check", "adjudication"]
GroupNumber = Literal[1, 2]
DIFFICULTIES: tuple[str, ...] = get_args(DifficultyName)
REGISTERS: tuple[str, ...] = get_args(RegisterName)
STAGES: tuple[str, ...] = get_args(StageName)
GROUPS: tuple[int, ...] = get_args(GroupNumber)

#: No key of a released case may contain one of these (docs/REFERENCE.md §3.5).
FORBIDDEN_KEY_PARTS = (
    "reference_answer",
    "source_file",
    "prompt_id",
    "row",
    "provenance",
    "physician",
    "doctor",
    "qc",
    "repair",
    "internal",
)


def is_forbidden_key(key: object) -> bool:
    lowered = str(key).casefold()
    return any(part in lowered for part in FORBIDDEN_KEY_PARTS)


def kind_of(value: Any) -> str:
    """How a message names the JSON type of a value that has the wrong one (catalog: `import.kind.*`)."""
    if value is None:
        return Said("null", "import.kind.null")
    if isinstance(value, bool):
        return Said("a boolean", "import.kind.boolean")
    if isinstance(value, int | float):
        return Said("a number", "import.kind.number")
    if isinstance(value, str):
        return Said("a string", "import.kind.string")
    if isinstance(value, list):
        return Said("a list", "import.kind.list")
    return Said("an object", "import.kind.object")


def _one_of(values: tuple[Any, ...]) -> BeforeValidator:
    """Accepts exactly `values`, by type too (`True` is not the group 1), naming them when it refuses."""
    choices = ", ".join(str(value) for value in values[:-1]) + f" or {values[-1]}"

    def check(value: Any) -> Any:
        if not any(type(value) is type(allowed) and value == allowed for allowed in values):
            raise PydanticCustomError(
                "one_of",
                "must be {choices}, found {found}",
                {"choices": choices, "found": repr(value), "options": " / ".join(map(str, values))},
            )
        return value

    return BeforeValidator(check)


# Fields ---------------------------------------------------------------------------------------

#: Text that must say something: not empty, not only spaces (`\S` somewhere, as JSON Schema checks it).
NOT_BLANK = r"\S"
LIMIT = limits.TEXT_LIMITS
#: Characters no id or name may hold: controls (Cc), invisible format characters (Cf: zero-width,
#: bidi overrides), surrogates, line and paragraph separators. `CC-0001\u200b` is not `CC-0001`.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
#: Letters and symbols that show as nothing (Hangul fillers, the blank Braille pattern, the combining
#: grapheme joiner): `CC-0001\u3164` looks like `CC-0001`. Other fullwidth characters stay allowed.
INVISIBLE_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f\u17b4\u17b5")
_NUL_OR_SURROGATE = re.compile("[\x00\ud800-\udfff]")


def folded_name(value: str) -> str:
    """An id or a name as compared for look-alikes: NFKC-normalised and case-folded (`ＣＣ-0001` is `cc-0001`)."""
    return unicodedata.normalize("NFKC", value).casefold()


class LookAlikes:
    """The ids or names of one kind already known, by folded form: a new one whose folded form is that of a
    different known one is a look-alike (`ＣＣ-0001` or `cc-0001` beside `CC-0001`)."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        self.by_fold: dict[str, str] = {}
        for name in known:
            self.by_fold.setdefault(folded_name(name), name)

    def clash(self, name: str) -> str | None:
        """The known name `name` would be taken for (None: it is new, or that very name)."""
        found = self.by_fold.get(folded_name(name))
        return found if found is not None and found != name else None

    def add(self, name: str) -> None:
        self.by_fold.setdefault(folded_name(name), name)

    def said(self, field: str, name: str, other: str) -> Said:
        return Said(
            f"{field} {name!r} looks like the existing {other!r} (the same after NFKC and case folding)",
            "import.field.lookalike",
            field=field,
            name=name,
            other=other,
        )


def _visible_name(value: str) -> str:
    # isprintable() is False for every refused category (and for some accepted ones): the loop is rare.
    if not value.isprintable():
        for character in value:
            if unicodedata.category(character) in INVISIBLE_CATEGORIES:
                raise PydanticCustomError(
                    "invisible_char",
                    "contains an invisible or control character ({code})",
                    {"code": f"U+{ord(character):04X}"},
                )
    return value


def _storable_text(value: str) -> str:
    found = _NUL_OR_SURROGATE.search(value)
    if found is not None:
        code = f"U+{ord(found.group()):04X}"
        raise PydanticCustomError(
            "unstorable_char", "contains a character that cannot be stored ({code})", {"code": code}
        )
    return value


def _plain_name(value: str) -> str:
    """An id or a name: visible, no space at either end, no space but the ASCII one, no invisible filler."""
    _visible_name(value)
    if value.isascii():
        if value[:1] == " " or value[-1:] == " ":
            raise PydanticCustomError("edge_space", "starts or ends with a space", {})
        return value
    if value != value.strip():
        raise PydanticCustomError("edge_space", "starts or ends with a space", {})
    for character in value:
        if character in INVISIBLE_FILLERS:
            raise PydanticCustomError(
                "invisible_filler", "contains an invisible filler ({code})", {"code": f"U+{ord(character):04X}"}
            )
        if character != " " and unicodedata.category(character) == "Zs":
            raise PydanticCustomError(
                "unicode_space",
                "contains a space other than the ASCII one ({code})",
                {"code": f"U+{ord(character):04X}"},
            )
    return value


_NAME = AfterValidator(_visible_name)
_ID = AfterValidator(_plain_name)
_TEXT = AfterValidator(_storable_text)

CaseId = Annotated[StrictStr, Field(max_length=LIMIT["case_id"], pattern=NOT_BLANK), _ID]
CriterionId = Annotated[StrictStr, Field(max_length=LIMIT["criterion_id"], pattern=NOT_BLANK), _ID]
Username = Annotated[StrictStr, Field(max_length=LIMIT["username"], pattern=NOT_BLANK), _ID]
ModelName = Annotated[StrictStr, Field(max_length=LIMIT["model"], pattern=NOT_BLANK), _ID]
JudgeName = Annotated[StrictStr, Field(max_length=LIMIT["judge"], pattern=NOT_BLANK), _ID]
CriterionText = Annotated[StrictStr, Field(max_length=LIMIT["criterion"], pattern=NOT_BLANK), _TEXT]
ClinicalContext = Annotated[StrictStr, Field(max_length=LIMIT["clinical_context"], pattern=NOT_BLANK), _TEXT]
UserRequest = Annotated[StrictStr, Field(max_length=LIMIT["user_request"], pattern=NOT_BLANK), _TEXT]
ResponseText = Annotated[StrictStr, Field(max_length=LIMIT["response"], pattern=NOT_BLANK), _TEXT]
NoteText = Annotated[StrictStr, Field(max_length=LIMIT["note"]), _TEXT]
#: The short descriptive fields of a case (primary task, specialty, user role); empty is allowed.
Task = Annotated[StrictStr, Field(max_length=LIMIT["task"]), _NAME]
Subject = Annotated[StrictStr, Field(max_length=LIMIT["subject"]), _NAME]
UserRole = Annotated[StrictStr, Field(max_length=LIMIT["user_role"]), _NAME]
#: Task labels, subject labels, tags: lists of non-blank labels.
LabelList = Annotated[
    list[Annotated[StrictStr, Field(max_length=LIMIT["label"], pattern=NOT_BLANK), _NAME]],
    Field(max_length=limits.MAX_LIST_ITEMS),
]
Difficulty = Annotated[DifficultyName, _one_of(DIFFICULTIES)]
Register = Annotated[RegisterName, _one_of(REGISTERS)]
Stage = Annotated[StageName, _one_of(STAGES)]
Group = Annotated[GroupNumber, _one_of(GROUPS)]


class _Record(BaseModel):
    # Strict: a JSON file says `true`, not "true" or 1; a number is not a string.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, populate_by_name=True)


# Cases (§3.1) ---------------------------------------------------------------------------------


class CriterionRecord(_Record):
    """One criterion of a case's rubric."""

    criterion_id: CriterionId
    criterion: CriterionText
    tags: LabelList | None = None


def _rubric_size_on_import(value: Any) -> Any:
    size = get_settings().rubric_size
    if type(value) is list and value and len(value) != size:
        raise PydanticCustomError(
            "rubric_size",
            "has {count} criteria, {size} required (or none, to author them in the app)",
            {"count": len(value), "size": size},
        )
    return value


def _distinct_criterion_ids(items: list[CriterionRecord]) -> list[CriterionRecord]:
    """Criterion ids of one rubric are distinct, also after NFKC and case folding (`C01` beside `c01` is refused)."""
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        earlier = first.get(folded_name(item.criterion_id))
        if earlier is not None:
            other = items[earlier].criterion_id
            detail = (
                f"{item.criterion_id!r} repeats rubrics[{earlier}]"
                if other == item.criterion_id
                else f"{item.criterion_id!r} looks like {other!r} of rubrics[{earlier}] (the same after NFKC and case "
                "folding)"
            )
            raise PydanticCustomError("repeats", "{detail}", {"at": f"[{index}].criterion_id", "detail": detail})
        first[folded_name(item.criterion_id)] = index
    return items


class CaseRecord(_Record):
    """A line of a cases file: the public release schema; other keys are kept with the case."""

    model_config = ConfigDict(extra="allow")

    case_id: CaseId
    difficulty: Difficulty
    task: Task
    task_labels: LabelList
    subject: Subject
    subject_labels: LabelList
    user_role: UserRole
    clinical_context: ClinicalContext
    user_request: UserRequest
    #: Overrides the register the taxonomy reads from user_role ("register" in the file).
    register_: Register | None = Field(default=None, alias="register")
    #: Empty (the rubric is written in the app) or exactly the installation's rubric size.
    rubrics: Annotated[
        list[CriterionRecord], BeforeValidator(_rubric_size_on_import), AfterValidator(_distinct_criterion_ids)
    ]


#: The keys of a case line the application reads; any other key is an extra, kept as given.
CASE_FIELDS = tuple(field.alias or name for name, field in CaseRecord.model_fields.items())
REQUIRED_CASE_FIELDS = tuple(
    field.alias or name for name, field in CaseRecord.model_fields.items() if field.is_required()
)
OPTIONAL_CASE_FIELDS = tuple(name for name in CASE_FIELDS if name not in REQUIRED_CASE_FIELDS)


# Responses, labels, judge decisions (§3.2–§3.4) ------------------------------------------------


class ResponseRecord(_Record):
    case_id: CaseId
    model: ModelName
    response: ResponseText


_ABSENT = "<absent>"


class LabelRecord(_Record):
    case_id: CaseId
    model: ModelName
    criterion_id: CriterionId
    met: StrictBool
    stage: Stage
    #: 1 or 2; null (or absent) only for an adjudication, which belongs to no group.
    group: Group | None = None
    annotator: Username
    note: NoteText | None = None

    @model_validator(mode="before")
    @classmethod
    def _mark_absent_group(cls, data: Any) -> Any:
        # An absent group and a null one read differently in the message (see `_group_of_stage`).
        if isinstance(data, dict) and "group" not in data:
            return {**data, "group": _ABSENT}
        return data

    @field_validator("group", mode="wrap")
    @classmethod
    def _group_of_stage(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        stage = info.data.get("stage")
        absent = value == _ABSENT
        if stage == "adjudication" and not absent and value is not None:
            raise PydanticCustomError(
                "adjudication_group", "must be null for an adjudication, found {found}", {"found": repr(value)}
            )
        if stage in ("annotation", "check") and (absent or value is None):
            raise PydanticCustomError(
                "group_needed",
                "is {how}: {stage} labels belong to expert group 1 or 2",
                {"how": "missing" if absent else "null", "stage": stage},
            )
        return None if absent else handler(value)


class ReferenceRecord(_Record):
    """A line of a references file (docs/REFERENCE.md §3.1): a case's reference answer; other keys are ignored.

    The answer's own rules (not empty, no NUL, its length) are `db.rules.anchors.reference_problem`."""

    model_config = ConfigDict(extra="ignore")

    case_id: CaseId
    reference_answer: StrictStr


class JudgeDecisionRecord(_Record):
    """A plain judge decision row."""

    judge: JudgeName
    case_id: CaseId
    model: ModelName
    criterion_id: CriterionId
    met: StrictBool


class LocalJudgeRecord(_Record):
    """A row of the official local judge's output: `criteria_met`, the judge possibly as `judge_model`."""

    judge: JudgeName
    case_id: CaseId
    model: ModelName
    criterion_id: CriterionId
    criteria_met: StrictBool


class OfficialCaseResults(_Record):
    """One item of an official `<model>_judge.json` (the model may come from the file's name)."""

    case_id: CaseId
    model: ModelName | None = None
    criteria_results: list[dict[str, Any]]


class OfficialCriterionResult(_Record):
    """One entry of `criteria_results` in an official `<model>_judge.json`."""

    criterion_id: CriterionId
    criteria_met: StrictBool


# The public release (§3.5) -------------------------------------------------------------------

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://clinconsensus.example/schema/case.json"


class ReleaseCriterion(CriterionRecord):
    model_config = ConfigDict(extra="forbid", title="criterion")


class _ReleaseCase(_Record):
    model_config = ConfigDict(
        extra="allow",
        title="ClinConsensus case",
        json_schema_extra={
            "propertyNames": {
                "not": {"pattern": "(?i)(" + "|".join(re.escape(part) for part in FORBIDDEN_KEY_PARTS) + ")"}
            }
        },
    )

    case_id: CaseId
    difficulty: Difficulty
    task: Task
    task_labels: LabelList
    subject: Subject
    subject_labels: LabelList
    user_role: UserRole
    clinical_context: ClinicalContext
    user_request: UserRequest
    register_: Annotated[Register | None, WithJsonSchema({"enum": list(REGISTERS)})] = Field(
        default=None, alias="register"
    )

    @model_validator(mode="before")
    @classmethod
    def _no_forbidden_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if is_forbidden_key(key):
                    raise PydanticCustomError(
                        "forbidden_key", "{key} is a key no released case may have", {"key": str(key)}
                    )
        return data


@cache
def release_case_model(size: int) -> type[_ReleaseCase]:
    """The model of one line of a release's cases.jsonl: a case with exactly `size` criteria."""
    model: type[_ReleaseCase] = create_model(
        "ReleaseCase",
        __base__=_ReleaseCase,
        __doc__=f"One line of cases.jsonl: a Chinese clinical case with exactly {size} rubric criteria.",
        rubrics=(
            Annotated[
                list[ReleaseCriterion], Field(min_length=size, max_length=size), AfterValidator(_distinct_criterion_ids)
            ],
            ...,
        ),
    )
    return model


def release_problems(record: dict[str, Any], size: int) -> list[str]:
    """The problems of one release record (empty when it may be released)."""
    model = release_case_model(size)
    return check(model, record)[1]


def release_schema(size: int) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one line of the release's cases.jsonl."""
    schema = release_case_model(size).model_json_schema()
    return {"$schema": SCHEMA_DIALECT, "$id": SCHEMA_ID, **schema}


# Messages ------------------------------------------------------------------------------------


def _path(location: tuple[int | str, ...]) -> str:
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _list_item(annotation: Any) -> Any:
    """The item type of the list inside `annotation` (through Optional and Annotated), or None."""
    while annotation is not None:
        origin = get_origin(annotation)
        if origin is list:
            return get_args(annotation)[0]
        arguments = [argument for argument in get_args(annotation) if argument is not type(None)]
        annotation = arguments[0] if arguments else None
    return None


def _list_noun(model: type[BaseModel] | None, location: tuple[int | str, ...]) -> str:
    """'a list of strings' for a list of text, 'a list' for a list of records."""
    fields = {field.alias or name: field for name, field in model.model_fields.items()} if model else {}
    field = fields.get(str(location[0])) if len(location) == 1 else None
    item = _list_item(field.annotation) if field is not None else str
    while get_origin(item) is Annotated:
        item = get_args(item)[0]
    return "a list of strings" if isinstance(item, type) and issubclass(item, str) else "a list"


def describe(error: ValidationError, model: type[BaseModel] | None = None, prefix: str = "") -> list[str]:
    """One line per problem of a refused record: `<field> <what is wrong>`."""
    lines: list[str] = []
    for problem in error.errors(include_url=False):
        location = problem["loc"]
        found = problem.get("input")
        context = problem.get("ctx") or {}
        kind = problem["type"]
        name = prefix + _path(location) + str(context.get("at", ""))
        # Each text also names its catalog entry (`import.field.*`) for pages in the reader's language.
        params: dict[str, Any] = {}
        if kind == "missing":
            text = "is missing"
        elif kind == "string_type":
            text, params = f"must be a string, found {kind_of(found)}", {"found": kind_of(found)}
        elif kind == "bool_type":
            text, params = f"must be true or false, found {kind_of(found)}", {"found": kind_of(found)}
        elif kind == "list_type":
            noun = _list_noun(model, location)
            text, params = f"must be {noun}, found {kind_of(found)}", {"found": kind_of(found)}
            kind = "list_of_strings" if noun == "a list of strings" else "list_type"
        elif kind in ("model_type", "dict_type", "model_attributes_type"):
            text, params = f"must be an object, found {kind_of(found)}", {"found": kind_of(found)}
            kind = "object_type"
        elif kind == "string_too_long":
            text = f"is longer than {context['max_length']:,} characters ({len(found):,})"
            params = {"limit": f"{context['max_length']:,}", "length": f"{len(found):,}"}
        elif kind == "string_pattern_mismatch":
            text = "is blank"
        elif kind in ("too_long", "too_short"):
            bound, limit_name = ("at most", "max_length") if kind == "too_long" else ("at least", "min_length")
            text = f"has {context['actual_length']} items, {bound} {context[limit_name]}"
            params = {
                "n": context["actual_length"],
                "limit": context["max_length" if kind == "too_long" else "min_length"],
            }
        elif kind == "extra_forbidden":
            text = "is not a field of this record"
        elif kind in (
            "rubric_size",
            "adjudication_group",
            "forbidden_key",
            "invisible_char",
            "unstorable_char",
            "edge_space",
            "invisible_filler",
            "unicode_space",
        ):
            text, params = problem["msg"], {name: str(value) for name, value in context.items()}
        elif kind == "one_of":
            text, params = problem["msg"], {"choices": context.get("options"), "found": context.get("found")}
        else:
            text, params, kind = problem["msg"], {"reason": problem["msg"]}, "other"
        english = f"{name} {text}".strip() if name else text
        lines.append(Said(english, f"import.field.{kind}", field=name or "-", **params))
    return lines


def check(model: type[BaseModel], record: dict[str, Any], prefix: str = "") -> tuple[Any, list[str]]:
    """(the validated record, []) or (None, the problems)."""
    try:
        return model.model_validate(record), []
    except ValidationError as error:
        return None, describe(error, model, prefix)


def check_name(field: str, value: str, limit_key: str) -> None:
    """The rule of an id or a name given outside any file (a command-line option): not blank, within
    its length, no invisible or control character, no space at either end or other than the ASCII one, no
    invisible filler. Raises `limits.InputRejected` naming `field`."""
    limits.check_length(field, value, limit_key=limit_key)
    if not value.strip():
        raise InputRejected(f"{field} is blank", field, key="import.field.string_pattern_mismatch")
    try:
        _plain_name(_storable_text(value))
    except PydanticCustomError as error:
        code = (error.context or {}).get("code", "")
        raise InputRejected(f"{field} {error.message()}", field, key=f"import.field.{error.type}", code=code) from None
