"""Import at full scale on SQLite and PostgreSQL: seconds, rows per second, peak memory.

Full scale is 2,500 cases × 30 criteria × 11 models × 2 groups = 1.65 M annotation labels
(DESIGN §6). Each import runs in its own process so its peak RSS is the import's own. The
figures are printed beside the targets; nothing is asserted.

    python benchmarks/bench_import.py                  # full scale, SQLite and PostgreSQL
    python benchmarks/bench_import.py --cases 250      # a tenth, for a quick look
    python benchmarks/bench_import.py --skip-postgres
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from db import config  # noqa: E402

FULL_CASES = 2_500
MODELS = 11
GROUPS = (1, 2)
ANNOTATORS_PER_GROUP = 12
TARGET_CASES_RESPONSES_S = 15.0
TARGET_LABELS_S = 60.0
TARGET_PEAK_MB = 1024.0
#: Labels written one ORM object and one commit at a time, to compare against.
BASELINE_SAMPLE = 2_000

_SENTENCES = ["患者男性，六十五岁，既往高血压病史十年，规律服用氨氯地平。", "近两日出现活动后胸闷气短，休息后可缓解。",
              "查体：血压150/90毫米汞柱，心率88次每分，双肺呼吸音清。", "心电图提示窦性心律，ST段轻度压低。",
              "家属担心病情加重，希望了解下一步检查和治疗安排。", "肌钙蛋白阴性，血脂偏高，空腹血糖6.8毫摩尔每升。"]
_ANSWER = ["建议尽快到心内科门诊就诊，完善运动负荷试验或冠脉CT检查。", "在此之前避免剧烈活动，按时服用降压药物。",
           "如出现持续胸痛超过十五分钟、大汗或呼吸困难，应立即拨打急救电话。", "同时注意低盐低脂饮食，控制体重，戒烟限酒。",
           "血糖偏高需复查糖化血红蛋白，必要时内分泌科随诊。"]
_THEMES = ["differential_diagnosis", "treatment_planning", "patient_education", "lab_interpretation",
           "medication_instructions", "follow_up_monitoring"]
_SUBJECTS = ["心内科", "呼吸内科", "消化内科", "神经内科", "儿科", "骨科"]


# Data ----------------------------------------------------------------------------------------

def write_full_scale(directory: Path, *, cases: int = FULL_CASES, models: int = MODELS, seed: int = 7) -> dict[str, Path]:
    """cases.jsonl, responses.jsonl and labels.jsonl (annotation labels of both groups) in `directory`."""
    rng = random.Random(seed)
    n = config.RUBRIC_SIZE
    model_names = [f"model-{index:02d}" for index in range(1, models + 1)]
    paths = {name: directory / f"{name}.jsonl" for name in ("cases", "responses", "labels")}
    with open(paths["cases"], "w", encoding="utf-8") as case_file, \
         open(paths["responses"], "w", encoding="utf-8") as response_file, \
         open(paths["labels"], "w", encoding="utf-8") as label_file:
        for index in range(1, cases + 1):
            case_id = f"CC-{index:05d}"
            case = {
                "case_id": case_id, "difficulty": rng.choice(["low", "medium", "high"]),
                "task": "鉴别诊断", "task_labels": rng.sample(_THEMES, 2), "subject": (subject := rng.choice(_SUBJECTS)),
                "subject_labels": [subject], "user_role": rng.choice(["患者家属", "心内科医生", "患者本人", "规培医生"]),
                "clinical_context": "".join(rng.choices(_SENTENCES, k=8)), "user_request": "请问下一步应该怎么办？",
                "rubrics": [{"criterion_id": f"c{i:02d}", "criterion": f"回答应说明第{i}项要点：{rng.choice(_ANSWER)}",
                             "tags": ["completeness"]} for i in range(1, n + 1)],
            }
            case_file.write(json.dumps(case, ensure_ascii=False) + "\n")
            for model in model_names:
                text = "".join(rng.choices(_ANSWER, k=rng.randint(10, 40)))
                response_file.write(json.dumps({"case_id": case_id, "model": model, "response": text},
                                               ensure_ascii=False) + "\n")
                skill = rng.random()
                for group in GROUPS:
                    annotator = f"g{group}_annotator{rng.randrange(ANNOTATORS_PER_GROUP) + 1:02d}"
                    for i in range(1, n + 1):
                        label_file.write(json.dumps({
                            "case_id": case_id, "model": model, "criterion_id": f"c{i:02d}",
                            "met": rng.random() < skill, "stage": "annotation", "group": group,
                            "annotator": annotator}, ensure_ascii=False) + "\n")
    return paths


# One import, in a child process --------------------------------------------------------------

def peak_rss_mb() -> float:
    """This process's own high-water mark (VmHWM starts afresh at exec, unlike ru_maxrss)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(url: str, kind: str, path: str) -> None:
    from db.engine import make_engine
    from db.importers import import_file

    engine = make_engine(url)
    started, cpu_started = time.perf_counter(), time.process_time()
    summary = import_file(engine, kind, Path(path), actor="bench")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    engine.dispose()
    print(json.dumps({"seconds": seconds, "cpu": cpu, "records": summary.records, "inserted": summary.inserted,
                      "unchanged": summary.unchanged, "peak_mb": peak_rss_mb()}))


def run_child(url: str, kind: str, path: Path) -> dict:
    result = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", url, kind, str(path)],
                            capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(f"import of {path.name} failed:\n{result.stderr.strip()}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# The straightforward way, for comparison -----------------------------------------------------

def baseline_seconds_per_label(url: str, paths: dict[str, Path], sample: int) -> float:
    """One ORM object and one commit per label, with the lookups a simple importer makes per row.

    Measured on `sample` check-stage rows (the annotation rows are in place already) and
    extrapolated by the caller.
    """
    from sqlmodel import Session, select

    from db.engine import make_engine
    from db.models import Case, Label, Response, RubricStatus, RubricVersion, User

    engine = make_engine(url)
    rows = []
    with open(paths["labels"], encoding="utf-8") as handle:
        for line in handle:
            rows.append(json.loads(line))
            if len(rows) >= sample:
                break
    started = time.perf_counter()
    with Session(engine) as session:
        for row in rows:
            response = session.exec(select(Response).join(Case, Response.case_pk == Case.id)
                                    .where(Case.case_id == row["case_id"], Response.model == row["model"])).one()
            version = session.exec(select(RubricVersion).where(RubricVersion.case_pk == response.case_pk,
                                                               RubricVersion.status == RubricStatus.approved)
                                   .order_by(RubricVersion.version.desc())).first()
            user = session.exec(select(User).where(User.username == row["annotator"])).one()
            session.add(Label(response_id=response.id, criterion_id=row["criterion_id"], stage="check",
                              group_no=row["group"], met=row["met"], user_id=user.id, rubric_version_id=version.id))
            session.commit()
    seconds = time.perf_counter() - started
    engine.dispose()
    return seconds / len(rows)


# Report --------------------------------------------------------------------------------------

def measure(backend: str, url: str, paths: dict[str, Path]) -> dict:
    from db.engine import make_engine
    from db.migrate import upgrade

    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    cases = run_child(url, "cases", paths["cases"])
    responses = run_child(url, "responses", paths["responses"])
    labels = run_child(url, "labels", paths["labels"])
    return {"backend": backend, "cases": cases, "responses": responses, "labels": labels}


def _flag(value: float, target: float) -> str:
    return "within target" if value < target else "OVER TARGET"


def report(result: dict, scale: float) -> None:
    cases, responses, labels = result["cases"], result["responses"], result["labels"]
    both = cases["seconds"] + responses["seconds"]
    peak = max(cases["peak_mb"], responses["peak_mb"], labels["peak_mb"])
    note = "" if scale == 1 else f"  (at {scale:.0%} of full scale)"
    print(f"\n{result['backend']}{note}   (wall seconds; importer CPU seconds beside them; peak RSS of the "
          f"importing process)")
    for name, figures in (("cases", cases), ("responses", responses), ("labels", labels)):
        print(f"  {name:<10} {figures['records']:>10,} rows  {figures['seconds']:7.2f} s  "
              f"(cpu {figures['cpu']:6.2f} s)  {figures['records'] / figures['seconds']:>10,.0f} rows/s  "
              f"peak {figures['peak_mb']:6.0f} MB")
    print(f"  cases + responses {both:7.2f} s   target < {TARGET_CASES_RESPONSES_S:.0f} s   {_flag(both, TARGET_CASES_RESPONSES_S)}")
    print(f"  labels            {labels['seconds']:7.2f} s   target < {TARGET_LABELS_S:.0f} s   "
          f"{_flag(labels['seconds'], TARGET_LABELS_S)}")
    print(f"  peak memory       {peak:7.0f} MB  target < {TARGET_PEAK_MB:.0f} MB  {_flag(peak, TARGET_PEAK_MB)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=FULL_CASES, help="number of cases (full scale: 2,500)")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--baseline-sample", type=int, default=BASELINE_SAMPLE)
    parser.add_argument("--child", nargs=3, metavar=("URL", "KIND", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0

    scale = args.cases / FULL_CASES
    with tempfile.TemporaryDirectory(prefix="cc-bench-import-") as folder:
        directory = Path(folder)
        started = time.perf_counter()
        paths = write_full_scale(directory, cases=args.cases)
        sizes = ", ".join(f"{path.name} {path.stat().st_size / 2**20:,.0f} MB" for path in paths.values())
        print(f"generated {args.cases:,} cases × {config.RUBRIC_SIZE} criteria × {MODELS} models × {len(GROUPS)} groups "
              f"in {time.perf_counter() - started:.1f} s ({sizes})")

        sqlite_url = f"sqlite:///{directory / 'bench.db'}"
        sqlite_result = measure("SQLite", sqlite_url, paths)
        report(sqlite_result, scale)
        per_label = baseline_seconds_per_label(sqlite_url, paths, args.baseline_sample)
        extrapolated = per_label * sqlite_result["labels"]["records"]
        print(f"  straightforward importer (one ORM object + commit per label), measured on {args.baseline_sample:,} "
              f"rows and EXTRAPOLATED to {sqlite_result['labels']['records']:,}: {extrapolated:,.0f} s "
              f"— {extrapolated / sqlite_result['labels']['seconds']:,.0f}× slower than the streamed import")

        if not args.skip_postgres:
            from tests.pg_server import PostgresServer, PostgresUnavailable

            try:
                server = PostgresServer().start()
            except PostgresUnavailable as error:
                print(f"\nPostgreSQL skipped: {error}")
                return 0
            try:
                import sqlalchemy as sa

                admin = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
                with admin.connect() as connection:
                    connection.exec_driver_sql("CREATE DATABASE bench")
                admin.dispose()
                report(measure("PostgreSQL", server.url("bench"), paths), scale)
            finally:
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
