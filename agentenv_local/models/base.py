"""`ModelProvider`: one model endpoint; `complete()` with retries, backoff, a timeout and masked errors.

A subclass says how to spell a request and read an answer (`_request`, `_parse`); this class sends
it: a POST with a JSON body, at most `max_retries` retries on 408/409/429/5xx and connection
errors (exponential backoff with jitter, `Retry-After` honoured), each attempt bounded by the
timeout. Whatever fails ends as a `ModelError` naming the endpoint without credentials; the API key,
header values and URL userinfo are masked out of every message, log line and repr.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit, urlunsplit

from agentenv_local.config.masking import MASK, mask_known_secrets, mask_url_userinfo
from agentenv_local.models.errors import ModelError, _retryable_status
from agentenv_local.models.types import Message, ModelResponse, ToolSpec

log = logging.getLogger("agentenv_local.models")

DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 3

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")  # RFC 9110 field name
_VISIBLE = re.compile(r"^[\t\x20-\x7e]*\Z")


def check_headers(headers: Mapping[str, str], where: str = "headers") -> dict[str, str]:
    """Header names must be RFC 9110 tokens and values visible ASCII; values are never echoed."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise ModelError(f"{where}: {name!r} is not a valid HTTP header name", kind="config",
                             hint="use letters, digits and - in header names")
        if not isinstance(value, str) or not _VISIBLE.match(value):
            raise ModelError(f"{where}: the value of header {name!r} is not printable ASCII text", kind="config",
                             hint="header values must be printable ASCII on one line")
        out[name] = value
    return out


def _split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """`http://u:p@host/v1` -> (`http://host/v1`, ("u", "p")); query and fragment are kept."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    clean = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    return clean, (unquote(user), unquote(password))


def display_url(url: str) -> str:
    """A URL as it may be shown: no userinfo, no query string (keys sometimes travel there)."""
    parts = urlsplit(url)
    hostport = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, hostport, parts.path, "", ""))


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the endpoint asked us to wait (`retry-after-ms`, `retry-after` seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_text(data: Any, raw: str) -> str:
    """What the endpoint said, from the shapes OpenAI, Anthropic, Ollama, vLLM and LiteLLM use."""
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            kind = err.get("type")
            return f"{err['message']}" + (f" ({kind})" if isinstance(kind, str) and kind else "")
        if isinstance(err, str):
            return err
        for key in ("message", "detail"):
            if isinstance(data.get(key), str):
                return data[key]
    text = " ".join(raw.split())
    return text[:300] + ("..." if len(text) > 300 else "") if text else "(empty body)"


class _Attempt(Exception):
    """One failed attempt that may be retried (internal)."""

    def __init__(self, error: ModelError, retry_after: float | None = None):
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after


class ModelProvider(ABC):
    """A model endpoint. Subclasses: `OpenAIChatProvider`, `AnthropicMessagesProvider`.

    `base_url` may carry `user:password@` (sent as basic auth, never shown); `api_key` and `headers`
    are sent to this endpoint only. `timeout_s` bounds each attempt; `max_retries` is how many times
    a retryable failure (408, 409, 429, 5xx, connection error) is retried; backoff starts at
    `backoff_s`, doubles, is capped at `max_backoff_s` and jittered. A `Retry-After` longer than
    `max_retry_after_s` ends the retries at once (the error says how long the endpoint asked for).
    """

    api: ClassVar[str] = ""
    label: ClassVar[str] = "model"

    def __init__(self, base_url: str, *, api_key: str | None = None, headers: Mapping[str, str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, max_retries: int = DEFAULT_MAX_RETRIES,
                 backoff_s: float = 0.5, max_backoff_s: float = 30.0, max_retry_after_s: float = 60.0) -> None:
        if not isinstance(base_url, str) or not re.match(r"^https?://[^/\s]+", base_url):
            shown = mask_url_userinfo(str(base_url))
            raise ModelError(f"the model base URL must be an http(s) URL, got {shown!r}", kind="config",
                             hint="set [model] base_url, e.g. http://127.0.0.1:11434/v1")
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        clean, userinfo = _split_userinfo(base_url.rstrip("/"))
        self._base_url = clean
        self._basic_auth = userinfo
        self._api_key = api_key or None
        self._headers = check_headers(dict(headers or {}))
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_retry_after_s = float(max_retry_after_s)
        secrets = [v for v in self._headers.values()]
        if api_key:
            secrets.append(api_key)
        if userinfo:
            secrets.extend(v for v in userinfo if v)
        self._secrets = tuple(secrets)

    # -- what callers see --------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The base URL without credentials."""
        return display_url(self._base_url)

    @property
    def has_api_key(self) -> bool:
        return self._api_key is not None

    def __repr__(self) -> str:
        key = MASK if self._api_key else None
        return (f"{type(self).__name__}(base_url={self.base_url!r}, api_key={key!r}, "
                f"timeout_s={self.timeout_s!r}, max_retries={self.max_retries!r})")

    __str__ = __repr__

    def mask(self, text: str) -> str:
        """Text with this provider's key, header values and URL userinfo replaced by ***."""
        return mask_url_userinfo(mask_known_secrets(text, self._secrets))

    # -- the call --------------------------------------------------------------------------------

    async def complete(self, messages: Sequence[Message | Mapping[str, Any]], *,
                       tools: Sequence[ToolSpec | Mapping[str, Any]] | None = None, model: str,
                       max_tokens: int | None = None, temperature: float | None = None,
                       response_format: Mapping[str, Any] | None = None,
                       timeout: float | None = None) -> ModelResponse:
        """Send the conversation, return the assistant's next message.

        `response_format` is a JSON Schema the answer must follow (structured output); the answer's
        text is then the JSON (`ModelResponse.json_output()`). `timeout` (seconds) overrides the
        provider's `timeout_s` for this call, per attempt.
        """
        if not model:
            raise ModelError("no model name given", kind="config",
                             hint="set [model] default or [model.roles] <role>, or pass model=")
        msgs = [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]
        if not msgs:
            raise ModelError("no messages to send", kind="config", hint="pass at least one user message")
        specs = [t if isinstance(t, ToolSpec) else ToolSpec.model_validate(t) for t in (tools or [])]
        names = [t.name for t in specs]
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise ModelError(f"tools offered twice: {', '.join(dupes)}", kind="config",
                             hint="give every tool a unique name")
        path, body = self._request(msgs, specs, model=model, max_tokens=max_tokens, temperature=temperature,
                                   response_format=dict(response_format) if response_format else None)
        started = time.monotonic()
        data = await self._post(path, body, timeout=self.timeout_s if timeout is None else float(timeout))
        latency = time.monotonic() - started
        return self._parse(data, model=model, latency_s=latency, specs=specs,
                           response_format=response_format is not None)

    # -- subclass hooks --------------------------------------------------------------------------

    @abstractmethod
    def _request(self, messages: list[Message], tools: list[ToolSpec], *, model: str, max_tokens: int | None,
                 temperature: float | None, response_format: dict | None) -> tuple[str, dict]:
        """(path under base_url, JSON body)."""

    @abstractmethod
    def _auth_headers(self) -> dict[str, str]:
        """The headers that carry the key (and API version)."""

    @abstractmethod
    def _parse(self, data: Any, *, model: str, latency_s: float, specs: list[ToolSpec],
               response_format: bool) -> ModelResponse:
        """A ModelResponse from a 2xx JSON body (ModelError if it is not the promised shape)."""

    def _url(self, path: str) -> str:
        return self._base_url + path

    def _not_found_hint(self, model: str) -> str:
        return f"check [model] base_url and that the endpoint serves model {model!r}"

    # -- HTTP with retries -------------------------------------------------------------------------

    def _hint(self, status: int | None, kind: str, model: str) -> str:
        if kind == "connection":
            return (f"is the model server running at {self.base_url}? start it (e.g. `ollama serve`), "
                    "or fix [model] base_url")
        if kind == "timeout":
            return "the model did not answer in time: raise [model] timeout_s, use a smaller model, or lower max_tokens"
        if status in (401, 403):
            return ("check the API key: set [model] api_key (or [model.endpoints.<role>] api_key) to secret:NAME "
                    "and store the key under NAME (see docs/models.md)")
        if status == 404:
            return self._not_found_hint(model)
        if status == 429:
            return "the endpoint is rate limiting: wait, run fewer tasks at once, or raise [model] max_retries"
        if status is not None and status >= 500:
            return "the endpoint is failing: check the model server's logs, or try again later"
        if status is not None and 400 <= status < 500:
            return "the endpoint rejected the request: check the model name and the options passed"
        return "check the model endpoint"

    def _fail(self, *, kind: str, url: str, model: str, status: int | None = None, reason: str = "",
              provider_message: str | None = None, detail: str = "") -> ModelError:
        where = f"POST {display_url(url)}"
        what = f"HTTP {status}" + (f" {reason}" if reason else "") if status is not None else detail
        msg = f"{self.label} call ({model!r}) to {where} failed: {what}"
        if provider_message:
            msg += f": {provider_message}"
        return ModelError(self.mask(msg), hint=self.mask(self._hint(status, kind, model)), kind=kind, status=status,
                          endpoint=display_url(url),
                          provider_message=self.mask(provider_message) if provider_message else None)

    def _backoff(self, attempt: int) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
        return delay * random.uniform(0.5, 1.0)

    async def _post(self, path: str, body: dict, *, timeout: float) -> Any:
        import httpx2

        url = self._url(path)
        model = str(body.get("model", ""))
        headers = {"content-type": "application/json", "accept": "application/json",
                   **self._auth_headers(), **self._headers}
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        total = self.max_retries + 1
        last: ModelError | None = None
        client_timeout = httpx2.Timeout(timeout, connect=min(timeout, 10.0))
        async with httpx2.AsyncClient(timeout=client_timeout, auth=self._basic_auth, follow_redirects=False) as client:
            for attempt in range(1, total + 1):
                try:
                    return await self._attempt(client, url, headers, payload, timeout, model)
                except _Attempt as failed:
                    last = failed.error
                    last.attempts = attempt
                    if attempt >= total:
                        break
                    if failed.retry_after is not None and failed.retry_after > self.max_retry_after_s:
                        last.message += (f" (the endpoint asked to retry after {failed.retry_after:.0f} s, "
                                         f"more than the {self.max_retry_after_s:.0f} s we wait)")
                        break
                    delay = failed.retry_after if failed.retry_after is not None else self._backoff(attempt)
                    log.warning("%s; retrying in %.2f s (attempt %d of %d)", last.message, delay, attempt + 1, total)
                    await asyncio.sleep(delay)
                except ModelError as exc:
                    exc.attempts = attempt
                    raise
        assert last is not None
        if last.attempts > 1:
            last.message += f" (after {last.attempts} attempts)"
        last.args = (last.message,)
        raise last

    async def _attempt(self, client: Any, url: str, headers: dict, payload: bytes, timeout: float, model: str) -> Any:
        import httpx2

        try:
            async with asyncio.timeout(timeout):
                response = await client.post(url, content=payload, headers=headers)
        except (TimeoutError, httpx2.TimeoutException) as exc:
            if isinstance(exc, (httpx2.ConnectTimeout, httpx2.PoolTimeout)):
                raise _Attempt(self._fail(kind="connection", url=url, model=model,
                                          detail="could not connect (timed out)")) from None
            raise self._fail(kind="timeout", url=url, model=model,
                             detail=f"no answer within {timeout:g} s") from None
        except httpx2.TransportError as exc:
            detail = self.mask(str(exc)) or type(exc).__name__
            raise _Attempt(self._fail(kind="connection", url=url, model=model,
                                      detail=f"could not reach the endpoint ({detail})")) from None
        except httpx2.HTTPError as exc:  # e.g. an invalid URL
            raise self._fail(kind="config", url=url, model=model, detail=self.mask(str(exc))) from None
        raw = response.text
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = None
        status = response.status_code
        if 200 <= status < 300:
            if data is None:
                raise self._fail(kind="protocol", url=url, model=model,
                                 detail=f"HTTP {status} with a body that is not JSON "
                                        f"({_error_text(None, raw)[:120]}); is base_url the right API?")
            return data
        error = self._fail(kind="http", url=url, model=model, status=status, reason=response.reason_phrase or "",
                           provider_message=_error_text(data, raw))
        if _retryable_status(status):
            raise _Attempt(error, _retry_after({k.lower(): v for k, v in response.headers.items()}))
        raise error
