"""Calibration samples: the physician-labeled responses behind a judge-scored model's calibrated score.

`draw_calibration_sample` draws a uniform random sample (seeded, without replacement) of a model's
responses on cases with an approved rubric. The seed is the server's own, drawn from the operating
system's randomness when none is given, so an admin cannot preview seeds and keep the best sample; a
seed given (`--seed N`, for replays and tests) is recorded as given. The draw gives each response one
annotator of each expert group like any labeling work (`db.work.assignments.assign_labeling`) and
records it as the model's calibration sample — once per model: the calibrated score is unbiased only
for a sample drawn before anyone knew its labels, so a second draw (which could be chosen for a better
score) is refused. One audit entry names the model, the seed (and whether the server drew it) and the
responses drawn; the assignments are audit entries of their own.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field

from sqlmodel import Session, col, select

from db.access.audit import record
from db.access.policies import CalibrationPolicy, SystemActor, authorize
from db.rules.errors import NotFound, ValidationFailed
from db.store.current_rubric import current_version_ids
from db.store.judges import response_models as store_response_models
from db.store.models import CalibrationSample, Case, Response, User, utcnow
from db.work.assignments import AssignmentSummary, active_annotators, assign_labeling

DEFAULT_SAMPLE_SIZE = 60
#: A server-drawn seed is below this (it fits the seed column on both databases).
SEED_LIMIT = 2**31


@dataclass
class CalibrationDraw:
    model: str
    seed: int
    response_ids: list[int]
    case_ids: list[str]
    assignments: AssignmentSummary = field(default_factory=AssignmentSummary)

    def lines(self) -> list[str]:
        return [
            f"calibration sample of {self.model}: {len(self.response_ids)} responses (seed {self.seed})",
            *self.assignments.lines(),
        ]


def sampled_models(session: Session, *, actor: User | SystemActor) -> dict[str, int]:
    """model → size of its calibration sample, for every model that has one (admins: it names models)."""
    authorize(session, actor, CalibrationPolicy.manage())
    rows = session.exec(select(CalibrationSample.model, CalibrationSample.response_id)).all()
    sizes: dict[str, int] = {}
    for model, _ in rows:
        sizes[model] = sizes.get(model, 0) + 1
    return dict(sorted(sizes.items()))


def response_models(session: Session, *, actor: User | SystemActor) -> list[str]:
    """Every model with responses, by name (what a sample can be drawn of; admins only)."""
    authorize(session, actor, CalibrationPolicy.manage())
    return store_response_models(session)


def _eligible_responses(session: Session, model: str) -> list[tuple[int, int]]:
    """(response id, case_pk) of the model's responses on cases with an approved rubric, by response id."""
    rows = session.exec(
        select(col(Response.id), col(Response.case_pk)).where(col(Response.model) == model).order_by(col(Response.id))
    ).all()
    if not rows:
        raise NotFound(f"model {model!r}: no responses", key="errors.model_unknown", params={"model": model})
    approved = current_version_ids(session, {case_pk for _, case_pk in rows})
    return [(int(response_id), case_pk) for response_id, case_pk in rows if response_id and case_pk in approved]


def draw_calibration_sample(
    session: Session, *, actor: User | SystemActor, model: str, n: int = DEFAULT_SAMPLE_SIZE, seed: int | None = None
) -> CalibrationDraw:
    """Draw, assign and record `model`'s calibration sample of `n` responses (the caller commits).

    `seed` None: the server draws one at random and the audit entry records it (`seed_source` "server");
    a seed given is recorded as given (`seed_source` "given")."""
    actor = authorize(session, actor, CalibrationPolicy.manage())
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValidationFailed(f"--n must be a whole number of at least 1, got {n!r}", key="errors.sample_size")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT):
        raise ValidationFailed(
            f"--seed must be a whole number from 0 to {SEED_LIMIT - 1}, got {seed!r}",
            key="errors.calibration_seed",
            params={"limit": SEED_LIMIT - 1},
        )
    seed_source = "server" if seed is None else "given"
    if session.exec(select(CalibrationSample.id).where(CalibrationSample.model == model).limit(1)).first():
        raise ValidationFailed(
            f"model {model!r} already has a calibration sample; a model is sampled once",
            key="errors.calibration_exists",
            params={"model": model},
        )
    eligible = _eligible_responses(session, model)
    if len(eligible) < n:
        raise ValidationFailed(
            f"model {model!r}: {len(eligible)} responses on cases with an approved rubric, fewer than --n {n}",
            key="errors.calibration_too_few",
            params={"model": model, "available": len(eligible), "n": n},
        )
    if seed is None:
        seed = secrets.randbelow(SEED_LIMIT)
    chosen = sorted(random.Random(seed).sample(eligible, n))
    response_ids = [response_id for response_id, _ in chosen]
    annotators = [user.username for user in active_annotators(session)]
    summary = assign_labeling(session, actor=actor, annotators=annotators, response_ids=response_ids)
    now = utcnow()
    session.add_all(
        CalibrationSample(model=model, response_id=response_id, seed=seed, drawn_at=now, drawn_by=actor.username)
        for response_id in response_ids
    )
    case_of = dict(
        session.exec(select(col(Case.id), col(Case.case_id)).where(col(Case.id).in_({pk for _, pk in chosen}))).all()
    )
    codes = dict(
        session.exec(select(col(Response.id), col(Response.code)).where(col(Response.id).in_(response_ids))).all()
    )
    case_ids = [case_of[case_pk] for _, case_pk in sorted(chosen, key=lambda item: item[1])]
    record(
        session,
        actor.username,
        action="create",
        entity="calibration_sample",
        entity_key=model,
        before=None,
        after={
            "model": model,
            "seed": seed,
            "seed_source": seed_source,
            "n": n,
            "responses": [codes[r] for r in response_ids],
        },
    )
    session.flush()
    return CalibrationDraw(model=model, seed=seed, response_ids=response_ids, case_ids=case_ids, assignments=summary)
