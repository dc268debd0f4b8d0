"""A small OpenAI-compatible chat completions server on loopback, standing in for an LLM judge endpoint.

It answers deterministically: `criteria_met` is a function of the rubric item and the response read
back out of the official prompt (`expected_met`), so a test knows every answer without asking.
Markers in a rubric item choose a fault for that item:

    [429]       the first attempt is answered 429 (with a short retry-after)
    [500]       the first two attempts are answered 500
    [down]      every attempt is answered 500
    [bad]       the answer never holds a readable criteria_met (a parse failure after every re-ask)
    [bad-once]  the first answer is malformed JSON, the re-ask is answered properly
    [slow]      the answer waits `slow_seconds`

A request that is not a judge prompt (a candidate model asked a case's user message) is answered
with `expected_answer(prompt)`; markers in the prompt choose its fault:

    [length]    the answer is cut: half of it, finish_reason "length"
    [empty]     the answer is empty (finish_reason "stop")

A drafting prompt (one asking for "恰好 N 条" criteria, judge/draft.py) is answered with
`expected_draft(prompt, n)` as a JSON list; markers in the prompt choose its fault:

    [draft-bad]       never a JSON list (unreadable after every re-ask)
    [draft-bad-once]  the first answer is not JSON, the re-ask is answered properly
    [draft-dup]       two duplicates and three items beyond N
    [draft-short]     five fewer than N
    [draft-dirty]     one over-long item and one with control characters

`raw_answer = (status, content type, body)` answers every chat completion with those bytes (an HTML
page from a proxy, plain text, a huge or malformed body); `broken = True` answers every request 500;
`stop()` also closes the connections in use, as a server that dies mid-run does (the client sees its
requests fail and new connections refused).
Every request is counted; the most requests in flight at once is kept (`max_in_flight`).
Run as a script (`python -m tools.llm_server --latency 0.03`) it prints its base URL and serves
until killed — what the benchmark and the README's trial run use.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import socket
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RESPONSE = re.compile(
    r"# Assistant Response[^\n]*\n(.*)\n\n# Rubric Item to Evaluate\n(.*)\n\n# Instructions", re.DOTALL
)


def expected_met(rubric_item: str, response: str) -> bool:
    """The server's verdict on one item: a fixed function of the two texts."""
    return hashlib.sha256(f"{rubric_item}\x00{response}".encode()).digest()[0] % 2 == 0


def expected_answer(prompt: str) -> str:
    """The server's answer to a user message that is not a judge prompt: a fixed function of its text."""
    return f"建议：{hashlib.sha256(prompt.encode()).hexdigest()[:16]}。完整回答到此结束。"


_DRAFT_COUNT = re.compile(r"恰好\s*(\d+)\s*条")


DRAFT_TEXTS = (
    "指出胸闷可能为心绞痛",
    "建议尽快完善心电图",
    "建议检测心肌肌钙蛋白",
    "询问胸痛持续的时间",
    "询问是否放射至左臂",
    "说明静息时胸痛应急诊",
    "提醒随身携带硝酸甘油",
    "说明舌下含服的用法",
    "询问高血压病史",
    "询问血脂与血糖情况",
    "询问吸烟史与饮酒量",
    "建议戒烟并限酒",
    "建议低盐低脂饮食",
    "说明运动应循序渐进",
    "提示冠脉造影的指征",
    "说明阿司匹林的剂量",
    "提醒出血风险的表现",
    "建议监测家庭血压",
    "给出复诊的具体时间",
    "说明他汀类药物作用",
    "提醒避免剧烈运动",
    "询问家族心脏病史",
    "说明呼吸困难需就医",
    "建议做心脏超声检查",
    "询问夜间能否平卧",
    "说明下肢水肿的意义",
    "提示与胃食管反流鉴别",
    "建议记录发作诱因",
    "说明情绪激动可诱发",
    "提醒按时规律服药",
)


def expected_draft(prompt: str, n: int) -> list[str]:
    """The server's drafted criteria for a drafting prompt: n distinct one-line texts, a fixed function of the
    prompt (its hash picks where in DRAFT_TEXTS the list starts)."""
    start = hashlib.sha256(prompt.encode()).digest()[0] % len(DRAFT_TEXTS)
    texts = [DRAFT_TEXTS[(start + i) % len(DRAFT_TEXTS)] for i in range(min(n, len(DRAFT_TEXTS)))]
    return texts + [f"第{i}条补充标准" for i in range(len(texts) + 1, n + 1)]


def _draft_content(prompt: str, n: int, reask: bool) -> str:
    texts = expected_draft(prompt, n)
    if "[draft-bad]" in prompt or ("[draft-bad-once]" in prompt and not reask):
        return "好的，以下是评分标准：第一条……（没有 JSON）"
    if "[draft-short]" in prompt:
        texts = texts[: max(n - 5, 1)]
    items: list[dict] = [{"criterion": text, "tags": []} for text in texts]
    if "[draft-dup]" in prompt:
        items = items[:2] + [dict(items[0]), dict(items[1])] + items[2:]
        items += [{"criterion": f"多出的第{i}条标准，应被丢弃不用", "tags": []} for i in range(3)]
    if "[draft-dirty]" in prompt:
        items[0] = {"criterion": "过长" * 1500, "tags": ["no_such_tag"]}
        items[1] = {"criterion": items[1]["criterion"] + "\x07\n", "tags": []}
    return "```json\n" + json.dumps(items, ensure_ascii=False) + "\n```"


def read_item(prompt: str) -> tuple[str, str] | None:
    """(rubric item, response) out of a prompt in the official layout."""
    match = _RESPONSE.search(prompt)
    return (match.group(2), match.group(1)) if match else None


class LLMServer:
    """Start with `start()`, stop with `stop()`; `url` is the base URL (…/v1)."""

    def __init__(
        self,
        latency: float = 0.0,
        slow_seconds: float = 0.5,
        structured: bool = True,
        model: str = "judge-test",
        api_key: str | None = None,
    ) -> None:
        self.api_key = api_key  # when set, requests without "Bearer <api_key>" are answered 401
        self.latency = latency
        self.slow_seconds = slow_seconds
        self.structured = structured
        self.model = model
        self.lock = threading.Lock()
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.statuses: Counter = Counter()
        self.attempts: Counter = Counter()  # per (first message, number of messages)
        self.bodies: list[dict] = []
        self.authorizations: set[str] = set()
        self.keep_bodies = True
        self.broken = False
        self.raw_answer: tuple[int, str, bytes] | None = None
        self._url = ""
        self.connections: set[socket.socket] = set()
        self.httpd: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # lifecycle --------------------------------------------------------------------------------

    def start(self, port: int = 0) -> LLMServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes: without this, Nagle's algorithm and the
                # client's delayed ACK hold the body back ~40 ms on every keep-alive request.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with server.lock:
                    server.connections.add(self.connection)

            def finish(self) -> None:
                with server.lock:
                    server.connections.discard(self.connection)
                with contextlib.suppress(OSError):  # the server was stopped under this connection
                    super().finish()

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                authorization = self.headers.get("authorization") or ""
                with server.lock:
                    server.authorizations.add(authorization)
                if server.api_key is not None and authorization != f"Bearer {server.api_key}":
                    with server.lock:
                        server.requests += 1
                        server.statuses[401] += 1
                    self._send(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
                    return
                if server.raw_answer is not None:
                    status, content_type, data = server.raw_answer
                    with server.lock:
                        server.requests += 1
                        server.statuses[status] += 1
                    self._send(status, data, content_type=content_type)
                    return
                status, payload, headers = server.handle(body, self.path)
                self._send(status, payload, headers)

            def _send(
                self, status: int, payload, headers: dict | None = None, content_type: str = "application/json"
            ) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = _QuietServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        _ = self.url
        return self

    @property
    def url(self) -> str:
        """The base URL (kept after `stop()`: a test names the endpoint that died)."""
        if self.httpd is not None:
            host, port = self.httpd.server_address[:2]
            self._url = f"http://{host}:{port}/v1"
        return self._url

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None
        with self.lock:
            open_connections, self.connections = list(self.connections), set()
        for connection in open_connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def reset_counts(self) -> None:
        with self.lock:
            self.requests = 0
            self.max_in_flight = 0
            self.statuses.clear()
            self.bodies.clear()

    # answering --------------------------------------------------------------------------------

    def handle(self, body: dict, path: str) -> tuple[int, object, dict]:
        with self.lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.keep_bodies:
                self.bodies.append(body)
        try:
            status, payload, headers = self._answer(body, path)
        finally:
            with self.lock:
                self.in_flight -= 1
        with self.lock:
            self.statuses[status] += 1
        return status, payload, headers

    def _answer(self, body: dict, path: str) -> tuple[int, object, dict]:
        if not path.rstrip("/").endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}"}}, {}
        messages = body.get("messages") or []
        prompt = str(messages[0].get("content", "")) if messages else ""
        key = (hashlib.sha256(prompt.encode()).hexdigest(), len(messages))
        with self.lock:
            self.attempts[key] += 1
            attempt = self.attempts[key]
        if self.latency:
            time.sleep(self.latency)
        if self.broken:
            return 500, {"error": {"message": "internal error"}}, {}
        if body.get("response_format") and not self.structured:
            return (
                400,
                {
                    "error": {
                        "message": "response_format is not supported",
                        "type": "invalid_request_error",
                        "param": "response_format",
                    }
                },
                {},
            )
        drafting = _DRAFT_COUNT.search(prompt)
        if drafting is not None and read_item(prompt) is None:
            content = _draft_content(prompt, int(drafting.group(1)), reask=len(messages) > 1)
            return self._completion(key, attempt, messages, body, content, "stop")
        item = read_item(prompt)
        if item is None and messages and messages[-1].get("role") == "user":
            return self._candidate_answer(key, str(messages[-1].get("content", "")), messages, body)
        rubric_item, response = item if item else ("", prompt)
        if "[429]" in rubric_item and attempt == 1:
            return 429, {"error": {"message": "rate limited"}}, {"retry-after-ms": "10"}
        if ("[500]" in rubric_item and attempt <= 2) or "[down]" in rubric_item:
            return 500, {"error": {"message": "internal error"}}, {"retry-after-ms": "10"}
        if "[slow]" in rubric_item:
            time.sleep(self.slow_seconds)
        met = expected_met(rubric_item, response)
        reask = len(messages) > 1
        if "[bad]" in rubric_item:
            content = '{"explanation": "无法判断", "criteria_met": maybe'
        elif "[bad-once]" in rubric_item and not reask:
            content = '```json\n{"explanation": "回答满足", "criteria_met": tru\n```'
        elif body.get("response_format"):
            content = json.dumps({"explanation": "依据评分标准判断。", "criteria_met": met}, ensure_ascii=False)
        else:
            content = (
                "```json\n"
                + json.dumps({"explanation": "依据评分标准判断。", "criteria_met": met}, ensure_ascii=False)
                + "\n```"
            )
        return self._completion(key, attempt, messages, body, content, "stop")

    def _candidate_answer(self, key: tuple, prompt: str, messages: list, body: dict) -> tuple[int, object, dict]:
        content, finish_reason = expected_answer(prompt), "stop"
        if "[length]" in prompt:
            content, finish_reason = content[: len(content) // 2], "length"
        elif "[empty]" in prompt:
            content = ""
        return self._completion(key, self.attempts[key], messages, body, content, finish_reason)

    def _completion(
        self, key: tuple, attempt: int, messages: list, body: dict, content: str, finish_reason: str
    ) -> tuple[int, object, dict]:
        prompt_tokens = sum(len(str(message.get("content", ""))) for message in messages) // 2
        completion_tokens = len(content) // 2
        return (
            200,
            {
                "id": f"chatcmpl-{key[0][:12]}-{attempt}",
                "object": "chat.completion",
                "created": 1767225600,
                "model": body.get("model", self.model),
                "choices": [
                    {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
            {},
        )


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # a connection closed under a request (the server stopped mid-run) is expected here


def main() -> int:
    parser = argparse.ArgumentParser(description="an OpenAI-compatible judge endpoint on loopback, for trials")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each answer waits")
    parser.add_argument("--no-structured", action="store_true", help="refuse response_format (400)")
    args = parser.parse_args()
    server = LLMServer(latency=args.latency, structured=not args.no_structured)
    server.keep_bodies = False
    server.start(args.port)
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
