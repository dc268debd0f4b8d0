"""The New model page warns when the chosen judge's agreement with gold is unknown or below the physicians'
ceiling (admin.new_model.fidelity_warning)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from admin.new_model import fidelity_warning
from i18n import translate


def t(key: str, **values) -> str:
    return translate(key, "zh", **values)


FIDELITY = pd.DataFrame(
    {"mf1_gold": [0.91, 0.80, np.nan], "n_gold": [300, 300, 0]}, index=["strong", "weak", "unmeasured"]
)


def test_a_judge_below_the_ceiling_is_warned_about_with_both_figures():
    assert fidelity_warning(t, "weak", FIDELITY, 0.897) == t(
        "daily.new_model.fidelity_below", judge="weak", value="0.800", ceiling="0.897"
    )
    assert fidelity_warning(t, "strong", FIDELITY, 0.897) is None
    assert fidelity_warning(t, "weak", FIDELITY, None) is None  # no ceiling known: nothing to compare with


def test_a_judge_with_unknown_fidelity_is_warned_about():
    unknown = t("daily.new_model.fidelity_unknown", judge="unmeasured")
    assert fidelity_warning(t, "unmeasured", FIDELITY, 0.897) == unknown
    assert fidelity_warning(t, "never-compared", FIDELITY, 0.897) == t(
        "daily.new_model.fidelity_unknown",
        judge="never\\-compared",  # escaped: shown as Markdown
    )
    assert fidelity_warning(t, "x", FIDELITY.iloc[0:0], None) == t("daily.new_model.fidelity_unknown", judge="x")
