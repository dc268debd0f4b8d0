"""Alembic environment: runs on the connection handed in by `db.store.migrate`, or on DATABASE_URL."""

from alembic import context
from sqlmodel import SQLModel

import db.store.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from db.store.engine import make_engine, sqlite_foreign_keys_off

target_metadata = SQLModel.metadata


def run_migrations() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(context.config.get_main_option("sqlalchemy.url") or None)
    with engine.connect() as connection, sqlite_foreign_keys_off(connection):
        _run(connection)
        connection.commit()


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
