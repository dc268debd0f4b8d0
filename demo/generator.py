"""Synthetic ClinConsensus data: a small believable demo for trying the app, and the full-scale set.

`write_demo_files` writes the data as the JSON Lines files of DESIGN §3 (cases, responses, labels,
judge decisions) plus `plan.json` (who is assigned what). `build_demo` creates the demo accounts,
writes the files to a temporary folder and loads them through the importers — the one path into
the database — then hands out work through the assignment and rubric functions, so every page
has something to show.

Scales:
- ``small``: 30 Chinese cases over all 8 macro-categories, 3 difficulties and both registers;
  about two thirds with an approved rubric of 30 criteria, the rest waiting for one (one of them
  submitted for audit); 5 models; partial labels from both groups, some checks, a few
  adjudications, some disagreements left open, some responses unlabeled; 2 judges.
- ``full``: 2,500 cases × 30 criteria × 11 models, both groups labeling every decision
  (1.65 M annotation labels), checks and adjudications on a share, 3 judges on every decision.

Labels follow a latent "truth": each (response, criterion) is met with a probability that depends
on the model (ability, consistency, strengths by kind of criterion and by macro-category) and on
the case (difficulty, case effect), so models rank differently at different thresholds and by
different judges. Each group misses the truth ~6 % of the time (≈ 88 % agreement). The text of a
response mentions exactly the case facts its model "met", so a physician reading the demo finds
the labels plausible, and longer answers score a little higher.

Same scale, seed and sizes → byte-identical files.

Demo passwords are random per installation and printed once (`DemoResult.lines()`). Set
CLINCONSENSUS_DEMO_PASSWORD to give every demo account that one password instead (automated
browser tests log in with it). The demo goes only into a database without cases and without the
demo accounts; otherwise `build_demo` refuses with ValidationFailed and changes nothing.
"""

from __future__ import annotations

import json
import secrets
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import select

from db import users
from db.assignments import assign_labeling, assign_rubric_authoring, rubric_states
from db.config import RUBRIC_SIZE, get_settings
from db.engine import session_scope
from db.errors import ValidationFailed
from db.importers import import_file
from db.models import (
    Assignment,
    AssignmentKind,
    Case,
    Response,
    Role,
    RubricStatus,
    User,
)
from db.progress import Progress, no_progress
from db.rubrics import CriterionInput, save_rubric_draft, submit_rubric
from db.status import counts
from db.taxonomy import get_taxonomy

TEMPLATE_FILE = Path(__file__).with_name("demo_data") / "cases.json"
PASSWORD_ENV = "CLINCONSENSUS_DEMO_PASSWORD"
DEMO_ACTOR = "demo"
SCALES = ("small", "full")


# People ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoPerson:
    username: str
    role: str
    group_no: int | None
    display_name: str


ADMIN = DemoPerson("admin", Role.admin.value, None, "系统管理员")
ANNOTATORS: dict[int, tuple[DemoPerson, ...]] = {
    1: (
        DemoPerson("anno1a", Role.annotator.value, 1, "王晓（一组标注）"),
        DemoPerson("anno1b", Role.annotator.value, 1, "李静（一组标注）"),
        DemoPerson("anno1c", Role.annotator.value, 1, "赵磊（一组标注）"),
    ),
    2: (
        DemoPerson("anno2a", Role.annotator.value, 2, "陈雪（二组标注）"),
        DemoPerson("anno2b", Role.annotator.value, 2, "刘洋（二组标注）"),
        DemoPerson("anno2c", Role.annotator.value, 2, "孙蕾（二组标注）"),
    ),
}
CHECKERS: dict[int, DemoPerson] = {
    1: DemoPerson("check1", Role.checker.value, 1, "周主任（一组审核）"),
    2: DemoPerson("check2", Role.checker.value, 2, "吴主任（二组审核）"),
}
DEMO_PEOPLE: tuple[DemoPerson, ...] = (ADMIN, *ANNOTATORS[1], *ANNOTATORS[2], CHECKERS[1], CHECKERS[2])
#: Rubric authoring of waiting cases goes round these annotators in turn.
AUTHOR_ROTATION = (
    ANNOTATORS[1][0],
    ANNOTATORS[2][0],
    ANNOTATORS[1][1],
    ANNOTATORS[2][1],
    ANNOTATORS[1][2],
    ANNOTATORS[2][2],
)


# Models and judges -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelProfile:
    name: str
    ability: float  # log-odds shift of every criterion
    spread: float  # sd of the per-response effect: high = inconsistent from case to case
    verbosity: float  # mean number of extra background sentences
    structured: bool  # numbered sections and items, or plain paragraphs


MODELS: tuple[ModelProfile, ...] = (
    ModelProfile("model-alpha", 0.55, 0.35, 1.5, True),
    ModelProfile("model-beta", 0.45, 0.95, 3.5, True),
    ModelProfile("model-gamma", 0.30, 0.30, 1.0, False),
    ModelProfile("model-delta", 0.10, 0.75, 4.5, True),
    ModelProfile("model-epsilon", 0.00, 0.40, 0.5, False),
    ModelProfile("model-zeta", -0.05, 1.25, 3.0, True),
    ModelProfile("model-eta", -0.25, 0.45, 1.5, False),
    ModelProfile("model-theta", -0.35, 0.80, 5.0, True),
    ModelProfile("model-iota", -0.50, 0.30, 0.8, False),
    ModelProfile("model-kappa", -0.60, 0.90, 4.0, True),
    ModelProfile("model-lambda", -0.80, 0.50, 3.0, False),
)


@dataclass(frozen=True)
class JudgeProfile:
    name: str
    file_stem: str
    false_negative: float
    false_positive: float
    length_bias: float  # extra false-positive rate per sd of response length above the case mean


JUDGES: tuple[JudgeProfile, ...] = (
    JudgeProfile("judge-a", "judge_a", 0.08, 0.06, 0.00),
    JudgeProfile("judge-b", "judge_b", 0.05, 0.09, 0.06),
    JudgeProfile("judge-c", "judge_c", 0.15, 0.04, 0.00),
)


# Scale plans -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalePlan:
    n_cases: int
    n_models: int
    n_judges: int
    waiting_share: float  # cases without a rubric (to be authored in the app)
    coverage: tuple[float, ...]  # both full, group 1 only, group 2 only, 1 full + 2 partial, 2 full + 1 partial, none
    check_share: float  # (response, group) pairs a checker went through
    adjudicated_share: float  # responses with disagreements whose disagreements were all resolved
    unassigned_waiting: int  # waiting cases nobody was asked to author yet
    unassigned_labeling: int  # approved cases whose responses are neither labeled nor assigned


PLANS = {
    "small": ScalePlan(
        n_cases=30,
        n_models=5,
        n_judges=2,
        waiting_share=1 / 3,
        coverage=(0.55, 0.10, 0.10, 0.04, 0.04, 0.17),
        check_share=0.25,
        adjudicated_share=0.6,
        unassigned_waiting=2,
        unassigned_labeling=1,
    ),
    "full": ScalePlan(
        n_cases=2500,
        n_models=len(MODELS),
        n_judges=3,
        waiting_share=0.0,
        coverage=(1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        check_share=0.06,
        adjudicated_share=0.92,
        unassigned_waiting=0,
        unassigned_labeling=0,
    ),
}

#: Log-odds shift of the case difficulty, and the chance that one group's annotator misses the truth.
DIFFICULTY_EFFECT = {"low": 0.45, "medium": 0.0, "high": -0.55}
ANNOTATION_ERROR = {"low": 0.045, "medium": 0.06, "high": 0.075}
CHECK_CORRECTS = 0.6  # share of an annotator's mistakes the checker corrects
ADJUDICATION_ERROR = 0.04
CASE_EFFECT_SD = 0.35
CRITERION_EFFECT_SD = 0.9
KIND_BONUS_SD = 0.35
MACRO_BONUS_SD = 0.25


# Criteria --------------------------------------------------------------------------------------

KINDS = (
    "diagnosis",
    "evidence",
    "differential",
    "test",
    "treatment",
    "drug_dose",
    "drug_caution",
    "red_flag",
    "follow_up",
    "lifestyle",
    "specific",
    "generic",
)
KIND_INDEX = {kind: index for index, kind in enumerate(KINDS)}
KIND_TAGS = {
    "diagnosis": ["unverifiable_reasoning"],
    "evidence": ["unverifiable_reasoning"],
    "differential": ["unverifiable_reasoning"],
    "treatment": ["non_operational_treatment_plan"],
    "drug_dose": ["medication_boundary_omission"],
    "drug_caution": ["medication_boundary_omission"],
    "red_flag": ["missing_emergency_trigger"],
    "follow_up": ["follow_up_incompleteness"],
}
FAMILY_TAGS = {
    "reasoning": ["unverifiable_reasoning"],
    "treatment": ["non_operational_treatment_plan"],
    "evidence": ["unverifiable_reasoning"],
    "extraction": ["structured_extraction_loss"],
    "communication": ["follow_up_incompleteness"],
}
FAMILY_CRITERIA = {
    "reasoning": [
        "列出支持与不支持主要诊断的关键临床发现",
        "说明鉴别诊断的排除思路，而不只是罗列疾病名称",
        "指出需要优先排除的危及生命的疾病",
        "说明在现有信息下诊断的不确定性及需补充的信息",
    ],
    "treatment": [
        "治疗建议具体可执行（包括药物、剂量、途径、频次或疗程）",
        "说明各项处理措施的先后顺序",
        "提及治疗的主要禁忌证或需要调整方案的情形",
        "说明评估治疗效果的指标和时间点",
    ],
    "evidence": [
        "说明推荐意见的证据来源（指南、共识或高质量研究）",
        "区分证据充分的推荐与专家经验性意见",
        "未引用不存在或无法核实的文献",
        "指出现有证据的局限性或适用人群",
    ],
    "extraction": [
        "准确提取病例中的关键数值（生命体征、化验结果）且无抄错",
        "按时间顺序或系统梳理病情要点",
        "未遗漏病例中的关键阳性发现",
        "对异常指标给出临床意义的解释",
    ],
    "communication": [
        "用患者能理解的方式解释病情和处理的原因",
        "给出居家自我观察的具体方法",
        "明确复诊或再次就医的时间和条件",
        "正面回应提问者最关心的具体问题",
    ],
}
REGISTER_CRITERIA = {
    "lay": [
        "使用通俗易懂的语言，必要的医学术语附有解释",
        "回应提问者的担忧，语气温和且不淡化风险",
        "强调线上建议不能替代面诊，需由医生当面评估",
        "回答结构清晰，分点列出需要做的事情",
        "没有编造病例中未提供的检查结果或病史",
        "没有推荐缺乏循证依据的偏方或保健品",
        "明确告知应就诊的科室或医疗机构级别",
        "说明下一步行动的时间要求（立即、24小时内或1周内）",
        "未给出与病例信息相矛盾的建议",
        "提醒就诊时携带既往病历、检查报告和正在服用的药物",
        "重点信息放在开头，篇幅适中",
        "没有使用恐吓性表述制造不必要的焦虑",
        "未建议在没有医生指导的情况下自行调整或停用正在使用的药物",
        "鼓励就不明白的问题向主诊医生进一步询问",
    ],
    "professional": [
        "给出明确的处理优先级，先处理危及生命的问题",
        "推理过程可核查，逐条对应病例中的关键阳性与阴性发现",
        "引用相关指南或专家共识的推荐（注明名称或年份）",
        "未遗漏病例中提供的关键异常检查指标",
        "药物剂量的单位、频次与给药途径表述准确",
        "考虑合并症与肝肾功能对治疗选择的影响",
        "说明需要会诊或转诊的指征",
        "没有编造病例中未提供的检查结果或病史",
        "提及与患者及家属充分沟通并记录知情同意",
        "对不确定之处明确说明，并提出获取进一步信息的途径",
        "术语规范、表述简洁，适合临床交流",
        "给出病情再评估的时间节点",
        "未推荐与当前证据相悖或已被淘汰的治疗",
        "区分急诊处理与长期管理两部分内容",
    ],
}


@dataclass(frozen=True)
class CriterionSpec:
    criterion_id: str
    text: str
    tags: tuple[str, ...]
    kind: str
    ref: Any = None  # what a response says when it meets this criterion (slot criteria)

    def record(self) -> dict:
        row: dict[str, Any] = {"criterion_id": self.criterion_id, "criterion": self.text}
        if self.tags:
            row["tags"] = list(self.tags)
        return row


@lru_cache(maxsize=1)
def case_templates() -> tuple[dict, ...]:
    """The shipped Chinese case templates (de-identified, composed for the demo)."""
    with open(TEMPLATE_FILE, encoding="utf-8") as handle:
        return tuple(json.load(handle))


def compose_rubric(
    template: dict, register: str, rng: np.random.Generator, size: int = RUBRIC_SIZE
) -> list[CriterionSpec]:
    """`size` criteria for a case: its facts first (diagnosis … specifics), then generic items of its
    task family and its register, in an order drawn from `rng`."""
    slots: list[tuple[str, str, Any]] = [
        ("diagnosis", f"指出最可能的诊断为{template['diagnosis']}", template["diagnosis"]),
        ("evidence", f"说明判断依据：{template['evidence']}", template["evidence"]),
    ]
    slots += [("differential", f"提及需与{item}相鉴别", item) for item in template["differentials"]]
    slots += [("test", f"建议完善{item}", item) for item in template["tests"]]
    slots += [("treatment", f"建议{item}", item) for item in template["treatments"]]
    for drug in template["drugs"]:
        slots.append(("drug_dose", f"给出{drug['name']}的具体用法用量（{drug['dose']}）", drug))
        slots.append(("drug_caution", f"提醒{drug['caution']}", drug))
    slots += [("red_flag", f"明确指出需立即就医的危险信号（如{item}）", item) for item in template["red_flags"]]
    slots += [("follow_up", f"说明随访安排：{item}", item) for item in template["follow_up"]]
    slots += [("lifestyle", f"给出生活方式建议：{item}", item) for item in template["lifestyle"]]
    slots += [("specific", item["criterion"], item["says"]) for item in template["specific"]]

    taxonomy = get_taxonomy()
    family = taxonomy.family(template["task"])
    generic = [(text, FAMILY_TAGS.get(family, [])) for text in FAMILY_CRITERIA.get(family, [])]
    pool = REGISTER_CRITERIA[register]
    generic += [(pool[i], []) for i in rng.permutation(len(pool))]
    specs = [(kind, text, KIND_TAGS.get(kind, []), ref) for kind, text, ref in slots]
    specs += [("generic", text, tags, None) for text, tags in generic]
    specs = specs[:size]
    if len(specs) < size:
        raise ValueError(f"case template {template['key']!r} yields only {len(specs)} criteria")
    return [
        CriterionSpec(f"c{i:02d}", text, tuple(tags), kind, ref) for i, (kind, text, tags, ref) in enumerate(specs, 1)
    ]


# Responses -------------------------------------------------------------------------------------

OPENINGS = {
    "lay": (
        "您好，理解您现在的担心，下面分几点说明。",
        "您好，根据您提供的信息，给您一些参考意见。",
        "感谢您把情况描述得这么详细，我尽量用通俗的话来解释。",
    ),
    "professional": ("好的，以下是该病例的分析要点。", "结合病例资料，整理如下。", "按临床思路分析如下。"),
}
CLOSINGS = {
    "lay": ("以上内容仅供参考，不能替代医生面诊，请以主诊医生的意见为准。", "希望对您有帮助，祝早日康复。", ""),
    "professional": ("以上仅供临床参考，具体请结合上级医师意见及院内流程执行。", ""),
}
LAY_FILLERS = (
    "这类问题在临床上并不少见，早期识别和规范处理对预后影响很大。很多情况下，及时就诊比自行查阅资料、反复观望更能避免病情延误。",
    "很多人对这类疾病存在一些误解，例如认为症状减轻就是好转、或者认为检查越多越好。了解疾病的基本规律，有助于更好地配合医生的治疗安排。",
    "不同患者的情况差异较大，具体方案需要结合年龄、基础疾病、正在使用的药物以及个人意愿综合决定，因此同样的病在不同人身上处理方式可能并不相同。",
    "在整个诊疗过程中，与医生保持沟通、按时复诊同样重要。复诊时医生会根据症状变化和复查结果判断治疗是否有效，并及时调整方案。",
    "网络上的健康信息良莠不齐，有些说法缺乏依据甚至相互矛盾。建议以正规医院、专业学会和权威机构发布的内容为准，遇到拿不准的问题直接询问主诊医生。",
    "家属的理解、支持和陪伴对病情恢复也有积极作用。必要时家属可以一同就诊，帮助记录医生的嘱咐，回家后督促按时用药和复查。",
    "如果对检查或治疗有疑问，可以在就诊时把问题提前写下来，逐条向医生确认，包括为什么要做这项检查、结果出来后下一步怎么办、有哪些替代选择等。",
    "从病理生理角度看，症状的轻重并不总是与病情的严重程度一致，有时症状不明显但病情已经较重，因此需要借助客观检查来评估，而不能只凭自我感觉判断。",
    "治疗过程中可能需要根据复查结果多次调整方案，这属于正常情况，并不代表之前的治疗无效，也不必因此过度担心。",
    "在等待就医或检查结果期间，保持情绪稳定、规律作息、清淡饮食，对身体的恢复都有好处；同时避免饮酒和吸烟，以免影响病情判断和治疗效果。",
    "需要说明的是，线上交流只能根据有限的信息给出一般性建议，无法替代面对面的问诊和体格检查，最终的诊断和治疗请以接诊医生的判断为准。",
    "医学证据和指南会随着研究进展不断更新，不同地区、不同医院的具体做法也可能存在差异，实际执行时应结合当地医疗条件和医生的专业意见。",
)
PROFESSIONAL_FILLERS = (
    "该病例的处理往往需要多学科协作，必要时应及时请相关专科会诊，避免因等待单一科室意见而延误关键处理。",
    "需要注意病情可能在短时间内快速变化，应动态评估生命体征和关键指标，并在病历中记录每次评估的时间和结论。",
    "上述建议基于常规临床路径，具体执行需结合本院的设备、药品条件以及患者的个体情况，由主管医师最终决定。",
    "处理过程中应重视与患者及家属的沟通，充分告知病情、主要风险和可选方案，并按要求完成知情同意的签署与记录。",
    "关于诊断与治疗的细节，建议对照最新版相关指南和专家共识，不同版本之间的推荐可能存在差异，必要时请示上级医师。",
    "病历书写时应完整记录病情评估的依据、已采取的处理措施及其时间，便于后续交接班和医疗质量控制。",
    "对于合并多种基础疾病的患者，应特别关注药物相互作用以及肝肾功能对药物剂量的影响，必要时请临床药师参与。",
    "如条件允许，可在处理早期完成相应的病情严重程度评分，以便量化风险、指导分级处理并与后续评估进行比较。",
    "交接班时应明确尚待完成的检查、需要追踪的结果以及触发升级处理的具体指标，确保接班医生能够及时识别病情变化。",
    "从病理生理机制出发理解各项处理措施的目的，有助于在病情不典型或出现并发症时灵活调整方案，而不是机械套用流程。",
    "需要强调的是，文献证据多来自特定人群，推广到老年、妊娠或合并严重器官功能不全的患者时需谨慎评估获益与风险。",
    "后续如获得新的检查结果，应重新审视初步判断，警惕锚定效应导致的诊断偏差。",
)
FILLERS = {"lay": LAY_FILLERS, "professional": PROFESSIONAL_FILLERS}
#: Background sentences per unit of a model's verbosity (keeps length only loosely tied to score).
FILLER_SCALE = 1.6
SECTION_TITLES = {
    "lay": ("初步判断", "建议检查", "处理建议", "需要立即就医的情况", "随访与日常注意"),
    "professional": ("初步判断", "建议完善的检查", "处理建议", "需立即升级处理的情况", "随访与长期管理"),
}
CHINESE_NUMERALS = "一二三四五六七八九十"


def _join(items: list[str]) -> str:
    return "；".join(items)


def compose_response(
    template: dict,
    criteria: list[CriterionSpec],
    met: np.ndarray,
    model: ModelProfile,
    register: str,
    rng: np.random.Generator,
) -> str:
    """A model's answer that says exactly the case facts whose criteria `met` marks as met."""
    lay = register == "lay"
    said = defaultdict(list)
    for spec, hit in zip(criteria, met):
        if hit and spec.kind != "generic":
            said[spec.kind].append(spec.ref)

    judgement: list[str] = []
    if said["diagnosis"]:
        judgement.append(
            f"从您描述的情况看，最需要考虑的是{template['diagnosis']}。"
            if lay
            else f"结合病史与检查，首先考虑{template['diagnosis']}。"
        )
    else:
        judgement.append(
            "目前的情况需要医生进一步评估，暂时不宜下明确结论。" if lay else "现有资料尚不足以确定诊断，需进一步评估。"
        )
    if said["evidence"] and said["diagnosis"]:
        judgement.append(f"{'主要依据是' if lay else '诊断依据：'}{template['evidence']}。")
    elif said["evidence"]:
        judgement.append(f"{'需要重视的是' if lay else '需关注的要点：'}{template['evidence']}。")
    if said["differential"]:
        judgement.append(f"同时需要与{'、'.join(said['differential'])}相鉴别。")
    pool = FILLERS[register]
    count = min(len(pool), 1 + int(rng.poisson(FILLER_SCALE * model.verbosity)))
    fillers = [pool[i] for i in rng.permutation(len(pool))[:count]]
    judgement.extend(fillers[: (len(fillers) + 1) // 2])

    treatment = list(said["treatment"])
    for kind in ("drug_dose", "drug_caution"):
        for drug in said[kind]:
            treatment.append(
                f"{drug['name']}：{drug['dose']}" if kind == "drug_dose" else f"使用{drug['name']}时：{drug['caution']}"
            )
    sections = [
        judgement,
        list(said["test"]),
        treatment,
        list(said["red_flag"]),
        [f"随访：{item}" for item in said["follow_up"]] + [f"生活方面：{item}" for item in said["lifestyle"]],
    ]
    parts = [OPENINGS[register][int(rng.integers(len(OPENINGS[register])))]]
    parts.extend(said["specific"])
    number = 0
    for section, (title, items) in enumerate(zip(SECTION_TITLES[register], sections)):
        if not items:
            continue
        if model.structured:
            number += 1
            lines = [f"{CHINESE_NUMERALS[number - 1]}、{title}"]
            lines += items if section == 0 else [f"{i}. {item.rstrip('。')}。" for i, item in enumerate(items, 1)]
            parts.append("\n".join(lines))
        elif section == 0:
            parts.append("".join(items))
        elif section == 1:
            parts.append(f"{'建议做以下检查' if lay else '建议完善'}：{_join(items)}。")
        elif section == 2:
            parts.append(f"处理上建议：{_join(items)}。")
        elif section == 3:
            parts.append(
                f"{'如果出现以下情况，请立即就医或拨打120' if lay else '需立即升级处理的情况'}：{_join(items)}。"
            )
        else:
            parts.append(f"{_join(items)}。")
    parts.extend(fillers[(len(fillers) + 1) // 2 :])
    closing = CLOSINGS[register][int(rng.integers(len(CLOSINGS[register])))]
    if closing:
        parts.append(closing)
    return "\n\n".join(parts)


# Writing the files -----------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _label_line(
    case_id: str,
    model: str,
    criterion_id: str,
    met: bool,
    stage: str,
    group: int | None,
    annotator: str,
    note: str | None = None,
) -> str:
    row = {
        "case_id": case_id,
        "model": model,
        "criterion_id": criterion_id,
        "met": bool(met),
        "stage": stage,
        "group": group,
        "annotator": annotator,
    }
    if note:
        row["note"] = note
    return json.dumps(row, ensure_ascii=False) + "\n"


ANNOTATION_NOTES = ("回答未涉及该要点。", "回答仅笼统提及，未达到该条标准的具体要求。")
CHECK_NOTES = ("复核后更正：原标注与回答原文不符。", "复核回答原文后更正。")
ADJUDICATION_NOTES = {
    True: "两组意见不一；复核原文，回答已明确覆盖该要点，判定为满足。",
    False: "两组意见不一；复核原文，回答对该要点未提及或表述含糊，判定为不满足。",
}


@dataclass
class _Case:
    index: int
    case_id: str
    template: dict
    register: str
    age: int
    approved: bool
    criteria: list[CriterionSpec]


def _resolve_plan(scale: str, n_cases: int | None, n_models: int | None, n_judges: int | None) -> ScalePlan:
    if scale not in PLANS:
        raise ValidationFailed(f"scale: must be small or full, found {scale!r}")
    plan = PLANS[scale]
    values = dict(plan.__dict__)
    for name, value in (("n_cases", n_cases), ("n_models", n_models), ("n_judges", n_judges)):
        if value is not None:
            values[name] = value
    if values["n_cases"] < 1:
        raise ValidationFailed("n_cases: at least 1")
    if not 1 <= values["n_models"] <= len(MODELS):
        raise ValidationFailed(f"n_models: 1 to {len(MODELS)}")
    if not 0 <= values["n_judges"] <= len(JUDGES):
        raise ValidationFailed(f"n_judges: 0 to {len(JUDGES)}")
    return ScalePlan(**values)


def write_demo_files(
    out_dir: str | Path,
    *,
    scale: str = "small",
    seed: int = 7,
    n_cases: int | None = None,
    n_models: int | None = None,
    n_judges: int | None = None,
    progress: Progress = no_progress,
) -> dict[str, Path]:
    """Write the demo data set into `out_dir`; returns {"cases", "responses", "labels", "plan", judge
    file stems…} → path. Sizes default to the scale's (full: 2,500 cases, 11 models, 3 judges)."""
    plan = _resolve_plan(scale, n_cases, n_models, n_judges)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    templates = case_templates()
    taxonomy = get_taxonomy()
    models = MODELS[: plan.n_models]
    judges = JUDGES[: plan.n_judges]
    abilities = np.array([m.ability for m in models])
    spreads = np.array([m.spread for m in models])
    macro_ids = [macro["id"] for macro in taxonomy.raw["macro_categories"]]
    kind_bonus = rng.normal(0.0, KIND_BONUS_SD, (len(models), len(KINDS)))
    macro_bonus = rng.normal(0.0, MACRO_BONUS_SD, (len(models), len(macro_ids) + 1))

    n = plan.n_cases
    small = scale == "small" and n <= len(templates)
    template_index = np.arange(n) if small else rng.integers(0, len(templates), n)
    n_waiting = int(round(n * plan.waiting_share))
    waiting = set(rng.permutation(n)[:n_waiting].tolist())
    # The last few waiting cases and approved cases are left for the admin to hand out.
    unassigned = set(sorted(waiting)[len(waiting) - min(plan.unassigned_waiting, len(waiting)) :])
    approved = [i for i in range(n) if i not in waiting]
    unassigned |= set(approved[len(approved) - min(plan.unassigned_labeling, len(approved)) :])

    paths = {
        "cases": out / "cases.jsonl",
        "responses": out / "responses.jsonl",
        "labels": out / "labels.jsonl",
        "plan": out / "plan.json",
    }
    paths.update({judge.file_stem: out / f"{judge.file_stem}.jsonl" for judge in judges})
    buffer = 1 << 20
    # Closed in the `finally` below (several files open at once, written case by case).
    handles = {
        key: open(path, "w", encoding="utf-8", newline="\n", buffering=buffer)  # noqa: SIM115
        for key, path in paths.items()
        if key != "plan"
    }
    rubric_assignments: dict[str, list[str]] = defaultdict(list)
    labeling: dict[tuple[str, str], list[str]] = defaultdict(list)
    submitted: dict | None = None
    author_turn = 0
    try:
        for i in range(n):
            template = templates[int(template_index[i])]
            register = taxonomy.register(template["user_role"])
            low, high = template["age"]
            case = _Case(
                index=i,
                case_id=f"CC-{i + 1:04d}",
                template=template,
                register=register,
                age=int(rng.integers(low, high + 1)),
                approved=i not in waiting,
                criteria=compose_rubric(template, register, rng),
            )
            kinds = np.array([KIND_INDEX[spec.kind] for spec in case.criteria])
            macro = taxonomy.macro_category(template["subject_labels"])
            macro_col = macro_ids.index(macro) if macro in macro_ids else len(macro_ids)

            # Latent truth: model × criterion.
            logit = (
                abilities[:, None]
                + DIFFICULTY_EFFECT[template["difficulty"]]
                + rng.normal(0.0, CASE_EFFECT_SD)
                + rng.normal(0.0, 1.0, len(models))[:, None] * spreads[:, None]
                + rng.normal(0.0, CRITERION_EFFECT_SD, len(case.criteria))[None, :]
                + kind_bonus[:, kinds]
                + macro_bonus[:, macro_col][:, None]
            )
            truth = rng.random(logit.shape) < _sigmoid(logit)

            handles["cases"].write(json.dumps(_case_record(case), ensure_ascii=False) + "\n")
            lengths = np.zeros(len(models))
            for m, model in enumerate(models):
                text = compose_response(template, case.criteria, truth[m], model, register, rng)
                lengths[m] = len(text)
                handles["responses"].write(
                    json.dumps({"case_id": case.case_id, "model": model.name, "response": text}, ensure_ascii=False)
                    + "\n"
                )

            if not case.approved:
                if i not in unassigned:
                    author = AUTHOR_ROTATION[author_turn % len(AUTHOR_ROTATION)]
                    author_turn += 1
                    rubric_assignments[author.username].append(case.case_id)
                    if submitted is None:
                        submitted = {
                            "case_id": case.case_id,
                            "author": author.username,
                            "criteria": [spec.record() for spec in case.criteria],
                        }
                continue

            left_alone = i in unassigned
            pair = (ANNOTATORS[1][i % 3].username, ANNOTATORS[2][(i + i // 3) % 3].username)
            if not left_alone:
                labeling[pair].append(case.case_id)
            lines = _case_labels(case, models, truth, pair, plan, rng, unlabeled=left_alone)
            handles["labels"].write("".join(lines))
            if judges:
                _write_judges(case, models, judges, truth, lengths, handles, rng)
            progress(i + 1, n, "cases")
    finally:
        for handle in handles.values():
            handle.close()

    plan_record = {
        "scale": scale,
        "seed": seed,
        "n_cases": n,
        "models": [m.name for m in models],
        "judges": [j.name for j in judges],
        "rubric_authoring": dict(sorted(rubric_assignments.items())),
        "labeling": [{"annotators": list(pair), "case_ids": ids} for pair, ids in sorted(labeling.items())],
        "submitted_rubric": submitted,
    }
    with open(paths["plan"], "w", encoding="utf-8", newline="\n") as handle:
        json.dump(plan_record, handle, ensure_ascii=False, indent=1)
        handle.write("\n")
    progress(n, n, "files written")
    return paths


def _case_record(case: _Case) -> dict:
    template = case.template
    return {
        "case_id": case.case_id,
        "difficulty": template["difficulty"],
        "task": template["task"],
        "task_labels": list(template["task_labels"]),
        "subject": template["subject"],
        "subject_labels": list(template["subject_labels"]),
        "user_role": template["user_role"],
        "clinical_context": template["clinical_context"].replace("{age}", str(case.age)),
        "user_request": template["user_request"],
        "rubrics": [spec.record() for spec in case.criteria] if case.approved else [],
    }


def _case_labels(
    case: _Case,
    models: tuple[ModelProfile, ...],
    truth: np.ndarray,
    pair: tuple[str, str],
    plan: ScalePlan,
    rng: np.random.Generator,
    *,
    unlabeled: bool,
) -> list[str]:
    """Annotation, check and adjudication lines of one case's responses (all draws vectorised)."""
    n_models, size = truth.shape
    error = ANNOTATION_ERROR[case.template["difficulty"]]
    annotation = {g: truth ^ (rng.random(truth.shape) < error) for g in (1, 2)}
    state = rng.choice(len(plan.coverage), size=n_models, p=np.array(plan.coverage) / sum(plan.coverage))
    if unlabeled:
        state[:] = len(plan.coverage) - 1
    partial = rng.integers(size // 4, size - size // 4, n_models)
    covered = {
        1: np.where(np.isin(state, (0, 1, 3)), size, np.where(state == 4, partial, 0)),
        2: np.where(np.isin(state, (0, 2, 4)), size, np.where(state == 3, partial, 0)),
    }
    checked = {g: (covered[g] == size) & (rng.random(n_models) < plan.check_share) for g in (1, 2)}
    correction = {g: (annotation[g] != truth) & (rng.random(truth.shape) < CHECK_CORRECTS) for g in (1, 2)}
    final = {g: np.where(checked[g][:, None], annotation[g] ^ correction[g], annotation[g]) for g in (1, 2)}
    both = (covered[1] == size) & (covered[2] == size)
    resolved = both & (rng.random(n_models) < plan.adjudicated_share)
    adjudicated = (final[1] != final[2]) & resolved[:, None]
    adjudication = truth ^ (rng.random(truth.shape) < ADJUDICATION_ERROR)
    note_draw = rng.random(truth.shape)
    adjudicator = CHECKERS[1 + case.index % 2].username

    ids = [spec.criterion_id for spec in case.criteria]
    lines: list[str] = []
    for m, model in enumerate(models):
        prefix = f'{{"case_id": "{case.case_id}", "model": "{model.name}", "criterion_id": "'
        for g in (1, 2):
            annotator = pair[g - 1]
            tail = f', "stage": "annotation", "group": {g}, "annotator": "{annotator}"}}\n'
            values = annotation[g][m]
            for j in range(int(covered[g][m])):
                if not values[j] and note_draw[m, j] < 0.03:
                    lines.append(
                        _label_line(
                            case.case_id,
                            model.name,
                            ids[j],
                            False,
                            "annotation",
                            g,
                            annotator,
                            ANNOTATION_NOTES[j % len(ANNOTATION_NOTES)],
                        )
                    )
                else:
                    lines.append(f'{prefix}{ids[j]}", "met": {"true" if values[j] else "false"}{tail}')
            if checked[g][m]:
                checker = CHECKERS[g].username
                for j in range(size):
                    note = CHECK_NOTES[j % len(CHECK_NOTES)] if correction[g][m, j] else None
                    lines.append(
                        _label_line(case.case_id, model.name, ids[j], bool(final[g][m, j]), "check", g, checker, note)
                    )
        for j in np.flatnonzero(adjudicated[m]):
            met = bool(adjudication[m, j])
            note = ADJUDICATION_NOTES[met] if note_draw[m, j] > 0.6 else None
            lines.append(_label_line(case.case_id, model.name, ids[j], met, "adjudication", None, adjudicator, note))
    return lines


def _write_judges(
    case: _Case,
    models: tuple[ModelProfile, ...],
    judges: tuple[JudgeProfile, ...],
    truth: np.ndarray,
    lengths: np.ndarray,
    handles: dict,
    rng: np.random.Generator,
) -> None:
    spread = lengths.std()
    length_z = (lengths - lengths.mean()) / spread if spread > 0 else np.zeros_like(lengths)
    ids = [spec.criterion_id for spec in case.criteria]
    for judge in judges:
        draw = rng.random(truth.shape)
        false_positive = judge.false_positive + judge.length_bias * np.clip(length_z, 0.0, 2.0)[:, None]
        verdict = np.where(truth, draw >= judge.false_negative, draw < false_positive)
        parts = []
        for m, model in enumerate(models):
            prefix = (
                f'{{"judge": "{judge.name}", "case_id": "{case.case_id}", "model": "{model.name}", "criterion_id": "'
            )
            parts.extend(
                f'{prefix}{ids[j]}", "met": {"true" if verdict[m, j] else "false"}}}\n' for j in range(len(ids))
            )
        handles[judge.file_stem].write("".join(parts))


# Building the demo in a database ---------------------------------------------------------------


@dataclass(frozen=True)
class DemoAccount:
    username: str
    role: str
    group_no: int | None
    password: str


@dataclass
class DemoResult:
    scale: str
    seed: int
    accounts: list[DemoAccount]
    password_from_env: bool
    counts: dict[str, Any] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    judges: list[str] = field(default_factory=list)
    import_lines: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """What was created, then the demo logins with their passwords (shown this once)."""
        c = self.counts
        labels = c.get("labels", {})
        out = [
            f"ClinConsensus demo ({self.scale}, seed {self.seed}) created:",
            f"  cases: {c.get('cases', 0):,} — {c.get('approved_rubrics', 0):,} with an approved rubric "
            f"({c.get('criteria', 0):,} criteria), {c.get('waiting_rubrics', 0):,} waiting for one "
            f"({c.get('submitted_rubrics', 0):,} submitted for audit)",
            f"  responses: {c.get('responses', 0):,} from {len(self.models)} models ({', '.join(self.models)})",
            f"  labels: {labels.get('annotation', 0):,} annotation, {labels.get('check', 0):,} check, "
            f"{labels.get('adjudication', 0):,} adjudication",
            f"  judge decisions: {c.get('judge_decisions', 0):,} ({', '.join(self.judges) or 'none'})",
            f"  assignments: {c.get('rubric_assignments', 0):,} rubric authoring, "
            f"{c.get('label_assignments', 0):,} labeling",
            "",
        ]
        if self.password_from_env:
            out.append(f"Demo logins (every account uses the password in {PASSWORD_ENV}):")
        else:
            out.append("Demo logins — the passwords are shown only this once; note them now:")
        for account in self.accounts:
            who = account.role + (f", group {account.group_no}" if account.group_no else "")
            password = "(from " + PASSWORD_ENV + ")" if self.password_from_env else account.password
            out.append(f"  {account.username:<8} {who:<20} {password}")
        return out


def demo_passwords() -> tuple[dict[str, str], bool]:
    """username → password: CLINCONSENSUS_DEMO_PASSWORD for all when set, else a fresh random one each."""
    fixed = get_settings().demo_password
    if fixed:
        return {person.username: fixed for person in DEMO_PEOPLE}, True
    return {person.username: secrets.token_urlsafe(9) for person in DEMO_PEOPLE}, False


def _refuse_if_not_empty(engine: Engine) -> None:
    with session_scope(engine, read_only=True) as session:
        names = [p.username for p in DEMO_PEOPLE]
        present = sorted(session.exec(select(User.username).where(User.username.in_(names))).all())
        cases = session.exec(select(func.count()).select_from(Case)).one()
    if present:
        raise ValidationFailed(
            f"demo: this database already has the demo accounts ({', '.join(present)}); nothing was changed. "
            f"Use a new DATABASE_URL to build the demo again."
        )
    if cases:
        raise ValidationFailed(
            f"demo: this database already holds {cases:,} cases; the demo is built only into an empty database. "
            f"Nothing was changed — point DATABASE_URL at a new database."
        )


def build_demo(
    engine: Engine,
    *,
    scale: str = "small",
    seed: int = 7,
    progress: Progress = no_progress,
    n_cases: int | None = None,
    n_models: int | None = None,
    n_judges: int | None = None,
) -> DemoResult:
    """Create the demo accounts and load the demo data set of `scale` through the importers.

    Passwords are random per installation and appear only in `DemoResult.lines()`; set
    CLINCONSENSUS_DEMO_PASSWORD (at least 8 characters) to give every demo account that password.
    Refuses (ValidationFailed, nothing changed) on a database that already has cases or demo accounts.
    """

    plan = _resolve_plan(scale, n_cases, n_models, n_judges)
    _refuse_if_not_empty(engine)
    passwords, from_env = demo_passwords()
    if from_env:
        users.validate_password(passwords[ADMIN.username])

    with tempfile.TemporaryDirectory(prefix="clinconsensus-demo-") as folder:
        paths = write_demo_files(
            folder,
            scale=scale,
            seed=seed,
            n_cases=plan.n_cases,
            n_models=plan.n_models,
            n_judges=plan.n_judges,
            progress=progress,
        )
        with session_scope(engine) as session:
            for person in DEMO_PEOPLE:
                users.add_user(
                    session,
                    username=person.username,
                    role=person.role,
                    group_no=person.group_no,
                    password=passwords[person.username],
                    display_name=person.display_name,
                    actor=DEMO_ACTOR,
                )
        import_lines: list[str] = []
        judge_stems = [judge.file_stem for judge in JUDGES[: plan.n_judges]]
        for kind, key in [
            ("cases", "cases"),
            ("responses", "responses"),
            ("labels", "labels"),
            *[("judge", stem) for stem in judge_stems],
        ]:
            summary = import_file(engine, kind, paths[key], actor=DEMO_ACTOR, progress=progress)
            import_lines.extend(summary.lines())
        work = json.loads(paths["plan"].read_text(encoding="utf-8"))

    with session_scope(engine) as session:
        admin = users.get_user(session, username=ADMIN.username)
        for author, case_ids in work["rubric_authoring"].items():
            assign_rubric_authoring(session, actor=admin, annotators=[author], case_ids=case_ids)
        pk_of = dict(session.exec(select(Case.case_id, Case.id)).all())
        for item in work["labeling"]:
            case_pks = [pk_of[case_id] for case_id in item["case_ids"]]
            response_ids: list[int] = []
            for start in range(0, len(case_pks), 500):
                response_ids += session.exec(
                    select(Response.id).where(Response.case_pk.in_(case_pks[start : start + 500]))
                ).all()
            assign_labeling(session, actor=admin, annotators=item["annotators"], response_ids=response_ids)

    submitted = work["submitted_rubric"]
    if submitted:
        with session_scope(engine) as session:
            author = users.get_user(session, username=submitted["author"])
            criteria = [
                CriterionInput(c["criterion_id"], c["criterion"], tuple(c.get("tags", ())))
                for c in submitted["criteria"]
            ]
            draft = save_rubric_draft(
                session,
                author,
                pk_of[submitted["case_id"]],
                criteria,
                base_version_id=None,
                expected_lock=None,
                expected_size=len(criteria),
            )
            submit_rubric(session, author, draft.id, expected_lock=draft.lock_version, expected_size=len(criteria))

    accounts = [DemoAccount(p.username, p.role, p.group_no, passwords[p.username]) for p in DEMO_PEOPLE]
    return DemoResult(
        scale=scale,
        seed=seed,
        accounts=accounts,
        password_from_env=from_env,
        counts=demo_counts(engine),
        models=work["models"],
        judges=work["judges"],
        import_lines=import_lines,
    )


def demo_counts(engine: Engine) -> dict[str, Any]:
    """`clinconsensus status` counts plus rubric states and assignments, for the demo summary."""

    with session_scope(engine, read_only=True) as session:
        result = counts(session)
        case_pks = session.exec(select(Case.id)).all()
        states = rubric_states(session, case_pks)
        by_kind = dict(session.exec(select(Assignment.kind, func.count()).group_by(Assignment.kind)).all())
    result["approved_rubrics"] = sum(1 for state in states.values() if state == RubricStatus.approved)
    result["waiting_rubrics"] = len(case_pks) - result["approved_rubrics"]
    result["submitted_rubrics"] = sum(1 for state in states.values() if state == RubricStatus.submitted)
    result["rubric_assignments"] = by_kind.get(AssignmentKind.rubric.value, 0)
    result["label_assignments"] = by_kind.get(AssignmentKind.label.value, 0)
    return result
