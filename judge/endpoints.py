"""The endpoints of one run: what every run asks of them, and each endpoint's own health.

A run may be spread over several OpenAI-compatible servers (`--base-url` repeated). Each gets its
own concurrency limit and its own client. An endpoint is left out of the run when it cannot be
reached before it ever answered, when it refuses the run as a whole (401, 403, 404), or when
`LEAVE_OUT_AFTER` requests in a row failed after the SDK's retries (connection refused, 5xx,
timeouts); the items it was serving go to the others. One failing request between answers is the
item's own trouble: counted as an error, sent again by the next run.

An answer is read only when it is a chat completion: JSON (by its content type and its text, read as
untrusted JSON: no number literal beyond 4,300 digits, no NaN), at most `MAX_ANSWER_BYTES`, with a
list of choices. Anything else (an HTML page from a proxy, plain text, a huge body) is a failed
request named in one line, counted like a 5xx. What an endpoint said when it refused is kept to its
status and the first `ERROR_BODY_CHARS` characters of its body: a run's message is for admins, and an
admin pointing a run at another loopback service reads no more of it than that.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlparse

import openai
from openai.types.chat import ChatCompletion

from db.rules.errors import ClinConsensusError, Said, ValidationFailed
from db.rules.limits import loads
from db.work.judge_runs import RunCounts
from judge.api_keys import api_key

DEFAULT_SEED = 20260101
#: Refusals that no retry can mend: the endpoint is left out with its reason.
FATAL_STATUSES = (401, 403, 404)
#: Requests failing in a row (each after the SDK's retries) that leave an endpoint out.
LEAVE_OUT_AFTER = 3
#: The largest answer read from an endpoint (a chat completion of a long answer is a few hundred kB).
MAX_ANSWER_BYTES = 8 << 20
#: Characters of an endpoint's error body kept in a run's message (with its status).
ERROR_BODY_CHARS = 200


class RunFailed(ClinConsensusError):
    """The run cannot go on (every endpoint left out, or a request no endpoint would take)."""


class EndpointLost(Exception):
    """The endpoint serving an item was left out of the run: the item may go to another one."""


@dataclass
class EndpointOptions:
    """What every run asks of its endpoints; `base_url` is one URL or a list of them."""

    base_url: str | list[str]
    model: str
    api_key_env: str | None = None
    concurrency: int = 8
    temperature: float = 0.0
    seed: int = DEFAULT_SEED
    max_tokens: int = 512
    thinking: bool = True
    timeout: float = 120.0
    max_retries: int = 2

    #: The field naming what the run's answers are kept as (`--as`; the run record's `judge`).
    NAME_FIELD: ClassVar[str] = ""
    #: Fields holding a file's path, kept absolute in the run record.
    PATH_FIELDS: ClassVar[tuple[str, ...]] = ()

    def params(self) -> dict:
        """What the run record keeps of the options (never the key itself)."""
        values = asdict(self)
        for name in ("base_url", "model", self.NAME_FIELD):
            values.pop(name)
        values["base_urls"] = self.urls()
        for name in self.PATH_FIELDS:
            values[name] = self.recorded_path(name)
        return values

    def recorded_path(self, name: str) -> str | None:
        """The path in field `name` as the run record keeps it: absolute, or None when none is given."""
        path = getattr(self, name)
        return str(Path(path).resolve()) if path else None

    def key_parameters(self) -> dict:
        """The request parameters an answer depends on (part of the cache key)."""
        return {
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "temperature": self.temperature,
            "thinking": self.thinking,
        }

    @classmethod
    def from_record(cls, run: dict) -> Any:
        """The options of a run as `judge_runs.run_summary` gives it (an instance of the class called on)."""
        params = {key: value for key, value in (run["params"] or {}).items() if key in cls.__dataclass_fields__}
        params.pop("base_url", None)
        return cls(base_url=run["base_urls"], model=run["model"], **{cls.NAME_FIELD: run["judge"]}, **params)

    def urls(self) -> list[str]:
        urls = [self.base_url] if isinstance(self.base_url, str) else list(self.base_url or [])
        return [url.strip() for url in urls if url and url.strip()]

    def check_endpoints(self) -> None:
        urls = self.urls()
        if not urls:
            raise ValidationFailed(
                "--base-url: give at least one endpoint, e.g. http://localhost:8000/v1", key="judge.message.no_endpoint"
            )
        for url in urls:
            parsed = urlparse(url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ValidationFailed(
                    f"--base-url {url!r}: expected an http(s) URL such as http://localhost:8000/v1",
                    key="judge.message.bad_endpoint",
                    params={"url": url},
                )
        if len(set(urls)) < len(urls):
            raise ValidationFailed("--base-url: each endpoint once", key="judge.message.endpoint_twice")
        self.check_request()

    def check_request(self) -> None:
        """The checks of a run's request parameters and key variable, endpoints aside (a batch has none)."""
        if not (self.model or "").strip():
            raise ValidationFailed("--model: give the model name the endpoint serves", key="judge.message.no_model")
        if not 1 <= int(self.concurrency) <= 512:
            raise ValidationFailed(f"--concurrency {self.concurrency}: expected 1 to 512")
        if not 0 <= self.max_retries <= 10:
            raise ValidationFailed(f"--max-retries {self.max_retries}: expected 0 to 10")
        if self.timeout <= 0:
            raise ValidationFailed(f"--timeout {self.timeout}: expected a positive number of seconds")
        if self.max_tokens < 1:
            raise ValidationFailed(f"--max-tokens {self.max_tokens}: expected a whole number of at least 1")
        api_key(self.api_key_env)

    def request(self) -> dict[str, Any]:
        """The parameters of every chat completion request of the run (messages aside)."""
        request: dict[str, Any] = {
            "model": self.model,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
        }
        if not self.thinking:
            request["extra_body"] = {"chat_template_kwargs": {"enable_thinking": False}}
        return request


#: The body fields the SDK's `create` takes by name; any other field travels in its `extra_body`.
SDK_FIELDS = frozenset({"model", "messages", "temperature", "seed", "max_tokens", "response_format"})


def chat_body(request: dict[str, Any], messages: list[dict], response_format: dict | None = None) -> dict[str, Any]:
    """The JSON body of one chat completion request: what an online run sends and what a batch file holds.

    `request` is `EndpointOptions.request()` (its `extra_body` fields stand at the top of the body, as
    the SDK sends them)."""
    body = {name: value for name, value in request.items() if name != "extra_body"}
    body["messages"] = messages
    if response_format is not None:
        body["response_format"] = response_format
    body.update(request.get("extra_body") or {})
    return body


def sdk_arguments(body: dict[str, Any]) -> dict[str, Any]:
    """`chat.completions.create` keyword arguments that send exactly `body`."""
    arguments = {name: value for name, value in body.items() if name in SDK_FIELDS}
    extra = {name: value for name, value in body.items() if name not in SDK_FIELDS}
    if extra:
        arguments["extra_body"] = extra
    return arguments


def read_completion(completion: Any) -> tuple[str, str | None, int, int]:
    """(text, finish reason, prompt tokens, completion tokens) of a chat completion, online or from a batch."""
    choice = completion.choices[0] if completion.choices else None
    text = (choice.message.content or "") if choice is not None else ""
    finish_reason = choice.finish_reason if choice is not None else None
    usage = completion.usage
    prompt_tokens = (usage.prompt_tokens or 0) if usage is not None else 0
    completion_tokens = (usage.completion_tokens or 0) if usage is not None else 0
    return text, finish_reason, prompt_tokens, completion_tokens


@dataclass
class Share:
    """What one endpoint did since the last flush (added to the run record's `endpoints`)."""

    done: int = 0
    requests: int = 0
    errors: int = 0
    left_out: Said | None = None

    def take(self) -> dict[str, Any]:
        taken = {"done": self.done, "requests": self.requests, "errors": self.errors, "left_out": self.left_out}
        self.done = self.requests = self.errors = 0
        return taken


@dataclass
class Endpoint:
    """One server of the run, with its client, its share and its health."""

    url: str
    options: EndpointOptions
    counts: RunCounts
    #: auto | on | off for runs that may ask for structured output; None for runs that never do.
    structured_mode: str | None = None
    share: Share = field(default_factory=Share)
    reached: bool = False
    unreachable: int = 0
    failing: int = 0
    left_out: Said | None = None
    last_error: str = ""

    def __post_init__(self) -> None:
        self.structured = self.structured_mode in ("auto", "on")
        self.client = openai.AsyncOpenAI(
            base_url=self.url,
            api_key=api_key(self.options.api_key_env) or "none",
            max_retries=self.options.max_retries,
            timeout=self.options.timeout,
        )

    def leave_out(self, reason: Said) -> None:
        if self.left_out is None:
            self.left_out = self.share.left_out = reason

    async def complete(self, request: dict, messages: list[dict], schema: dict | None = None) -> tuple[Any, int]:
        """(chat completion, HTTP requests spent), SDK retries included; (None, spent) when this item
        failed here and the endpoint serves on. Raises EndpointLost when the endpoint is out of the run."""
        spent = 0
        while True:
            if self.left_out is not None:
                raise EndpointLost(self.url)
            body = chat_body(request, messages, schema if self.structured else None)
            try:
                raw = await self.client.chat.completions.with_raw_response.create(**sdk_arguments(body))
            except openai.BadRequestError as error:
                spent += 1
                self._count(1, 0)
                if self.structured and self.structured_mode == "auto":
                    self.structured = False  # the server does not take response_format: ask plainly from now on
                    continue
                reason = reason_of(error)
                raise RunFailed(
                    f"the endpoint refused the request: {reason}",
                    key="judge.message.refused",
                    params={"reason": reason},
                ) from None
            except openai.APIStatusError as error:
                if error.status_code in FATAL_STATUSES:
                    self._count(1, 0)
                    reason = reason_of(error)
                    self.leave_out(
                        Said(
                            f"the endpoint refused the request ({error.status_code}): {reason}",
                            "judge.message.refused_status",
                            code=error.status_code,
                            reason=reason,
                        )
                    )
                    raise EndpointLost(self.url) from None
                return None, spent + self._failed(error)
            except (openai.APIConnectionError, openai.APITimeoutError) as error:
                return None, spent + self._failed(error)
            self._count(1 + raw.retries_taken, raw.retries_taken)
            spent += 1 + raw.retries_taken
            completion, problem = readable_completion(raw)
            if completion is None:
                self._unreadable(problem)
                return None, spent
            self.reached, self.failing = True, 0
            return completion, spent

    def _count(self, requests: int, retries: int) -> None:
        self.counts.requests += requests
        self.counts.retries += retries
        self.share.requests += requests

    def _unreadable(self, problem: str) -> None:
        """An answer that is not a chat completion: this item failed here, like a 5xx after its retries."""
        self.share.errors += 1
        self.failing += 1
        self.last_error = problem
        self._leave_out_when_failing(self.options.max_retries)

    def _failed(self, error: Exception) -> int:
        retries = self.options.max_retries
        self._count(1 + retries, retries)
        self.share.errors += 1
        self.failing += 1
        self.last_error = reason_of(error)
        if isinstance(error, openai.APIConnectionError) and not isinstance(error, openai.APITimeoutError):
            self.unreachable += 1
            # Nothing ever answered and every slot failed to connect: a wrong URL or a server that is down.
            if not self.reached and self.unreachable >= min(self.options.concurrency, LEAVE_OUT_AFTER):
                self.leave_out(
                    Said(
                        f"cannot reach the endpoint {self.url}: {self.last_error}",
                        "judge.message.unreachable",
                        url=self.url,
                        reason=self.last_error,
                    )
                )
        self._leave_out_when_failing(retries)
        return 1 + retries

    def _leave_out_when_failing(self, retries: int) -> None:
        if self.failing >= LEAVE_OUT_AFTER:
            self.leave_out(
                Said(
                    f"{self.url}: {self.failing} requests in a row failed after {retries} retries: {self.last_error}",
                    "judge.message.failing",
                    url=self.url,
                    n=self.failing,
                    retries=retries,
                    reason=self.last_error,
                )
            )
        if self.left_out is not None:
            raise EndpointLost(self.url)

    async def close(self) -> None:
        await self.client.close()


def readable_completion(raw: Any) -> tuple[ChatCompletion | None, str]:
    """(the chat completion, "") of an endpoint's answer, or (None, why it is not one) in one line."""
    response = raw.http_response
    content_type = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
    if not (content_type == "application/json" or content_type.endswith("+json")):
        shown = content_type[:60] or "no content type"
        return None, f"the endpoint answered {shown}, not JSON (HTTP {response.status_code})"
    body = response.content
    if len(body) > MAX_ANSWER_BYTES:
        return None, f"the endpoint's answer has {len(body):,} bytes, more than {MAX_ANSWER_BYTES:,}"
    try:
        document = loads(body)
    except ValueError as error:  # malformed JSON, or InputRejected: too long a number, NaN, too deep
        return None, "the endpoint's answer is not readable JSON: " + " ".join(str(error).split())[:ERROR_BODY_CHARS]
    if not isinstance(document, dict) or not isinstance(document.get("choices"), list):
        return None, "the endpoint's answer is not a chat completion (no list of choices)"
    completion = raw.parse()
    if not isinstance(completion, ChatCompletion):
        return None, "the endpoint's answer is not a chat completion"
    return completion, ""


def reason_of(error: Exception) -> str:
    """One line of what went wrong; an endpoint's refusal as its status and the start of its body."""
    if isinstance(error, openai.APIStatusError):
        body = " ".join(error.response.text.split())
        shown = body[:ERROR_BODY_CHARS] + ("…" if len(body) > ERROR_BODY_CHARS else "")
        return f"HTTP {error.status_code}: {shown}" if shown else f"HTTP {error.status_code}"
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    return " ".join(str(text).split())[:ERROR_BODY_CHARS]
