"""Persistence, import, accounts and the access rules of ClinConsensus Studio."""
