"""Who may do what and what is on record: the role policies, group independence, accounts and sign-in
sessions, and the audit log (written, sealed, searched, replayed).

May import: db.counts, db.store, db.rules.
"""
