"""Bring any database up to the current schema with the Alembic revisions shipped in db/migrations.

A database already at `HEAD_REVISION` is recognised by one query, without loading Alembic and its
revision scripts. A database stamped with a revision's earlier identifier (`LEGACY_REVISIONS`) is
restamped with today's first. What an upgrade does after the revisions (the kept figures, the audit key
the revisions are handed) is db.migrations.upgrade's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from db.store.engine import get_engine, sqlite_foreign_keys_off

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent.parent / "migrations"
#: The newest revision in db/migrations/versions; tests/db/store/test_foundation_basics.py checks that it is the
#: head Alembic finds, so a new revision cannot be added without it.
HEAD_REVISION = "0030_drop_row_totals"

#: The identifiers the revisions had before their files were named in chain order (a database made then
#: carries one of these in alembic_version). Frozen: a new revision never enters this table.
LEGACY_REVISIONS = {
    "0001": "0001_initial_schema",
    "0002": "0002_label_queue_index",
    "0004": "0003_label_timing",
    "0003": "0004_independence_and_sign_in",
    "0005": "0005_judge_runs",
    "0007": "0006_kept_figures",
    "0003a": "0007_oidc_identity",
    "0008": "0008_feedback_rounds",
    "0009": "0009_assignment_state",
    "0010": "0010_feedback_figures",
    "0011": "0011_labels_that_count",
    "0012": "0012_scores_you_can_defend",
    "0015": "0013_provider_sign_in",
    "0016": "0014_audit_seal",
    "0017": "0015_disagreement_draws",
    "0018": "0016_generate_runs",
    "0019": "0017_run_message_words",
    "0020": "0018_assignment_round_index",
    "0021": "0019_adjudication_ready",
    "0022": "0020_label_totals",
    "0023": "0021_admin_page_indexes",
    "0024": "0022_judge_totals",
    "0025": "0023_assignment_totals",
    "0026": "0024_unresolved_and_row_totals",
    "0027": "0025_queue_lookup_indexes",
}


def alembic_config(url: str | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migrations have no head revision")
    return head


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def _stored_revision(engine: Engine) -> str | None:
    """The revision recorded in the database by one plain query; None without a (single) record."""
    try:
        with engine.connect() as connection:
            rows = connection.exec_driver_sql("SELECT version_num FROM alembic_version").fetchall()
    except DBAPIError:  # no alembic_version table yet: a new database
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


def _restamp_legacy(engine: Engine, stored: str | None) -> None:
    if stored in LEGACY_REVISIONS:
        with engine.begin() as connection:
            connection.exec_driver_sql(
                "UPDATE alembic_version SET version_num = %s WHERE version_num = %s"
                if engine.dialect.name == "postgresql"
                else "UPDATE alembic_version SET version_num = ? WHERE version_num = ?",
                (LEGACY_REVISIONS[stored], stored),
            )


def upgrade(engine: Engine | None = None, *, attributes: dict[str, Callable[[], Any]] | None = None) -> bool:
    """Apply every revision the database lacks; True when any was applied (a database at head is left
    untouched). `attributes` are handed to the revisions through the migration context."""
    engine = engine or get_engine()
    stored = _stored_revision(engine)
    if stored == HEAD_REVISION:
        return False
    _restamp_legacy(engine, stored)
    if current_revision(engine) == head_revision():
        return False
    from alembic import command

    config = alembic_config()
    config.attributes.update(attributes or {})
    with engine.connect() as connection, sqlite_foreign_keys_off(connection):
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        connection.commit()
    return True
