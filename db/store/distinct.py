"""The distinct values of an indexed column, read by hopping through its index instead of reading every row."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, func, select
from sqlalchemy.engine import Connection
from sqlmodel import Session


def distinct_values(session: Session | Connection, column: Column[Any]) -> list[Any]:
    """The column's distinct non-null values, in order.

    Millions of rows may hold a handful of values (judges, audit entities, actors): a recursive query asks the
    column's index for its smallest value, then for the smallest one above it, and so on, one probe per value,
    where DISTINCT reads every row. The column needs an index of its own (or leading one).
    """
    table, name = column.table, column.name
    found = select(func.min(column).label("value")).cte("found", recursive=True)
    later = table.alias("later")
    following = select(func.min(later.c[name])).where(later.c[name] > found.c.value).scalar_subquery()
    found = found.union_all(select(following).where(found.c.value.is_not(None)))
    return list(session.execute(select(found.c.value).where(found.c.value.is_not(None))).scalars())
