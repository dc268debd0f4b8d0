"""Who may do what and what is on record: the role policies, group independence, accounts and sign-in
sessions, and the audit log (written, sealed, searched, replayed).

May import: db.counts, db.store, db.rules.
"""

#: The room's public modules: callers import these, never a private name inside them.
__all__ = [
    "audit",
    "audit_digest",
    "audit_key",
    "audit_records",
    "audit_replay",
    "audit_replay_labels",
    "audit_replay_state",
    "audit_seal",
    "audit_search",
    "export_records",
    "independence",
    "policies",
    "users",
]
