"""Labeling work in progress: three states per criterion, a server-side draft per response, time on task.

A criterion is *unjudged* until someone judges it: a response opens with its saved labels (those
made against the current rubric) or, when its annotator left decisions unsaved, with that draft.
Every decision is kept at once as a draft of (user, response), so a refresh, a closed tab or a
crash loses nothing. A save is refused while any criterion is unjudged, and names how many; once
saved, the draft is dropped and the active time spent on the response is stored with the save.

A draft remembers the lock versions of the labels the page showed when it was kept. A draft older
than the saved labels (someone, or the same annotator in another tab, saved since) is never
restored as it is: the response opens with the saved labels, and the criteria on which the draft
decided otherwise are listed with both values (`Workbench.differences`), so the physician decides
only those again. On a response whose labels are final (feedback of its round was opened) no
draft is kept or restored.

The save (the page calls it through db.labels) runs one way, from here into db/labeling/annotation.py:
`save` has annotation check and lock the response (`save_target`: assignment, blinding, final labels, rubric
changes), decides here whether the page's decisions are ready (known criteria, clean notes, none unjudged),
has annotation hand them to the label writer (`save_on_target` → db.label_rows.write: someone else's newer labels,
the rows, the audit entry, the kept figures), then keeps the time on task and drops the draft. Annotation
never reads drafts.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sqlmodel import Session, col, select

from db.access.policies import LabelPolicy, TimeOnTaskPolicy, authorize
from db.label_rows.refusals import UnjudgedCriteria
from db.labeling import annotation
from db.labeling.annotation import LabelingView, LabelInput, SaveOutcome
from db.labeling.draft_store import checked_decisions, discard_draft, kept_at, load_draft, save_draft
from db.rules.enums import Stage
from db.rules.errors import ValidationFailed
from db.store.models import LabelTiming, User, utcnow

#: A save whose active time is below this per criterion counts as very fast.
FAST_MS_PER_CRITERION = 1_000
#: What a draft may claim as active time, at most (a whole day; anything above is a broken clock).
MAX_ACTIVE_MS = 24 * 3600 * 1000

Decisions = Mapping[str, bool | None]


@dataclass(frozen=True)
class Difference:
    """A criterion on which a draft older than the saved labels decided otherwise: both values, for the physician."""

    criterion_id: str
    saved: bool | None  # None: no label saved on the current rubric
    saved_note: str
    draft: bool
    draft_note: str


@dataclass(frozen=True)
class Workbench:
    """One response as the labeling page opens it: the blinded view plus the working decisions."""

    view: LabelingView
    decisions: dict[str, bool | None]  # every criterion of the current rubric, in rubric order; None = unjudged
    notes: dict[str, str]
    unsaved: bool  # the decisions come from a draft that differs from what is saved
    active_ms: int  # active time already spent (from the draft)
    draft_at: datetime | None = None
    #: A draft older than the saved labels, where it differs from them (the decisions shown are the saved ones).
    differences: list[Difference] = field(default_factory=list)
    saved_by_self: bool = False  # every label saved since that draft was the user's own save (another tab)

    @property
    def unjudged(self) -> int:
        return sum(value is None for value in self.decisions.values())


def _draft_key(response_id: int) -> str:
    # Internal only: the key never leaves the server.
    return f"label:{response_id}"


def _saved_decisions(view: LabelingView) -> tuple[dict[str, bool | None], dict[str, str]]:
    """The saved labels that still count: those made against the current rubric; the rest unjudged."""
    decisions: dict[str, bool | None] = {}
    notes: dict[str, str] = {}
    for criterion in view.criteria:
        label = view.labels.get(criterion.criterion_id)
        if label is None or label.stale:
            decisions[criterion.criterion_id] = None
            continue
        decisions[criterion.criterion_id] = bool(label.met)
        if label.note:
            notes[criterion.criterion_id] = label.note
    return decisions, notes


def _seen_versions(draft: Mapping) -> dict[str, int]:
    """The lock versions of the labels shown when the draft was kept ({} for a draft that names none)."""
    seen = draft.get("seen")
    if not isinstance(seen, dict):
        return {}
    try:
        return {str(cid): int(version) for cid, version in seen.items()}
    except (TypeError, ValueError):
        return {}


def differences(
    saved: Mapping[str, bool | None],
    saved_notes: Mapping[str, str],
    decisions: Mapping[str, bool | None],
    notes: Mapping[str, str],
) -> list[Difference]:
    """The criteria (in `saved`'s order) the draft judged otherwise than saved: its decision or its note differs."""
    found = []
    for cid, saved_met in saved.items():
        draft_met = decisions.get(cid)
        if draft_met is None:
            continue  # undecided in the draft: nothing to decide again
        if (draft_met, notes.get(cid, "")) != (saved_met, saved_notes.get(cid, "")):
            found.append(Difference(cid, saved_met, saved_notes.get(cid, ""), draft_met, notes.get(cid, "")))
    return found


def open_response(session: Session, user: User, response_id: int) -> Workbench:
    """The response with its working decisions: the user's draft on the current rubric, else the saved labels.

    A draft kept before labels were saved since (its lock versions are not the saved ones) opens as the
    saved labels with the draft's differing criteria beside them; final labels open with no draft at all.
    """
    view = annotation.response_for_labeling(session, user, response_id)
    saved, saved_notes = _saved_decisions(view)
    draft = None if view.final else load_draft(session, user, _draft_key(response_id))
    if not draft or draft.get("rubric_version_id") != view.rubric_version_id:
        return Workbench(view, saved, saved_notes, unsaved=False, active_ms=int((draft or {}).get("active_ms") or 0))
    kept = draft.get("decisions") or {}
    decisions = {cid: (bool(kept[cid]) if kept.get(cid) is not None else None) for cid in saved}
    notes = {cid: str(text) for cid, text in (draft.get("notes") or {}).items() if cid in saved and text}
    active_ms, draft_at = int(draft.get("active_ms") or 0), kept_at(draft.get("at"))
    seen = _seen_versions(draft)
    shown = {cid: version for cid, version in view.expected_versions.items() if cid in saved}
    if seen != shown:
        changed = [cid for cid in saved if seen.get(cid) != shown.get(cid)]
        return Workbench(
            view,
            saved,
            saved_notes,
            unsaved=False,
            active_ms=active_ms,
            draft_at=draft_at,
            differences=differences(saved, saved_notes, decisions, notes),
            saved_by_self=bool(changed) and all(cid in view.mine for cid in changed),
        )
    unsaved = decisions != saved or notes != saved_notes
    return Workbench(view, decisions, notes, unsaved=unsaved, active_ms=active_ms, draft_at=draft_at)


def _clean(criterion_ids: list[str], decisions: Decisions, notes: Mapping[str, str] | None) -> tuple[dict, dict]:
    """Every criterion of the rubric with its decision (None: unjudged), and the non-empty notes."""
    given, cleaned_notes = checked_decisions(set(criterion_ids), decisions, notes, subject="labels")
    return {cid: given.get(cid) for cid in criterion_ids}, cleaned_notes


def _clean_versions(versions: Mapping[str, int], known: set[str]) -> dict[str, int]:
    """The lock versions a page sent with a draft, of the rubric's criteria (a label on a criterion of an older
    version does not matter to the draft), checked to be whole numbers."""
    try:
        return {str(cid): int(version) for cid, version in versions.items() if str(cid) in known}
    except (TypeError, ValueError):
        raise ValidationFailed("draft: lock versions are whole numbers", key="errors.draft_versions") from None


def _clean_active_ms(value) -> int:
    try:
        return max(0, min(int(value or 0), MAX_ACTIVE_MS))
    except (TypeError, ValueError):
        raise ValidationFailed("active time: a whole number of milliseconds", key="errors.active_time") from None


def keep_draft(
    session: Session,
    user: User,
    response_id: int,
    *,
    rubric_version_id: int,
    decisions: Decisions,
    notes: Mapping[str, str] | None = None,
    active_ms: int = 0,
    expected_versions: Mapping[str, int] | None = None,
) -> datetime:
    """Keep the user's working decisions on a response (called on each decision); returns when it was kept.

    `expected_versions` are the lock versions of the labels the page showed (criterion_id →
    lock_version; None: it showed none). Refused like a save when the response is not the user's,
    the rubric changed since the page loaded it (RubricChanged: the page reloads the response) or
    the labels are final (LabelsFinal, db/access/policies.py).
    """
    assigned = annotation.assigned_item(session, user, response_id)  # one statement: the assignment and the freeze
    user = authorize(session, user, LabelPolicy.change_annotation(final=assigned.final))
    response = assigned.response
    annotation.rubric_as_opened(session, response.case_pk, rubric_version_id)
    criterion_ids = annotation.criterion_ids_of(session, rubric_version_id)
    cleaned, cleaned_notes = _clean(criterion_ids, decisions, notes)
    payload = {
        "rubric_version_id": rubric_version_id,
        "decisions": cleaned,
        "notes": cleaned_notes,
        "active_ms": _clean_active_ms(active_ms),
        "seen": _clean_versions(expected_versions or {}, set(criterion_ids)),
        "at": (at := utcnow()).isoformat(),
    }
    save_draft(session, user, _draft_key(response_id), payload)
    return at


def discard(session: Session, user: User, response_id: int) -> bool:
    """Throw the user's draft of a response away (back to the saved labels)."""
    annotation.assigned_response(session, user, response_id)
    return discard_draft(session, user, _draft_key(response_id))


def _ready_inputs(criterion_ids: list[str], decisions: Decisions, notes: Mapping[str, str] | None) -> list[LabelInput]:
    """The page's decisions as one label per criterion of the rubric, in rubric order.

    Refused like a draft when a criterion is unknown, a decision is not met, not met or undecided, or a note
    is too long; refused with UnjudgedCriteria while any criterion is unjudged.
    """
    cleaned, cleaned_notes = _clean(criterion_ids, decisions, notes)
    unjudged = sum(value is None for value in cleaned.values())
    if unjudged:
        raise UnjudgedCriteria(unjudged)
    return [LabelInput(cid, bool(met), cleaned_notes.get(cid)) for cid, met in cleaned.items()]


def save(
    session: Session,
    user: User,
    response_id: int,
    *,
    rubric_version_id: int,
    decisions: Decisions,
    notes: Mapping[str, str] | None = None,
    expected_versions: Mapping[str, int],
    active_ms: int = 0,
) -> SaveOutcome:
    """Save the working decisions as labels; refused (UnjudgedCriteria) while any criterion is unjudged.

    Then the draft is dropped and the active time is stored with the save.
    """
    # Refused here when the response is not the user's or the rubric changed; its row is locked from here on.
    target = annotation.save_target(session, user, response_id, rubric_version_id=rubric_version_id)
    inputs = _ready_inputs(target.criterion_ids, decisions, notes)
    outcome = annotation.save_on_target(session, user, target, inputs, expected_versions=expected_versions)
    if outcome.changed and user.id is not None:
        # A re-save of identical decisions is not new work.
        session.add(
            LabelTiming(
                user_id=user.id,
                response_id=response_id,
                stage=Stage.annotation,
                rubric_version_id=outcome.rubric_version_id,
                active_ms=_clean_active_ms(active_ms),
                n_criteria=len(inputs),
            )
        )
    discard_draft(session, user, _draft_key(response_id))
    session.flush()
    return outcome


# Time on task (admins) --------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeOnTask:
    username: str
    group_no: int | None
    saves: int
    median_seconds: float  # active time per response
    median_ms_per_criterion: float
    fast_saves: int  # saves under FAST_MS_PER_CRITERION per criterion

    @property
    def fast_share(self) -> float:
        return self.fast_saves / self.saves if self.saves else 0.0


def is_fast(active_ms: int, n_criteria: int) -> bool:
    return n_criteria > 0 and active_ms < FAST_MS_PER_CRITERION * n_criteria


def time_on_task(session: Session, *, actor: User, stage: str = Stage.annotation) -> list[TimeOnTask]:
    """Per person: saves, median active time per response and per criterion, very fast saves (admins only)."""
    authorize(session, actor, TimeOnTaskPolicy.manage())
    rows = session.exec(
        select(User.username, User.group_no, LabelTiming.active_ms, LabelTiming.n_criteria)
        .join(User, col(User.id) == col(LabelTiming.user_id))
        .where(LabelTiming.stage == stage)
    ).all()
    by_user: dict[tuple[str, int | None], list[tuple[int, int]]] = {}
    for username, group_no, active_ms, n_criteria in rows:
        by_user.setdefault((username, group_no), []).append((active_ms, n_criteria))
    return [
        _summary(username, group_no, items)
        for (username, group_no), items in sorted(by_user.items(), key=lambda item: (item[0][1] or 0, item[0][0]))
    ]


def _summary(username: str, group_no: int | None, items: Iterable[tuple[int, int]]) -> TimeOnTask:
    items = list(items)
    per_criterion = [active / n for active, n in items if n]
    return TimeOnTask(
        username=username,
        group_no=group_no,
        saves=len(items),
        median_seconds=statistics.median(active for active, _ in items) / 1000,
        median_ms_per_criterion=statistics.median(per_criterion) if per_criterion else 0.0,
        fast_saves=sum(is_fast(active, n) for active, n in items),
    )
