"""What the decision workbench (ui/workbench.py) sends, sent from AppTest as the browser would.

AppTest has no driver for components v2 elements: these helpers add the component's widget states
(its "work" state, a "save" or a "go" trigger) to the next run, so the page's callbacks run as they do when
a physician decides or presses Ctrl+Enter. The keys and clicks themselves are driven in tests/e2e/.
"""

from __future__ import annotations

import json
from typing import Any

from streamlit.components.v2.bidi_component.main import _make_trigger_id
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest


def workbench_element(app: AppTest):
    [element] = [e for e in app.get("bidi_component") if (e.key or "").startswith("wb_")]
    return element


def workbench_data(app: AppTest) -> dict[str, Any]:
    return json.loads(workbench_element(app).proto.json)


def _run_with(app: AppTest, extra: list[WidgetState]) -> AppTest:
    tree = app._tree
    states = tree.get_widget_states()
    ids = {state.id for state in extra}
    kept = [state for state in states.widgets if state.id not in ids]
    del states.widgets[:]
    states.widgets.extend(kept + extra)
    return app._run(states)


def send_work(app: AppTest, decisions: dict[str, bool | None], notes: dict[str, str] | None = None, **more) -> AppTest:
    """The workbench's "work" state after a decision (kept as a draft), for the item now loaded."""
    data = workbench_data(app)
    value = {"token": data["token"], "decisions": decisions, "notes": notes or {}, "active_ms": 1000, **more}
    state = WidgetState(id=workbench_element(app).proto.id, json_value=json.dumps({"work": value}))
    return _run_with(app, [state])


def send_save(app: AppTest, decisions: dict[str, bool | None], notes: dict[str, str] | None = None, **more) -> AppTest:
    """The workbench's "save" trigger (Ctrl+Enter) with these decisions, for the item now loaded."""
    data = workbench_data(app)
    value = {
        "token": data["token"],
        "decisions": decisions,
        "notes": notes or {},
        "active_ms": 1000,
        "advance": True,
        **more,
    }
    trigger = _make_trigger_id(workbench_element(app).proto.id, "events")
    state = WidgetState(id=trigger, json_trigger_value=json.dumps([{"event": "save", "value": value}]))
    return _run_with(app, [state])


def send_go(app: AppTest, direction: int) -> AppTest:
    """The workbench's "go" trigger (J: 1, K: -1) on a page whose J/K move between responses."""
    data = workbench_data(app)
    trigger = _make_trigger_id(workbench_element(app).proto.id, "events")
    value = {"token": data["token"], "direction": direction}
    state = WidgetState(id=trigger, json_trigger_value=json.dumps([{"event": "go", "value": value}]))
    return _run_with(app, [state])
