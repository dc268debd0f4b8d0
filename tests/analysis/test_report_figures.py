"""`clinconsensus report --out DIR --figures`: every figure of the report as PNG and SVG, drawn by Debian's
Chromium through plotly's static export, with Chinese text in the files."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ElementTree

import pytest

from analysis import static_figures
from cli.main import main
from i18n import translate
from tests.analysis.test_report import small_database  # noqa: F401  (fixture)

pytestmark = pytest.mark.browser

EXPECTED = [
    "case_mf1",
    "pooled_mf1",
    "judge_fidelity",
    "criterion_kappa",
    "judges_vs_ceiling",
    "judges_by_model",
    "judge_slice_subject",
    "annotator_agreement",
    "check_corrections",
    "agreement_slice_criterion_tag",
]


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_report_writes_every_figure_as_png_and_svg(small_database, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    assert main(["report", "--k", "1", "--out", str(out), "--figures", "--lang", "zh"]) == 0
    figures = out / "figures"
    names = sorted(path.stem for path in figures.glob("*.png"))
    assert names == sorted(path.stem for path in figures.glob("*.svg"))
    assert set(EXPECTED) <= set(names) and len(names) >= 25
    for name in names:
        assert png_size(figures / f"{name}.png") == (
            static_figures.WIDTH * static_figures.SCALE,
            static_figures.HEIGHT * static_figures.SCALE,
        )
        ElementTree.parse(figures / f"{name}.svg")  # well-formed
    svg = (figures / "case_mf1.svg").read_text(encoding="utf-8")
    assert translate("analysis.fig.case_mf1", "zh") in svg and "Noto Sans CJK SC" in svg
    assert translate("insights.fig.judges_by_model", "zh") in (figures / "judges_by_model.svg").read_text("utf-8")
    html = (out / "report.html").read_text(encoding="utf-8")
    assert translate("analysis.title", "zh") in html


def test_figures_need_an_output_folder_and_a_browser(small_database, tmp_path, capsys, monkeypatch):  # noqa: F811
    assert main(["report", "--figures"]) == 1
    assert "--figures: give --out DIR" in capsys.readouterr().err
    monkeypatch.setenv("CLINCONSENSUS_CHROMIUM", str(tmp_path / "no-such-browser"))
    assert main(["report", "--out", str(tmp_path / "out"), "--figures"]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("clinconsensus:")]
    assert len(errors) == 1 and "no such browser executable" in errors[0]
    assert not (tmp_path / "out").exists()
