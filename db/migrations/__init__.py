"""The Alembic revisions, from the first schema on, their environment, and the upgrade every command runs.

Each revision is self-contained: its schema change and any backfill are frozen inside it, importing
nothing of the product (what it needs from the product, the audit key, is handed to it). The upgrade
(`upgrade`) applies the revisions through db.store.migrate, then rebuilds the kept figures (derived from
the rows) by today's db/counts, so the migrations stand above every other room.

May import: every db room.
"""
