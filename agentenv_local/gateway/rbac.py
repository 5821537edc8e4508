"""Per-role tool access (RBAC) for the gateway, with the reference gateway's rule semantics.

A caller's role is the ``AgentEnv-Role`` header of its request (else the ``agentenv.io/role`` entry
of the MCP request's ``_meta``, else ``default``). Rules map a role, or ``*`` for every role, to
``{tool name or "*": disabled}``. The tool a role may use is decided by the first of these that
exists:

1. the role's rule naming the tool,
2. the role's ``*`` rule,
3. the ``*`` role's rule naming the tool,
4. the ``*`` role's ``*`` rule;

with none, the tool is allowed. A tool its server lists as hidden by default
(``_meta {"agentenv.io/hiddenByDefault": true}``) skips the ``*``-tool rules (2 and 4): only a rule
naming it reveals it, and with none it is hidden.

Mutations (``POST /tools/disable`` and ``/tools/enable`` with ``{role, tools: [...] | "*"}``):

- ``role "*", tools "*"``: every rule is dropped for one global rule ``{"*": {"*": value}}``;
- ``role "*", tool X``: X is set on every role that has rules, and on ``*``;
- ``role R, tools "*"``: R's rules become ``{"*": value}``;
- otherwise one rule per named tool on R.

The answer is the role's rules afterwards: ``{role, disabled: [...], allowed: [...]}`` (sorted).

Beyond the reference, a role can be bound to a bearer token (:meth:`ToolAccess.bind_token`). A
request that claims a bound role without its token is refused (401) instead of being served as
that role; a valid token alone selects its role. Only a sha256 digest of each token is kept.
The instance's admin token (:meth:`ToolAccess.set_admin_token`) acts as whichever role the request
claims, bound or not (the control plane acting on behalf of a role).

Rules are bounded (:data:`MAX_NAME_CHARS` per role or tool name, :data:`MAX_RULES` in all): a request
past them is refused (400, 413) and changes nothing.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = [
    "ACTIONS",
    "DEFAULT_ROLE",
    "DISABLE",
    "DISABLE_TOOL_EXTENSION_URI",
    "ENABLE",
    "ENABLE_TOOL_EXTENSION_URI",
    "HIDDEN_BY_DEFAULT_META_KEY",
    "ROLE_HEADER",
    "ROLE_META_KEY",
    "SESSION_META_KEY",
    "TOOL_ACCESS_REQUEST_SCHEMA",
    "WILDCARD",
    "RbacError",
    "ToolAccess",
    "ToolDisabled",
    "bearer_from",
    "is_hidden_by_default",
    "role_from",
]

WILDCARD = "*"
DEFAULT_ROLE = "default"  # the role of a request that names none; the reference treats it as "no role"
ROLE_HEADER = "AgentEnv-Role"
ROLE_META_KEY = "agentenv.io/role"
SESSION_META_KEY = "agentenv.io/session"
HIDDEN_BY_DEFAULT_META_KEY = "agentenv.io/hiddenByDefault"
DISABLE = "disable"
ENABLE = "enable"
ACTIONS = (DISABLE, ENABLE)
DISABLE_TOOL_EXTENSION_URI = "urn:agentenv:disable-tool/v1"
ENABLE_TOOL_EXTENSION_URI = "urn:agentenv:enable-tool/v1"

# The request both routes take, as the card advertises it.
TOOL_ACCESS_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {"type": "string"},
        "tools": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"const": WILDCARD}]},
    },
    "required": ["role", "tools"],
}

# The reference gateway's messages for a bad /tools/disable|enable body.
BAD_ROLE = "Missing or invalid 'role' field"
BAD_TOOLS = "'tools' must be a list of strings or the string '*'"

MAX_NAME_CHARS = 256  # a role or tool name in a rule
MAX_RULES = 10_000  # (role, tool) rules in all

_STATE_VERSION = 1
_DIGEST_PREFIX = "sha256:"

T = TypeVar("T")


class RbacError(Exception):
    """A tool-access request that cannot be served; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status

    def to_wire(self) -> dict:
        """The reference's error body for the RBAC routes and ``/step``."""
        return {"error": self.message}


class ToolDisabled(RbacError):
    """A call to a tool the caller's role may not use (403; an ``isError`` result over MCP)."""

    def __init__(self, role: str, tool: str):
        super().__init__(f"Tool '{tool}' is disabled for role '{role}'", 403)
        self.role = role
        self.tool = tool


# -- who is calling ---------------------------------------------------------------------------------


def _header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    """A header's value, looked up case-insensitively (plain dicts included)."""
    if not headers:
        return None
    value = headers.get(name)
    if value is None:
        wanted = name.lower()
        value = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == wanted), None)
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return value if isinstance(value, str) else None


def _claimed_role(headers: Mapping[str, Any] | None, meta: Mapping[str, Any] | None) -> str | None:
    role = (_header(headers, ROLE_HEADER) or "").strip()
    if not role and meta:
        value = meta.get(ROLE_META_KEY)
        role = value.strip() if isinstance(value, str) else ""
    return role or None


def role_from(headers: Mapping[str, Any] | None, meta: Mapping[str, Any] | None = None) -> str:
    """The role a request claims: its ``AgentEnv-Role`` header (any case), else the MCP request's
    ``_meta["agentenv.io/role"]``, else ``default``. Surrounding blanks are ignored."""
    return _claimed_role(headers, meta) or DEFAULT_ROLE


def bearer_from(headers: Mapping[str, Any] | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    value = _header(headers, "Authorization")
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def is_hidden_by_default(tool_meta: Mapping[str, Any] | None) -> bool:
    """Whether a listed tool's ``_meta`` marks it hidden by default."""
    return tool_meta is not None and tool_meta.get(HIDDEN_BY_DEFAULT_META_KEY) is True


def _digest(token: str) -> str:
    return _DIGEST_PREFIX + hashlib.sha256(token.encode("utf-8")).hexdigest()


def _tool_name(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        return item["name"]
    return item.name


# -- the rules --------------------------------------------------------------------------------------


class ToolAccess:
    """Per-role tool rules, the hidden-by-default tools and the roles bound to tokens. Thread-safe."""

    def __init__(self, rules: Mapping[str, Mapping[str, bool]] | None = None,
                 hidden_by_default: Iterable[str] = ()):
        self._lock = threading.RLock()
        self._rules: dict[str, dict[str, bool]] = {}
        for role, entries in (rules or {}).items():
            self._rules[role] = {tool: bool(disabled) for tool, disabled in entries.items()}
        self._hidden: frozenset[str] = frozenset(hidden_by_default)
        self._token_digests: dict[str, str] = {}  # role -> "sha256:<hex>"
        self._admin_digest: str | None = None

    # -- lookups --

    @property
    def rules(self) -> dict[str, dict[str, bool]]:
        """A copy of the rules: ``{role: {tool or "*": disabled}}``."""
        with self._lock:
            return copy.deepcopy(self._rules)

    @property
    def hidden_by_default(self) -> frozenset[str]:
        return self._hidden

    def set_hidden_by_default(self, tools: Iterable[str]) -> None:
        """Replace the hidden-by-default set (the gateway sets it after each tool discovery)."""
        self._hidden = frozenset(tools)

    def is_disabled(self, role: str, tool: str) -> bool:
        hidden = tool in self._hidden
        with self._lock:
            for who in (role, WILDCARD):
                entries = self._rules.get(who)
                if not entries:
                    continue
                if tool in entries:
                    return entries[tool]
                if not hidden and WILDCARD in entries:
                    return entries[WILDCARD]
        return hidden

    def is_allowed(self, role: str, tool: str) -> bool:
        return not self.is_disabled(role, tool)

    def filter_tools(self, role: str, tools: Iterable[T]) -> list[T]:
        """The tools ``role`` may see, in order. Items are names, or dicts / objects with a name."""
        return [t for t in tools if not self.is_disabled(role, _tool_name(t))]

    def check_call(self, role: str, tool: str) -> None:
        """Raise :class:`ToolDisabled` (403) when ``role`` may not call ``tool``."""
        if self.is_disabled(role, tool):
            raise ToolDisabled(role, tool)

    def role_rules(self, role: str) -> dict:
        """``{disabled: [...], allowed: [...]}``: the tools (or ``*``) ``role``'s own rules name."""
        with self._lock:
            entries = self._rules.get(role, {})
            return {"disabled": sorted(k for k, v in entries.items() if v),
                    "allowed": sorted(k for k, v in entries.items() if not v)}

    def roles_state(self) -> dict:
        """The ``roles`` map of ``GET /state``: ``{role: {disabled, allowed}}`` for every role with rules."""
        with self._lock:
            return {role: self.role_rules(role) for role in self._rules}

    # -- mutations --

    def _set(self, role: str, tool: str, disabled: bool) -> None:
        if role == WILDCARD and tool == WILDCARD:
            self._rules = {WILDCARD: {WILDCARD: disabled}}
        elif role == WILDCARD:
            for entries in self._rules.values():
                entries[tool] = disabled
            self._rules.setdefault(WILDCARD, {})[tool] = disabled
        elif tool == WILDCARD:
            self._rules[role] = {WILDCARD: disabled}
        else:
            self._rules.setdefault(role, {})[tool] = disabled

    def apply(self, action: str, role: object, tools: object) -> dict:
        """Disable or enable ``tools`` (a list of names, or ``"*"``) for ``role`` (a role or ``"*"``).

        Answers ``{role, disabled, allowed}``: the role's rules afterwards. :class:`RbacError` (400)
        with the reference's messages for a bad action, role or tools.
        """
        if action not in ACTIONS:
            raise RbacError(f"action must be 'disable' or 'enable', got {action!r}")
        if not isinstance(role, str) or not role:
            raise RbacError(BAD_ROLE)
        if tools == WILDCARD:
            names: Sequence[str] = [WILDCARD]
        elif isinstance(tools, (list, tuple)) and all(isinstance(t, str) for t in tools):
            names = list(tools)
        else:
            raise RbacError(BAD_TOOLS)
        too_long = [n for n in (role, *names) if len(n) > MAX_NAME_CHARS or not n]
        if too_long:
            raise RbacError(f"role and tool names must be 1 to {MAX_NAME_CHARS} characters; got one of "
                            f"{len(too_long[0])}")
        disabled = action == DISABLE
        with self._lock:
            before = copy.deepcopy(self._rules)
            for name in names:
                self._set(role, name, disabled)
            if sum(len(entries) for entries in self._rules.values()) > MAX_RULES:
                self._rules = before  # refused as a whole: nothing changes
                raise RbacError(f"that would make more than {MAX_RULES} tool-access rules; use '*' rules "
                                "or drop some first", 413)
            return {"role": role, **self.role_rules(role)}

    def change(self, action: str, body: object) -> dict:
        """:meth:`apply` for a ``POST /tools/<action>`` body ``{"role": ..., "tools": ...}``."""
        if not isinstance(body, Mapping):
            raise RbacError(BAD_ROLE)
        return self.apply(action, body.get("role"), body.get("tools"))

    def reset(self) -> None:
        """Drop every rule (tokens and the hidden set stay)."""
        with self._lock:
            self._rules = {}

    # -- roles bound to tokens --

    def set_admin_token(self, token: str | None) -> None:
        """The instance's admin token (None: none): a request bearing it may claim any role."""
        with self._lock:
            self._admin_digest = _digest(token) if token else None

    def is_admin(self, bearer: str | None) -> bool:
        digest = self._admin_digest
        if not bearer or digest is None:
            return False
        return hmac.compare_digest(digest, _digest(bearer))

    def bind_token(self, role: str, token: str | None = None) -> str:
        """Bind ``role`` to a bearer token (a new random one unless given) and answer the token.

        From then on a request that claims ``role`` must carry the token. Binding again replaces
        the role's token. ``*`` and ``default`` cannot be bound.
        """
        if not isinstance(role, str) or not role.strip() or role != role.strip():
            raise RbacError("a token is bound to a role: pass a non-empty role name without surrounding blanks")
        if role in (WILDCARD, DEFAULT_ROLE):
            raise RbacError(f"role {role!r} cannot be bound to a token: only a named role can")
        if token is None:
            token = secrets.token_urlsafe(24)
        elif not isinstance(token, str) or not token or token != token.strip():
            raise RbacError("a bearer token must be a non-empty string without surrounding blanks")
        digest = _digest(token)
        with self._lock:
            for other, known in self._token_digests.items():
                if other != role and hmac.compare_digest(known, digest):
                    raise RbacError(f"that token is already bound to role {other!r}", 409)
            self._token_digests[role] = digest
        return token

    def unbind_token(self, role: str) -> bool:
        """Forget ``role``'s token; answers whether it had one."""
        with self._lock:
            return self._token_digests.pop(role, None) is not None

    @property
    def bound_roles(self) -> list[str]:
        with self._lock:
            return sorted(self._token_digests)

    def _role_of_token(self, token: str) -> str | None:
        digest = _digest(token)
        found = None
        with self._lock:
            for role, known in self._token_digests.items():
                if hmac.compare_digest(known, digest):
                    found = role
        return found

    def role_for(self, header_role: str | None, bearer: str | None) -> str:
        """The role a request acts as, given the role it claims (header or ``_meta``) and its bearer
        token. :class:`RbacError` 401 for an unknown token, a token of another role, or a claim of a
        bound role without its token."""
        claimed = header_role.strip() if isinstance(header_role, str) else ""
        if claimed == DEFAULT_ROLE:
            claimed = ""
        if bearer:
            if self.is_admin(bearer):
                return claimed or DEFAULT_ROLE
            owner = self._role_of_token(bearer)
            if owner is None:
                raise RbacError("unknown bearer token", 401)
            if claimed and claimed != owner:
                raise RbacError(f"the bearer token is bound to role {owner!r}, not {claimed!r}", 401)
            return owner
        if not claimed:
            return DEFAULT_ROLE
        with self._lock:
            bound = claimed in self._token_digests
        if bound:
            raise RbacError(f"role {claimed!r} requires its bearer token", 401)
        return claimed

    def resolve(self, headers: Mapping[str, Any] | None, meta: Mapping[str, Any] | None = None) -> str:
        """:meth:`role_for` a request: the role it claims (see :func:`role_from`) and its
        ``Authorization: Bearer`` token."""
        return self.role_for(_claimed_role(headers, meta), bearer_from(headers))

    # -- persistence --

    def to_dict(self) -> dict:
        """JSON-ready state for the store: rules, hidden-by-default tools and token digests (never a
        token itself)."""
        with self._lock:
            return {
                "version": _STATE_VERSION,
                "rules": copy.deepcopy(self._rules),
                "hidden_by_default": sorted(self._hidden),
                "token_digests": dict(self._token_digests),
            }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolAccess:
        def bad(why: str) -> RbacError:
            return RbacError(f"can't restore tool access from its stored state: {why}", 500)

        if not isinstance(data, Mapping) or data.get("version") != _STATE_VERSION:
            raise bad(f"unknown version {data.get('version') if isinstance(data, Mapping) else None!r}")
        rules = data.get("rules", {})
        if not isinstance(rules, Mapping):
            raise bad("'rules' must be an object")
        for role, entries in rules.items():
            if not isinstance(role, str) or not isinstance(entries, Mapping) or not all(
                    isinstance(t, str) and isinstance(v, bool) for t, v in entries.items()):
                raise bad(f"the rules of role {role!r} must map tool names to true or false")
        hidden = data.get("hidden_by_default", [])
        if not isinstance(hidden, list) or not all(isinstance(t, str) for t in hidden):
            raise bad("'hidden_by_default' must be a list of tool names")
        digests = data.get("token_digests", {})
        if not isinstance(digests, Mapping) or not all(
                isinstance(r, str) and isinstance(d, str) and d.startswith(_DIGEST_PREFIX) and len(d) == 71
                for r, d in digests.items()):
            raise bad("'token_digests' must map roles to sha256 digests")
        access = cls(rules, hidden)
        access._token_digests = dict(digests)
        return access

    def __repr__(self) -> str:
        return (f"<ToolAccess roles={list(self._rules)} hidden={sorted(self._hidden)} "
                f"bound={self.bound_roles}>")
