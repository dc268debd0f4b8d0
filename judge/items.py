"""The items a judge run grades: one per (response, criterion of its case's current approved rubric).

Each item carries its cache key, sha256 of the canonical JSON of the request that answers it:
`{"messages": [{"content": prompt, "role": "user"}], "model": …, "parameters": {…}}` (sorted keys,
no spaces, UTF-8 as is). The key is computed from the prompt's JSON text assembled out of pieces
encoded once per case, response and criterion (as the SFT export builds rows), so the full-scale
825,000 items are keyed in seconds; the plain prompt is built only for the items that are sent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from analysis.loader import load_cases, load_criteria, load_judge, load_responses
from analysis.prompt import PromptTemplate, json_body, user_message
from db.rules.errors import ValidationFailed

RESPONSE_SCOPES = ("all", "missing")
CHUNK = 2000


def canonical_request(model: str, prompt: str, parameters: dict) -> str:
    """The text whose sha256 is an item's cache key (also what a test recomputes independently)."""
    return json.dumps(
        {"messages": [{"content": prompt, "role": "user"}], "model": model, "parameters": parameters},
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )


@dataclass
class Item:
    response_id: int
    criterion_id: str
    cache_key: str
    case_pk: int
    position: int


class ItemSource:
    """The selected items in case order (then model, then criterion position), produced in chunks."""

    def __init__(
        self,
        engine: Engine,
        *,
        judge: str,
        model: str,
        template: str,
        parameters: dict,
        responses: str = "all",
        models: list[str] | None = None,
        limit: int | None = None,
    ) -> None:
        if responses not in RESPONSE_SCOPES:
            raise ValidationFailed(f"--responses {responses!r}: expected all or missing")
        if limit is not None and limit < 1:
            raise ValidationFailed(f"--limit {limit}: expected a whole number of at least 1")
        self.template = PromptTemplate(template)
        self.model = model
        cases = load_cases(engine, text=True)
        criteria = load_criteria(engine, text=True)
        frame = load_responses(engine, text=True)
        if models:
            unknown = sorted(set(models) - set(frame["model"]))
            if unknown:
                raise ValidationFailed(
                    f"--models: no responses of {', '.join(unknown)}",
                    key="judge.message.unknown_models",
                    params={"models": "、".join(unknown)},
                )
            frame = frame[frame["model"].isin(models)]
        rubric = {
            pk: (group["criterion_id"].tolist(), group["text"].tolist(), group["position"].tolist())
            for pk, group in criteria.groupby("case_pk", sort=False)
        }
        frame = frame[frame["case_pk"].isin(rubric)]
        order = {pk: row for row, pk in enumerate(cases["case_pk"])}
        frame = frame.assign(case_row=frame["case_pk"].map(order)).sort_values(["case_row", "model"], kind="stable")
        self.responses = frame
        self.rubric = rubric
        self.messages = {
            pk: user_message(context, request)
            for pk, context, request in zip(cases["case_pk"], cases["clinical_context"], cases["user_request"])
        }
        self.texts = dict(zip(frame["response_id"], frame["text"]))
        self.done: set[tuple[int, str]] = set()
        if responses == "missing":
            decided = load_judge(engine)
            decided = decided[decided["judge"] == judge]
            self.done = set(zip(decided["response_id"].tolist(), decided["criterion_id"].tolist()))
        total = 0
        for response_id, case_pk in zip(frame["response_id"], frame["case_pk"]):
            ids = rubric[case_pk][0]
            total += len(ids) if not self.done else sum((response_id, c) not in self.done for c in ids)
        self.total = min(total, limit) if limit else total
        self.limit = limit
        self.prefix = hashlib.sha256(b'{"messages":[{"content":"')
        self.suffix = (
            '","role":"user"}],"model":'
            + json.dumps(model, ensure_ascii=False)
            + ',"parameters":'
            + json.dumps(parameters, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
            + "}"
        ).encode("utf-8")

    def prompt(self, item: Item) -> str:
        criterion_ids, texts, _ = self.rubric[item.case_pk]
        index = criterion_ids.index(item.criterion_id)
        return self.template.fill(
            user_message=self.messages[item.case_pk], response=self.texts[item.response_id], rubric_item=texts[index]
        )

    def chunks(self, size: int = CHUNK) -> Iterator[list[Item]]:
        produced = 0
        chunk: list[Item] = []
        item_bodies: dict[str, str] = {}
        fill = self.template.fill_json_body
        prefix, suffix = self.prefix, self.suffix
        current_case, message_body = None, ""
        for response_id, case_pk in zip(self.responses["response_id"].tolist(), self.responses["case_pk"].tolist()):
            if case_pk != current_case:
                current_case, message_body = case_pk, json_body(self.messages[case_pk])
            response_body = json_body(self.texts[response_id])
            criterion_ids, texts, positions = self.rubric[case_pk]
            for criterion_id, text, position in zip(criterion_ids, texts, positions):
                if self.done and (response_id, criterion_id) in self.done:
                    continue
                body = item_bodies.get(text)
                if body is None:
                    body = item_bodies[text] = json_body(text)
                digest = prefix.copy()
                digest.update(
                    fill({"user_message": message_body, "response": response_body, "rubric_item": body}).encode("utf-8")
                )
                digest.update(suffix)
                chunk.append(Item(response_id, criterion_id, digest.hexdigest(), case_pk, position))
                produced += 1
                if self.limit and produced >= self.limit:
                    yield chunk
                    return
                if len(chunk) >= size:
                    yield chunk
                    chunk = []
            if len(item_bodies) > 200_000:
                item_bodies.clear()
        if chunk:
            yield chunk
