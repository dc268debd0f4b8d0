"""The judge runner: grading responses with an LLM judge behind an OpenAI-compatible endpoint."""
