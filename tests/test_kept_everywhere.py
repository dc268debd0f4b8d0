"""The kept figures follow every writer: a program that imports only the engine and the tables (as a
script or a test fixture does) still gets each new labeling assignment's state written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from db.store.engine import make_engine
from db.store.migrate import upgrade

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """
import sys
from sqlmodel import Session, select
from db.store.engine import make_engine
from db.store.models import Assignment, AssignmentKind, RubricStatus
from tests.support.factories import make_case, make_response, make_user

engine = make_engine(sys.argv[1])
with Session(engine) as session:
    user = make_user(session, "g2", group_no=2)
    case = make_case(session, "C1", n=3, status=RubricStatus.approved)
    response = make_response(session, case, "m", "x")
    session.add(
        Assignment(kind=AssignmentKind.label, case_pk=case.id, response_id=response.id, user_id=user.id, group_no=2)
    )
    session.commit()
    print(session.exec(select(Assignment.label_status, Assignment.labeled, Assignment.rubric_size)).one())
"""


def test_a_writer_importing_only_the_engine_keeps_the_assignment_state(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    upgrade(make_engine(url))  # migrated here: the writer below imports no migration
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "('todo', 0, 3)"
