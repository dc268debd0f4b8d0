"""The New model page opens on the newest model: db.work.generation.models_newest_first."""

from __future__ import annotations

from datetime import timedelta

import pytest

from db.rules.errors import PermissionDenied
from db.store.models import JudgeRun, Response, utcnow
from db.work.generation import models_newest_first
from tests.support.factories import make_case, make_response, make_user


def test_models_come_newest_first(session):
    case = make_case(session, "CC-0001", n=1)
    start = utcnow()
    for offset, model in ((1, "old-model"), (3, "new-model"), (2, "middle-model")):
        response = make_response(session, case, model, f"R-{model}")
        response.created_at = start + timedelta(minutes=offset)
        session.add(response)
    # A model generate runs are making, with no response yet: by when its run was created.
    session.add(
        JudgeRun(
            kind="generate",
            judge="generating",
            model="served",
            base_url="http://x/v1",
            template="-",
            template_sha256="0" * 64,
            created_by="boss",
            created_at=start + timedelta(minutes=4),
        )
    )
    session.commit()
    admin = make_user(session, "boss", "admin")
    assert models_newest_first(session, actor=admin) == ["generating", "new-model", "middle-model", "old-model"]
    # A new response of an old model makes it the newest.
    late = make_response(session, make_case(session, "CC-0002", n=1), "old-model", "R-late")
    late.created_at = start + timedelta(minutes=5)
    session.add(late)
    session.commit()
    assert models_newest_first(session, actor=admin)[0] == "old-model"
    assert session.get(Response, late.id) is not None


def test_only_an_admin_reads_the_models(session):
    make_response(session, make_case(session, "CC-0001", n=1), "secret-model", "R")
    annotator = make_user(session, "ann", "annotator", 1)
    with pytest.raises(PermissionDenied):
        models_newest_first(session, actor=annotator)
