"""Metrics, figures, the report and the exports. The metric code is pure; `loader` reads the database."""
