"""The records of ClinConsensus files (DESIGN §3.1–§3.5) as pydantic models: each field's rule, once.

The importers check every line with these models, the release export checks every case with
`release_case_model(size)`, and the release's `schema.json` is that model's JSON Schema. A refused
record is described by `describe`, one line per problem naming the field (`rubrics[6].criterion is
blank`); the caller adds the file and the line.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Any, Literal, get_args

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
)
from pydantic_core import PydanticCustomError

from db.config import get_settings

DifficultyName = Literal["low", "medium", "high"]
RegisterName = Literal["lay", "professional"]
StageName = Literal["annotation", "check", "adjudication"]
GroupNumber = Literal[1, 2]
DIFFICULTIES: tuple[str, ...] = get_args(DifficultyName)
REGISTERS: tuple[str, ...] = get_args(RegisterName)
STAGES: tuple[str, ...] = get_args(StageName)
GROUPS: tuple[int, ...] = get_args(GroupNumber)

#: No key of a released case may contain one of these (DESIGN §3.5).
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
    """How a message names the JSON type of a value that has the wrong one."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _choices(values: tuple[Any, ...]) -> str:
    return ", ".join(str(value) for value in values[:-1]) + f" or {values[-1]}"


def _one_of(values: tuple[Any, ...]) -> Any:
    """A validator accepting exactly `values` (by type too: `True` is not the group 1)."""
    choices = _choices(values)

    def check(value: Any) -> Any:
        if not any(type(value) is type(allowed) and value == allowed for allowed in values):
            raise PydanticCustomError(
                "one_of", "must be {choices}, found {found}", {"choices": choices, "found": repr(value)}
            )
        return value

    return BeforeValidator(check)


#: Text that must say something: not empty, not only spaces (`\S` somewhere, as JSON Schema checks it).
NOT_BLANK = r"\S"
Text = Annotated[StrictStr, Field(pattern=NOT_BLANK)]
CaseId = Annotated[StrictStr, Field(max_length=64, pattern=NOT_BLANK)]
CriterionId = Annotated[StrictStr, Field(max_length=64, pattern=NOT_BLANK)]
Username = Annotated[StrictStr, Field(max_length=64, pattern=NOT_BLANK)]
ModelName = Annotated[StrictStr, Field(max_length=128, pattern=NOT_BLANK)]
JudgeName = Annotated[StrictStr, Field(max_length=128, pattern=NOT_BLANK)]
#: Short descriptive fields of a case (primary task, specialty, user role); empty is allowed.
ShortText = Annotated[StrictStr, Field(max_length=128)]
TextList = list[Text]
Difficulty = Annotated[DifficultyName, _one_of(DIFFICULTIES)]
Register = Annotated[RegisterName, _one_of(REGISTERS)]
Stage = Annotated[StageName, _one_of(STAGES)]
Group = Annotated[GroupNumber, _one_of(GROUPS)]


class _Record(BaseModel):
    # Strict: a JSON file says `true`, not "true" or 1; a number is not a string.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


# Cases (§3.1) ---------------------------------------------------------------------------------


class CriterionRecord(_Record):
    """One criterion of a case's rubric."""

    criterion_id: CriterionId
    criterion: Text
    tags: TextList | None = None


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
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        if item.criterion_id in first:
            raise PydanticCustomError(
                "repeats",
                "{detail}",
                {
                    "at": f"[{index}].criterion_id",
                    "detail": f"{item.criterion_id!r} repeats rubrics[{first[item.criterion_id]}]",
                },
            )
        first[item.criterion_id] = index
    return items


class CaseRecord(_Record):
    """A line of a cases file: the public release schema; other keys are kept with the case."""

    model_config = ConfigDict(extra="allow")

    case_id: CaseId
    difficulty: Difficulty
    task: ShortText
    task_labels: TextList
    subject: ShortText
    subject_labels: TextList
    user_role: ShortText
    clinical_context: Text
    user_request: Text
    #: Empty (the rubric is written in the app) or exactly the installation's rubric size.
    rubrics: Annotated[
        list[CriterionRecord], BeforeValidator(_rubric_size_on_import), AfterValidator(_distinct_criterion_ids)
    ]
    register: Register | None = None


#: The keys of a case record the application reads; any other key is an extra, kept as given.
CASE_FIELDS = tuple(CaseRecord.model_fields)


# Responses, labels, judge decisions (§3.2–§3.4) ------------------------------------------------


class ResponseRecord(_Record):
    case_id: CaseId
    model: ModelName
    response: Text


class LabelRecord(_Record):
    case_id: CaseId
    model: ModelName
    criterion_id: CriterionId
    met: StrictBool
    stage: Stage
    #: 1 or 2; null (or absent) only for an adjudication, which belongs to no group.
    group: Group | None = None
    annotator: Username
    note: StrictStr | None = None

    @field_validator("group", mode="wrap")
    @classmethod
    def _group_of_stage(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        stage = info.data.get("stage")
        if stage == "adjudication" and value is not None:
            raise PydanticCustomError(
                "adjudication_group", "must be null for an adjudication, found {found}", {"found": repr(value)}
            )
        if stage in ("annotation", "check") and value is None:
            raise PydanticCustomError(
                "group_needed", "is null: {stage} labels belong to expert group 1 or 2", {"stage": stage}
            )
        return handler(value)


class JudgeDecisionRecord(_Record):
    """A plain judge decision row."""

    judge: JudgeName
    case_id: CaseId
    model: ModelName
    criterion_id: CriterionId
    met: StrictBool


class LocalJudgeRecord(_Record):
    """A row of the official local judge's output (`criteria_met`; the judge may be `judge_model`)."""

    judge: JudgeName
    case_id: CaseId
    model: ModelName
    criterion_id: CriterionId
    criteria_met: StrictBool


class OfficialCriterionResult(_Record):
    """One entry of `criteria_results` in an official `<model>_judge.json`."""

    criterion_id: CriterionId
    criteria_met: StrictBool


class OfficialCaseResults(_Record):
    """One item of an official `<model>_judge.json` (the model may come from the file name)."""

    case_id: CaseId
    model: ModelName | None = None
    criteria_results: list[Any]


# The public release (§3.5) -------------------------------------------------------------------

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://clinconsensus.example/schema/case.json"


class ReleaseCriterion(CriterionRecord):
    model_config = ConfigDict(extra="forbid", title="criterion")


def _no_forbidden_keys(values: Any) -> Any:
    if isinstance(values, dict):
        for key in values:
            if is_forbidden_key(key):
                raise PydanticCustomError(
                    "forbidden_key", "{detail}", {"at": f".{key}", "detail": "is a key no released case may have"}
                )
    return values


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
    task: StrictStr
    task_labels: TextList
    subject: StrictStr
    subject_labels: TextList
    user_role: StrictStr
    clinical_context: Text
    user_request: Text
    register: Annotated[Register | None, WithJsonSchema({"enum": list(REGISTERS)})] = None


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


def validate_release_case(record: dict[str, Any], size: int) -> list[str]:
    """The problems of one release record (empty when it may be released)."""
    problems = []
    try:
        _no_forbidden_keys(record)
    except PydanticCustomError as error:
        problems.append(f"{next(iter(k for k in record if is_forbidden_key(k)))} {error.message()}")
    try:
        release_case_model(size).model_validate(record)
    except ValidationError as error:
        problems += describe(error)
    return problems


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


def _list_noun(model: type[BaseModel] | None, location: tuple[int | str, ...]) -> str:
    """'a list of strings' for a list of text, 'a list' for a list of records."""
    field = model.model_fields.get(str(location[-1])) if model is not None and location else None
    if field is not None and field.annotation is not None:
        for argument in get_args(field.annotation) or (field.annotation,):
            for item in get_args(argument):
                if isinstance(item, type) and issubclass(item, BaseModel):
                    return "a list"
    return "a list of strings"


def describe(error: ValidationError, model: type[BaseModel] | None = None, prefix: str = "") -> list[str]:
    """One line per problem of a refused record: `<field> <what is wrong>`."""
    lines = []
    for problem in error.errors(include_url=False):
        location = problem["loc"]
        found = problem.get("input")
        context = problem.get("ctx") or {}
        kind = problem["type"]
        name = prefix + _path(location) + str(context.get("at", ""))
        if kind == "missing":
            text = "is missing"
        elif kind == "string_type":
            text = f"must be a string, found {kind_of(found)}"
        elif kind == "bool_type":
            text = f"must be true or false, found {kind_of(found)}"
        elif kind == "list_type":
            text = f"must be {_list_noun(model, location)}, found {kind_of(found)}"
        elif kind in ("model_type", "dict_type", "model_attributes_type"):
            text = f"must be an object, found {kind_of(found)}"
        elif kind == "string_too_long":
            text = f"is longer than {context['max_length']} characters"
        elif kind == "string_pattern_mismatch":
            text = "is blank"
        elif kind in ("too_short", "too_long"):
            text = (
                f"has {context['actual_length']} items, exactly {context.get('min_length', context.get('max_length'))} "
                "required"
            )
        elif kind == "extra_forbidden":
            text = "is not a field of this record"
        else:
            text = problem["msg"]
        lines.append(f"{name} {text}")
    return lines


def check(model: type[_Record], record: dict[str, Any], prefix: str = "") -> tuple[Any, list[str]]:
    """(the validated record, []) or (None, the problems)."""
    try:
        return model.model_validate(record), []
    except ValidationError as error:
        return None, describe(error, model, prefix)
