"""Which export `clinconsensus export WHAT` runs, each imported when it is the one asked for (the judgement
files alone bring scipy), and the record an SFT export leaves for the judge pages."""

from __future__ import annotations

from pathlib import Path


def run_export(args, engine, basis: str, progress, *, models: list[str]):
    """The summary of the export `args.what` into `args.target` (the command's options checked already)."""
    if args.what == "gold":
        from analysis.exports.gold import export_gold

        summary = export_gold(engine, Path(args.target), progress=progress, basis=basis)
    elif args.what == "release":
        from analysis.exports.release import export_release

        summary = export_release(engine, Path(args.target), difficulties=args.difficulty or None, progress=progress)
    elif args.what == "judgements":
        options = {
            "source": args.source,
            "models": models,
            "k": args.k,
            "per_model": args.per_model,
            "basis": basis,
        }
        from analysis.exports.judgements import export_judgements

        summary = export_judgements(engine, Path(args.target), progress=progress, **options)
    elif args.what == "judge-items":
        from analysis.exports.judge_items import export_judge_items

        summary = export_judge_items(engine, Path(args.target), progress=progress)
    elif args.what == "leaderboard":
        from cli.scores import export_newest

        summary = export_newest(engine, Path(args.target))
    elif args.what == "healthbench-meta":
        from analysis.exports.healthbench_meta import export_healthbench_meta

        summary = export_healthbench_meta(engine, Path(args.target), progress=progress, basis=basis)
    else:
        holdout = [m for m in (args.holdout_models or "").split(",") if m]
        from analysis.exports.sft import export_sft

        summary = export_sft(
            engine,
            Path(args.target),
            seed=args.seed,
            holdout_models=holdout,
            fmt=args.format,
            dev_fraction=args.dev_fraction,
            template_path=args.template,
            progress=progress,
            include_calibration=args.include_calibration,
            only_disagreements=args.only_disagreements,
            basis=basis,
        )
        _record_sft(engine, holdout, args.seed)
    return summary


def _record_sft(engine, holdout: list[str], seed: int) -> None:
    """The judge pages measure a judge on the models the newest SFT export held out of its training."""
    from db.access import users
    from db.access.export_records import record_export
    from db.store.engine import session_scope

    with session_scope(engine) as session:
        details = {"holdout_models": sorted(set(holdout)), "seed": seed}
        record_export(session, actor=users.actor_name(users.CLI_ACTOR), kind="sft", details=details)
