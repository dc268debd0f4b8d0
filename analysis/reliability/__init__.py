"""Analysis depth: criterion reliability, judge errors by model and slice, the human ceiling, agreement
by slice and per physician — pure array work on the decision grid of `analysis.metrics`.

Definitions (all macro-F1 values are `sklearn.metrics.f1_score(average="macro")` with default
arguments, computed here from confusion counts by `metrics.macro_f1`):

- **Criterion reliability**, per (case, criterion) over the case's aligned pairs (both groups have
  final labels on all N criteria): `n_aligned`; raw `agreement`; Cohen's `kappa` between the two
  groups' finals; each group's `prevalence` (share met); `gold_met_rate` over those decisions that
  have gold; `judge_mf1` of each judge against gold over those decisions the judge decided.
- **Flag** (first that applies; none below MIN_ALIGNED aligned pairs):
  `unreliable` — κ < KAPPA_THRESHOLD with at least MIN_DISAGREEMENTS disagreeing decisions;
  `never_met` / `always_met` — gold is constant over at least MIN_ALIGNED decisions (the criterion
  does not tell one model's response from another's).

  Why these numbers. κ = 0.40 is the upper end of "fair" agreement on Landis & Koch's scale and
  the usual floor for a usable rating item: below it, two physicians reading one criterion on the
  same response agree little beyond chance, so the wording leaves room for two readings. n is
  small — one decision per model, 11 at full scale — so a flag also needs MIN_ALIGNED = 10 aligned
  pairs (below that one decision moves κ by 0.2 or more) and MIN_DISAGREEMENTS = 4 differing
  decisions. The last guards the κ paradox: at extreme prevalence (a criterion almost no model
  meets) one or two slips give κ ≤ 0 though the groups agree on 9 of 11. Simulated with slips
  that do not depend on the criterion, at the demo's rate (each group misses the truth on 6 % of
  decisions, prevalence spread as Beta(0.7, 0.7), 11 decisions per criterion), this rule flags
  ≈ 3 % of criteria by chance, while a criterion whose wording makes each group miss 25 % of the
  time is flagged ≈ 64 % of the time (κ < 0.40 with 3 differing decisions: 9 % and 76 %; κ < 0.20
  with 4: 2 % and 49 %). The dashboard lists flagged criteria worst first.
- **Judge by model / by slice**: a judge's pooled macro-F1 against each group's finals and gold
  over the decisions both have, restricted to one model's responses or one slice value; slices are
  the case's difficulty, register, macro-category, each subject label, each task theme, and each
  tag of the criterion (values the judge never decided on are left out). `n_decisions` is every
  judge decision on the model's responses (by model) or on the slice's current criteria (by slice).
- **Human ceiling** (as HealthBench's meta-evaluation reads a grader against physicians): each
  physician's own annotation labels against the other group's final labels, pooled over every
  physician, over the decisions both have — the macro-F1 a judge's `mf1_group1/2` reads against.
- **Per annotator**: the same pooled over one physician's labels, with a bootstrap interval over
  cases (the report's seeded resampling); the within-group check correction rate is the share of
  the physician's annotation labels that their group's checker looked at (a check label exists)
  and changed.
- **Gold basis** (docs/REFERENCE.md §4.1): the pages compute every figure here on a stated basis
  (`BasisViews`): final by default — gold of final responses only, a group's labels only where that group
  is checked — and provisional on request; `basis_counts` gives the responses each basis stands on.
- **Agreement by slice**: pooled macro-F1 between the groups over the aligned pairs' decisions
  of each slice value, with the same bootstrap interval.

Undefined values are NaN.

Each name is imported from its module (`criteria`, `insights`, `judge_errors`, `physicians`,
`slices_and_judges`, `thresholds_and_counts`).
"""
