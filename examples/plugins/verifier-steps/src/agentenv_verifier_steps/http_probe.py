"""`http_probe_verifier`: probe an HTTP endpoint a task deployed and score the answer.

The target is a `url`, or a deployed sandbox's exposed `port` (through the sandbox API's tunnel URL) plus `path`.
The probe is sent up to `max_attempts` times, waiting `backoff_seconds * backoff_factor**n` (at most
`max_backoff_seconds`) between attempts, until the status and every body check pass. The budget is counted, not
timed: an attempt is made only while the waits planned so far fit in `deadline_seconds`, so how many attempts a
run makes depends on its config, never on how fast the machine is (or what an env's virtual clock says).
The last attempt is scored: one row for the status and one per body check, in the built-in verifiers' shape.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, PrivateAttr

from agentenv_local.errors import StepError
from agentenv_local.tasks.scoring import ScoreAggregator
from agentenv_local.tasks.step import Step

from . import json_path
from .common import Criterion, Outcome, name_problem, row
from .http_client import HttpClient, ProbeRefused, Reply, host_problem

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

_SECRET_REF = re.compile(r"^(env|secret):")


class BodyCheck(Criterion):
    """`json_path`: the value at `path` (exists / equals / matches a regex); `regex`: the body matches `pattern`."""

    type: Literal["json_path", "regex"]
    path: str | None = None
    equals: Any = None
    exists: bool | None = None
    matches: str | None = None
    pattern: str | None = None

    def problems(self, where: str) -> list[str]:
        out = []
        if self.type == "regex":
            if self.pattern is None:
                out.append(f"{where}: a regex check needs \"pattern\"")
            for extra in ("path", "equals", "exists", "matches"):
                if extra in self.model_fields_set:
                    out.append(f"{where}: {extra!r} belongs to json_path checks; a regex check takes \"pattern\"")
        else:
            if self.path is None:
                out.append(f"{where}: a json_path check needs \"path\" (e.g. \"$.items[0].name\")")
            else:
                try:
                    json_path.parse(self.path)
                except json_path.JsonPathError as exc:
                    out.append(f"{where}.path: {exc}")
            if self.pattern is not None:
                out.append(f"{where}: 'pattern' belongs to regex checks; a json_path check takes \"matches\"")
            given = [k for k in ("equals", "exists", "matches") if k in self.model_fields_set]
            if len(given) > 1:
                out.append(f"{where}: give one of equals, exists, matches (got {', '.join(given)})")
        for key in ("pattern", "matches"):
            value = getattr(self, key)
            if value is not None:
                try:
                    re.compile(value)
                except re.error as exc:
                    out.append(f"{where}.{key}: {value!r} does not compile: {exc}")
        return out

    def judge(self, text: str, document: Any) -> Outcome:
        if self.type == "regex":
            assert self.pattern is not None
            found = re.search(self.pattern, text) is not None
            return Outcome(passed=found, justification=("body matches" if found else "body does not match")
                           + f" /{self.pattern}/")
        assert self.path is not None
        if document is json_path.MISSING:
            return Outcome(passed=False, justification=f"{self.path}: the body is not JSON")
        value = json_path.find(document, json_path.parse(self.path))
        if "exists" in self.model_fields_set and self.exists is False:
            absent = value is json_path.MISSING
            return Outcome(passed=absent, justification=f"{self.path} is " + ("absent" if absent else "present"))
        if value is json_path.MISSING:
            return Outcome(passed=False, justification=f"{self.path} is absent")
        shown = json.dumps(value)[:200]
        if "equals" in self.model_fields_set:
            # JSON's true is not 1: compare booleans only with booleans
            ok = value == self.equals and isinstance(value, bool) == isinstance(self.equals, bool)
            return Outcome(passed=bool(ok), justification=f"{self.path} = {shown}"
                           + ("" if ok else f", wanted {json.dumps(self.equals)[:200]}"))
        if self.matches is not None:
            ok = re.search(self.matches, value if isinstance(value, str) else json.dumps(value)) is not None
            return Outcome(passed=ok, justification=f"{self.path} = {shown}" + ("" if ok else
                                                                                  f", no match for /{self.matches}/"))
        return Outcome(passed=True, justification=f"{self.path} = {shown}")


class HttpProbeVerifierStep(Step):
    type: ClassVar[str] = "http_probe_verifier"
    records_only: ClassVar[bool] = True

    url: str | None = None
    sandbox_name: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    path: str = "/"
    method: Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str | None = None
    json_body: Any = None
    expected_status: int | list[int] = 200
    checks: list[BodyCheck] = Field(default_factory=list)
    max_attempts: int = Field(default=10, ge=1, le=1000)
    backoff_seconds: float = Field(default=0.2, ge=0, le=60)
    backoff_factor: float = Field(default=2.0, ge=1, le=10)
    max_backoff_seconds: float = Field(default=5.0, ge=0, le=600)
    deadline_seconds: float = Field(default=60.0, gt=0, le=3600)
    timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    max_response_bytes: int = Field(default=1024 * 1024, ge=1, le=64 * 1024 * 1024)
    max_redirects: int = Field(default=3, ge=0, le=20)
    allow_remote: bool = False
    score_aggregator: ScoreAggregator = "all_pass"
    verifier_id: str | None = None

    _client: HttpClient | None = PrivateAttr(default=None)

    # -- before any run ---------------------------------------------------------------------------------
    def config_problems(self) -> list[str]:
        problems: list[str] = []
        if (self.url is None) == (self.port is None):
            problems.append("give url, or port (a sandbox's exposed port) with sandbox_name; not both, not neither")
        if self.url is not None and self.sandbox_name is not None:
            problems.append("sandbox_name goes with port; a url is probed as it is")
        if self.url is not None and (why := host_problem(self.url, frozenset(), self.allow_remote)):
            problems.append(f"url: {why}")
        if not self.path.startswith("/"):
            problems.append(f"path: {self.path!r} must start with '/'")
        if why := name_problem("sandbox_name", self.sandbox_name):
            problems.append(why)
        statuses = self.expected_status if isinstance(self.expected_status, list) else [self.expected_status]
        if not statuses or any(not 100 <= s <= 599 for s in statuses):
            problems.append(f"expected_status: {self.expected_status!r} must be HTTP status codes (100 to 599)")
        if self.body is not None and self.json_body is not None:
            problems.append("body, json_body: give one")
        for name, value in self.headers.items():
            if _SECRET_REF.match(value):
                problems.append(f"headers.{name}: {value.split(':')[0]}: references are not resolved by this step; "
                                "put the value a task may send in the task itself")
            if "\n" in name + value or "\r" in name + value:
                problems.append(f"headers.{name}: a header name or value cannot hold a line break")
        for i, check in enumerate(self.checks):
            problems += check.problems(f"checks[{i}] ({check.type})")
        return problems

    # -- the run ----------------------------------------------------------------------------------------
    async def execute(self, ctx: StepContext) -> None:
        if problems := self.config_problems():
            raise StepError(f"step {self.id!r} is misconfigured: " + "; ".join(problems))
        url, allowed = await self._target(ctx)
        self._client = HttpClient(timeout=self.timeout_seconds, max_bytes=self.max_response_bytes,
                                  max_redirects=self.max_redirects, allowed_hosts=allowed,
                                  allow_remote=self.allow_remote)
        body, headers = self._payload()
        attempts, waited = 0, 0.0
        reply: Reply | None = None
        error = ""
        rows: list[dict] = []
        try:
            while True:
                attempts += 1
                try:
                    reply = await asyncio.to_thread(self._client.send, self.method, url, headers, body,
                                                    lambda to: ctx.log(f"redirected to {to}"))
                    error = ""
                except ProbeRefused as exc:  # not retried: a config or a server that points outside
                    reply, error = None, str(exc)
                    break
                except (OSError, http.client.HTTPException) as exc:
                    reply, error = None, f"{type(exc).__name__}: {exc}"
                rows = self._score(reply, error)
                if all(r["result"] for r in rows) or attempts >= self.max_attempts:
                    break
                wait = min(self.max_backoff_seconds, self.backoff_seconds * self.backoff_factor ** (attempts - 1))
                if waited + wait > self.deadline_seconds:
                    break
                waited += wait
                ctx.log(f"attempt {attempts}: {reply.status if reply else error}; next in {wait:g}s")
                await asyncio.sleep(wait)
        finally:
            self._close()
        if not rows:
            rows = self._score(reply, error)
        verifier_id = self.verifier_id or self.id
        ctx.metadata.setdefault("http_probes", {})[verifier_id] = {
            "url": url, "method": self.method, "attempts": attempts, "status": reply.status if reply else None,
            "final_url": reply.url if reply else None, "redirects": reply.redirects if reply else 0,
            "truncated": reply.truncated if reply else False, "error": error or None,
            "header_names": sorted(self.headers)}  # names only: a header's value is never recorded
        score = ctx.record_verification(verifier_id, rows, self.score_aggregator)
        ctx.log(f"{verifier_id}: score {score:g} after {attempts} attempt(s) "
                f"({sum(1 for r in rows if r['result'])}/{len(rows)} criteria passed)")

    async def teardown(self, ctx: StepContext) -> None:
        self._close()  # a step cancelled mid-request: its connection

    def _close(self) -> None:
        if self._client is not None:
            self._client.close()

    async def _target(self, ctx: StepContext) -> tuple[str, frozenset[str]]:
        """The URL to probe and the extra hosts it may reach (a sandbox's tunnel host)."""
        if self.url is not None:
            return self.url, frozenset()
        from agentenv_local.steps import resolve_sandbox_name

        name = resolve_sandbox_name(ctx, self.sandbox_name)
        sandbox = await ctx.sandbox(name)
        tunnels = sandbox.tunnel_urls
        base = tunnels.get(str(self.port))
        if base is None:
            raise StepError(f"step {self.id!r}: sandbox {name!r} does not expose port {self.port}"
                            + (f" (it exposes {', '.join(tunnels)})" if tunnels else " (it exposes none)"),
                            hint="list the port in the deploy_sandbox step's exposed_ports")
        host = (base.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]).strip("[]").lower()
        return base.rstrip("/") + self.path, frozenset({host})

    def _payload(self) -> tuple[bytes | None, dict[str, str]]:
        headers = dict(self.headers)
        if self.json_body is not None:
            headers.setdefault("Content-Type", "application/json")
            return json.dumps(self.json_body).encode(), headers
        return (self.body.encode() if self.body is not None else None), headers

    def _score(self, reply: Reply | None, error: str) -> list[dict]:
        statuses = self.expected_status if isinstance(self.expected_status, list) else [self.expected_status]
        written = {"type": "status", "expected": statuses}
        if reply is None:
            rows = [row(0, written, Outcome(passed=False, justification=f"no answer: {error}"))]
            return rows + [row(i + 1, c.model_dump(exclude_unset=True),
                               Outcome(passed=False, justification="no answer to check"))
                           for i, c in enumerate(self.checks)]
        ok = reply.status in statuses
        rows = [row(0, written, Outcome(passed=ok, justification=f"{self.method} {reply.url} answered "
                                        f"{reply.status}" + ("" if ok else f", wanted {statuses}")))]
        text = reply.body.decode("utf-8", errors="replace")
        try:
            document: Any = json.loads(text)
        except ValueError:
            document = json_path.MISSING
        for i, check in enumerate(self.checks):
            outcome = check.judge(text, document)
            if reply.truncated:
                outcome.justification += f" (the body was cut at {self.max_response_bytes} bytes)"
            rows.append(row(i + 1, check.model_dump(exclude_unset=True), outcome))
        return rows
