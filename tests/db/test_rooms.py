"""Each room of db/ states its public API and what it may import, and the API it states exists."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import db

ROOMS = sorted(module.name for module in pkgutil.iter_modules(db.__path__) if module.ispkg)


def test_db_has_its_rooms():
    assert {"rules", "store", "counts", "access", "rubrics", "labeling", "review", "importers", "work"} <= set(ROOMS)


@pytest.mark.parametrize("room", [room for room in ROOMS if room != "migrations"])
def test_a_room_states_its_public_api_and_every_name_in_it_exists(room):
    package = importlib.import_module(f"db.{room}")
    assert "May import:" in (package.__doc__ or "")
    public = getattr(package, "__all__", None)
    assert public, f"db.{room} states no public API (__all__)"
    for name in public:
        assert not name.startswith("_")
        if not hasattr(package, name):
            importlib.import_module(f"db.{room}.{name}")  # a public module of the room
