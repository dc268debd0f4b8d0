"""What the synthetic data is made of: people, model and judge profiles, scale plans, criteria and
response texts (seeded, so the same seed gives the same words)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from db.rules.config import RUBRIC_SIZE
from db.rules.enums import Role
from db.rules.errors import ValidationFailed
from db.rules.taxonomy import get_taxonomy

TEMPLATE_FILE = Path(__file__).with_name("demo_data") / "cases.json"


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
        DemoPerson("anno1a", Role.annotator.value, 1, "王晓"),
        DemoPerson("anno1b", Role.annotator.value, 1, "李静"),
        DemoPerson("anno1c", Role.annotator.value, 1, "赵磊"),
    ),
    2: (
        DemoPerson("anno2a", Role.annotator.value, 2, "陈雪"),
        DemoPerson("anno2b", Role.annotator.value, 2, "刘洋"),
        DemoPerson("anno2c", Role.annotator.value, 2, "孙蕾"),
    ),
}
CHECKERS: dict[int, DemoPerson] = {
    1: DemoPerson("check1", Role.checker.value, 1, "周主任"),
    2: DemoPerson("check2", Role.checker.value, 2, "吴主任"),
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

#: One team of eight physicians (three annotators and a checker per group) per started block of this many
#: cases: a larger benchmark (several hospitals) has more physicians, so nobody's queue grows with the data.
CASES_PER_TEAM = 2500


@dataclass(frozen=True)
class DemoTeam:
    """One team's physicians: team 1 is the accounts above; team t ≥ 2 the same eight with a suffix."""

    number: int
    annotators: dict[int, tuple[DemoPerson, ...]]
    checkers: dict[int, DemoPerson]

    @property
    def people(self) -> tuple[DemoPerson, ...]:
        return (*self.annotators[1], *self.annotators[2], self.checkers[1], self.checkers[2])

    @property
    def author_rotation(self) -> tuple[DemoPerson, ...]:
        """Rubric authoring of the team's waiting cases goes round these annotators in turn."""
        return tuple(self.annotators[g][k] for k in range(3) for g in (1, 2))


def _member(person: DemoPerson, number: int) -> DemoPerson:
    """Team `number`'s counterpart of a team-1 person: "anno1a-t2", "王晓（第2队）"."""
    if number == 1:
        return person
    return DemoPerson(
        f"{person.username}-t{number}", person.role, person.group_no, f"{person.display_name}（第{number}队）"
    )


@cache
def demo_team(number: int) -> DemoTeam:
    """Team `number` (from 1)."""
    if number < 1:
        raise ValueError(f"team: from 1, found {number}")
    return DemoTeam(
        number,
        {g: tuple(_member(p, number) for p in ANNOTATORS[g]) for g in (1, 2)},
        {g: _member(CHECKERS[g], number) for g in (1, 2)},
    )


def team_count(n_cases: int, cases_per_team: int = CASES_PER_TEAM) -> int:
    """One team per started block of `cases_per_team` cases, at least one."""
    if cases_per_team < 1:
        raise ValidationFailed(f"cases_per_team: at least 1, found {cases_per_team}")
    return max(1, -(-n_cases // cases_per_team))


def team_of_case(index: int, cases_per_team: int = CASES_PER_TEAM) -> DemoTeam:
    """The team that labels, checks, adjudicates and authors case `index` (from 0)."""
    return demo_team(index // cases_per_team + 1)


def demo_people(n_cases: int, cases_per_team: int = CASES_PER_TEAM) -> tuple[DemoPerson, ...]:
    """The admin and every team's physicians for a demo of `n_cases` cases (DEMO_PEOPLE for one team)."""
    teams = team_count(n_cases, cases_per_team)
    return (ADMIN, *(person for t in range(1, teams + 1) for person in demo_team(t).people))


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
    unassigned_waiting: int  # waiting cases nobody was asked to author yet
    unassigned_labeling: int  # approved cases whose responses are neither labeled nor assigned (but a sampled one)
    # The work plan (demo/plan.py). Small: cases by case; full: each state's share of all responses.
    finished_cases: int = 0  # approved cases on which every model but the last is final
    all_final_cases: int = 0  # of those, cases on which every model is final (one round, its feedback open)
    calibration_size: int = 0  # the last model's calibration sample (0: none drawn)
    full_shares: tuple[tuple[str, float], ...] = ()


PLANS = {
    "small": ScalePlan(
        n_cases=40,
        n_models=5,
        n_judges=2,
        waiting_share=1 / 4,
        unassigned_waiting=2,
        unassigned_labeling=1,
        finished_cases=24,
        all_final_cases=6,
        calibration_size=16,
    ),
    "full": ScalePlan(
        n_cases=2500,
        n_models=len(MODELS),
        n_judges=3,
        waiting_share=0.0,
        unassigned_waiting=0,
        unassigned_labeling=0,
        # Both groups label every response; 91 % are final, and (2 · 0.93 + 0.02 + 0.02) / 2 = 95 % of the
        # (response, group) pairs are checked.
        full_shares=(
            ("final", 0.91),
            ("checked_open", 0.02),
            ("group1_checked", 0.02),
            ("group2_checked", 0.02),
            ("unchecked", 0.03),
        ),
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
