"""What the server process does once, whatever page its first visitor opens; and how it starts (`serve`).

The app imports Streamlit, pandas, SQLAlchemy, Plotly and every page module: some 300,000 objects
the garbage collector would otherwise walk at each full (generation 2) collection, for as long as
the process lives, and never free; walking them landed in the middle of some page runs
(benchmarks/bench_pages.py). `gc.freeze()` moves them to the collector's permanent
generation once the imports are done; objects made later are collected as before.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_frozen = False


def freeze_imports_once() -> bool:
    """Freezes what the process holds now, on the first call only; True when this call froze."""
    global _frozen
    with _lock:
        if _frozen:
            return False
        gc.collect()  # garbage of the imports goes first: frozen objects are never collected
        gc.freeze()
        _frozen = True
        return True


def serve(argv: list[str]) -> None:
    """`python -m ui.process run streamlit_app.py …`: Streamlit's own command, with the upload gate in place
    before the server accepts its first connection and files private from the first one written."""
    from streamlit.web.cli import main as streamlit_main

    from db.rules.security import keep_files_private
    from ui import uploads

    keep_files_private()
    uploads.install()
    streamlit_main(args=argv, prog_name="streamlit")


if __name__ == "__main__":
    import sys

    serve(sys.argv[1:])
