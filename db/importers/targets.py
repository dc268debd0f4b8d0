"""Lookups shared by labels and judge decisions: (case, model, criterion) to database keys."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Connection

from db.importers.import_summary import _CRITERION_TABLE, _RESPONSE_TABLE
from db.importers.responses import _case_pks
from db.importers.writing import _batches
from db.rules.errors import Said
from db.store.current_rubric import current_version_ids

# Shared by labels and judge decisions --------------------------------------------------------


@dataclass
class _Targets:
    """Lookups for rows that point at a response and a criterion of its case's current rubric."""

    response: dict[tuple[str, str], tuple[int, int]]  # (case_id, model) -> (response id, case pk)
    criteria: dict[int, dict[str, int]]  # case pk -> criterion_id -> position
    rubric_version: dict[int, int]  # case pk -> current rubric version id
    known_cases: set[str]

    @classmethod
    def load(cls, connection: Connection) -> _Targets:
        case_pk = _case_pks(connection)
        case_id_of = {pk: case_id for case_id, pk in case_pk.items()}
        response = {
            (case_id_of[row.case_pk], row.model): (row.id, row.case_pk)
            for row in connection.execute(
                select(_RESPONSE_TABLE.c.id, _RESPONSE_TABLE.c.case_pk, _RESPONSE_TABLE.c.model)
            )
        }
        rubric_version = current_version_ids(connection)
        case_of_version = {version_id: pk for pk, version_id in rubric_version.items()}
        criteria: dict[int, dict[str, int]] = {}
        for batch in _batches(list(case_of_version), 5_000):
            for row in connection.execute(
                select(
                    _CRITERION_TABLE.c.rubric_version_id, _CRITERION_TABLE.c.criterion_id, _CRITERION_TABLE.c.position
                ).where(_CRITERION_TABLE.c.rubric_version_id.in_(batch))
            ):
                criteria.setdefault(case_of_version[row.rubric_version_id], {})[row.criterion_id] = row.position
        return cls(response, criteria, rubric_version, set(case_pk))

    def criterion_at(self, case_id: str, model: str, place: int, errors: list[str]) -> str | None:
        """The criterion_id at 0-based `place` of the current rubric of the case `model` answered, or None with
        the reason in `errors` (for results that name no criterion, matched by their place)."""
        found = self.response.get((case_id, model))
        positions = self.criteria.get(found[1]) if found is not None else None
        if positions is None:
            self.locate(case_id, model, "", errors)  # says what is missing: the case, the response or the rubric
            return None
        if not 0 <= place < len(positions):
            errors.append(
                Said(
                    f"criterion_id is missing and case_id {case_id!r} has no criterion at place {place + 1} of its "
                    "current rubric",
                    "import.criterion_place_unknown",
                    case_id=case_id,
                    place=place + 1,
                )
            )
            return None
        return sorted(positions, key=positions.__getitem__)[place]

    def locate(self, case_id: str, model: str, criterion_id: str, errors: list[str]) -> tuple[int, int, int] | None:
        """(response id, case pk, criterion position), or None with the reason in `errors`."""
        found = self.response.get((case_id, model))
        if found is None:
            if case_id not in self.known_cases:
                errors.append(Said(f"case_id {case_id!r} is not a known case", "import.case_unknown", case_id=case_id))
            else:
                errors.append(
                    Said(
                        f"model {model!r} has no response to case_id {case_id!r} (import the responses first)",
                        "import.no_response",
                        model=model,
                        case_id=case_id,
                    )
                )
            return None
        response_id, case_pk = found
        positions = self.criteria.get(case_pk)
        if positions is None:
            errors.append(
                Said(
                    f"criterion_id {criterion_id!r}: case {case_id!r} has no approved rubric",
                    "import.no_rubric",
                    criterion=criterion_id,
                    case_id=case_id,
                )
            )
            return None
        position = positions.get(criterion_id)
        if position is None:
            errors.append(
                Said(
                    f"criterion_id {criterion_id!r} is not in the current rubric of case {case_id!r}",
                    "import.criterion_not_current",
                    criterion=criterion_id,
                    case_id=case_id,
                )
            )
            return None
        return response_id, case_pk, position


def _table_has_rows(connection: Connection, table) -> bool:
    return connection.execute(select(table.c.id).limit(1)).first() is not None
