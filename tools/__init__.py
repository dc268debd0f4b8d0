"""Development tools shared by the tests and the benchmarks (not part of the application).

- `pg_server`: a throw-away PostgreSQL server, started from the Debian binaries.
- `metrics_reference`: seeded synthetic analysis frames and a straightforward implementation of
  the report metrics, the oracle of the metric tests and the baseline of the report benchmark.
- `llm_server`: an OpenAI-compatible HTTP server on loopback standing in for an LLM endpoint.
"""
