"""Every report figure as static PNG and SVG files, for a paper draft (`clinconsensus report --figures`).

Plotly's static export (kaleido) draws each figure in a headless Chromium. The browser is the
machine's own: `CLINCONSENSUS_CHROMIUM` (default Debian's `/usr/bin/chromium`), else the first of
`chromium`, `chromium-browser`, `google-chrome` on PATH. Nothing is fetched from
the network: plotly.js comes from the installed plotly package and MathJax is off. Chinese text
needs a CJK font known to fontconfig (Debian: fonts-noto-cjk); the figures name Noto Sans CJK first.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import plotly.graph_objects as go

from db.rules.config import get_settings
from db.rules.errors import ValidationFailed

FORMATS = ("png", "svg")
WIDTH, HEIGHT, SCALE = 1100, 620, 2
#: CJK-capable fonts first, so Chinese labels render in PNG and in the SVG a reader opens.
FONT_FAMILY = "Noto Sans CJK SC, Noto Sans SC, Source Han Sans SC, WenQuanYi Micro Hei, Microsoft YaHei, sans-serif"
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
RENDER_TIMEOUT_SECONDS = 120


def browser_path() -> str:
    """The Chromium kaleido drives; a clear error when there is none."""
    settings = get_settings()
    for variable, configured in (
        ("CLINCONSENSUS_CHROMIUM", settings.chromium),
        ("BROWSER_PATH", settings.browser_path),
    ):
        if configured:
            if not configured.is_file():
                raise ValidationFailed(f"{variable}={configured}: no such browser executable")
            return str(configured)
    for name in BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ValidationFailed(
        "--figures: no Chromium found (install Debian's chromium, or set CLINCONSENSUS_CHROMIUM to a Chrome/Chromium)"
    )


def _styled(figure: go.Figure) -> go.Figure:
    styled = go.Figure(figure)
    styled.update_layout(font=dict(family=FONT_FAMILY), width=WIDTH, height=HEIGHT)
    return styled


def write_figures(
    figures: Iterable[tuple[str, go.Figure]],
    out_dir: Path,
    *,
    formats: tuple[str, ...] = FORMATS,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[Path]:
    """Write each (name, figure) as `out_dir/<name>.<format>`; returns the files written, in order."""
    import kaleido  # loaded only when figures are asked for

    figures = list(figures)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    browser = browser_path()
    jobs = [(name, _styled(figure), fmt, out_dir / f"{name}.{fmt}") for name, figure in figures for fmt in formats]

    async def render() -> None:
        async with kaleido.Kaleido(n=1, path=browser, mathjax=False, timeout=RENDER_TIMEOUT_SECONDS) as renderer:
            for done, (_, figure, fmt, path) in enumerate(jobs):
                await renderer.write_fig(
                    figure,
                    path=path,
                    opts={"format": fmt, "width": WIDTH, "height": HEIGHT, "scale": SCALE},
                    cancel_on_error=True,
                )
                if progress:
                    progress(done + 1, len(jobs), path.name)

    asyncio.run(render())
    missing = [str(path) for *_, path in jobs if not path.is_file() or path.stat().st_size == 0]
    if missing:
        raise ValidationFailed(f"--figures: the browser wrote no image for {missing[0]}")
    return [path for *_, path in jobs]
