"""A queue's display keys (response code, case id) looked up by key for each of its items.

An annotator's queue holds up to a few thousand responses. Joined to the response and case tables, PostgreSQL
hashes every response and case once the queue is a few per cent of the responses, and the cost follows the data,
not the queue. As correlated lookups each item is one probe of the indexes on (id, code) and (id, case_id),
which hold the answers (the response rows also carry the text). The lookups pay where every item is read anyway;
a statement that sorts thousands of items to return a page of them stays a join (docs/performance.md).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Label, select
from sqlalchemy.orm import Mapped
from sqlmodel import col

from db.store.models import Case, Response


def code_of_response(response_id: ColumnElement[Any] | Mapped[Any]) -> Label[str]:
    """The response's opaque code, as the column `code`."""
    return select(col(Response.code)).where(col(Response.id) == response_id).label("code")


def case_id_of_case(case_pk: ColumnElement[Any] | Mapped[Any]) -> Label[str]:
    """The case's id (e.g. CC-0001), as the column `case_id`."""
    return select(col(Case.case_id)).where(col(Case.id) == case_pk).label("case_id")
