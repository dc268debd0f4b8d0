"""The tables the kept figures are written to and counted from, as this room's statements name them."""

from __future__ import annotations

from sqlalchemy.engine import Connection
from sqlmodel import Session, SQLModel

from db.store.models import (
    AdjudicationReady,
    AssignmentTotal,
    JudgeTotal,
    LabelTally,
    LabelTotal,
    ResponseStatus,
    UnresolvedTotal,
)

LABEL = SQLModel.metadata.tables["label"]
TALLY = SQLModel.metadata.tables[LabelTally.__tablename__]
TOTALS = SQLModel.metadata.tables[LabelTotal.__tablename__]
ASSIGNMENT_TOTALS = SQLModel.metadata.tables[AssignmentTotal.__tablename__]
JUDGE_TOTALS = SQLModel.metadata.tables[JudgeTotal.__tablename__]
JUDGE_DECISION = SQLModel.metadata.tables["judge_decision"]
STATUS = SQLModel.metadata.tables[ResponseStatus.__tablename__]
UNRESOLVED_TOTALS = SQLModel.metadata.tables[UnresolvedTotal.__tablename__]
READY = SQLModel.metadata.tables[AdjudicationReady.__tablename__]
RESPONSE = SQLModel.metadata.tables["response"]
ASSIGNMENT = SQLModel.metadata.tables["assignment"]
CRITERION = SQLModel.metadata.tables["criterion"]
CASE = SQLModel.metadata.tables["case"]

#: The columns of a response's status row, in the order readers and `status_of_labels` give them.
STATUS_COLUMNS = ["response_id", "n_compared", "n_differing", "n_unresolved", "n_gold"]


def connection_of(session_or_connection: Session | Connection) -> Connection:
    """The connection a statement of the caller's transaction runs on."""
    if isinstance(session_or_connection, Session):
        return session_or_connection.connection()
    return session_or_connection
