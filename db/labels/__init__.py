"""The label room. Its face (`db.labels.face`) is what pages and the command line call for labels: `queue`,
`open`, `keep_draft`, `save`, `import_rows`, each taking the stage. Below the stages' rules (db.labeling,
db.review, db.importers) stand the one writer of `label` rows (`db.labels.write`), the refusals of a label save
(`db.labels.refusals`) and one stored label as a page shows it (`db.labels.view`).

The face may import the stages' rooms; write, refusals and view only: db.access, db.counts, db.store, db.rules.
"""
