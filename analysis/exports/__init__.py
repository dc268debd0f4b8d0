"""The exports of docs/REFERENCE.md §3.5: gold, the public release, judgement files, judge items and SFT data.

One module per export (`gold`, `release`, `judgements`, `judge_items`, `sft`, `healthbench_meta`), and
what they share: the summary an export returns (`export_summary`), how files are written (`file_writers`,
`paths`, `csv_cells`, `manifest`) and the frames every export reads (`current_frames`). `bundle` runs
any of them into a temporary directory and returns a zip, for a page's download button. Callers import
each name from its module; this package imports nothing, so writing a report file (`paths`) does not
pay for every export's imports.

Every export reads the database through `analysis.loader`, takes gold from `db.rules.gold` (the one
definition), writes UTF-8 JSON with Chinese as is, and is deterministic: the same data gives the
same bytes. Rows follow case order (import order), then model, then criterion position.
"""
