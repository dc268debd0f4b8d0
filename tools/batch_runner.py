"""Plays `vllm run-batch`: reads an OpenAI Batch JSONL requests file, posts each body to an OpenAI-compatible
server, writes the results file in the batch output format.

    python -m tools.batch_runner -i requests.jsonl -o results.jsonl --base-url http://127.0.0.1:PORT/v1

Each output line is `{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}`,
in the order of the requests (as `vllm run-batch` writes them); a request the server could not be reached
for gets `"response": null` and an `error`. `--only N` answers the first N requests (a batch that stopped
part-way), for tests of partial results. With the deterministic loopback server (tools/llm_server.py) the
results are a fixed function of the requests, so a test compares them with an online run's answers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def _post(base_url: str, line: dict) -> dict:
    """One request line answered: the batch output line for it."""
    url = base_url.rstrip("/") + "/" + str(line["url"]).removeprefix("/v1/").lstrip("/")
    data = json.dumps(line["body"], ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"}, method="POST")
    identifier = "vllm-" + hashlib.sha256(line["custom_id"].encode()).hexdigest()[:24]
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            status, body = answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        status, body = error.code, json.loads(error.read() or b"null")
    except OSError as error:
        return {
            "id": identifier,
            "custom_id": line["custom_id"],
            "response": None,
            "error": {"code": "connection_error", "message": str(error)},
        }
    return {
        "id": identifier,
        "custom_id": line["custom_id"],
        "response": {"status_code": status, "request_id": f"vllm-batch-{identifier[5:]}", "body": body},
        "error": None,
    }


def run_batch(requests: Path, results: Path, base_url: str, *, only: int | None = None, concurrency: int = 8) -> int:
    """Answers the requests (the first `only` of them) into `results`; returns the lines written."""
    lines = [json.loads(text) for text in requests.read_text(encoding="utf-8").splitlines() if text.strip()]
    if only is not None:
        lines = lines[:only]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        answered = list(pool.map(lambda line: _post(base_url, line), lines))
    with results.open("w", encoding="utf-8") as handle:
        for output in answered:
            handle.write(json.dumps(output, ensure_ascii=False) + "\n")
    return len(answered)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="answer an OpenAI Batch JSONL file through a chat completions server")
    parser.add_argument("-i", "--input-file", required=True)
    parser.add_argument("-o", "--output-file", required=True)
    parser.add_argument("--base-url", required=True, help="the server, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--only", type=int, default=None, help="answer only the first N requests")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    written = run_batch(
        Path(args.input_file), Path(args.output_file), args.base_url, only=args.only, concurrency=args.concurrency
    )
    print(f"{written} results", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
