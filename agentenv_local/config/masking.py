"""Keep secrets out of what we print: secret-shaped keys, secret refs, URL userinfo, known values."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

MASK = "***"

# Keys whose values are masked (matched as whole words of a key: `api_key`, `apiKey`, `X-Api-Key`,
# `auth_token` match; `max_tokens` and `author` do not). Any segment of a dotted path counts, so
# every value under `[model.headers]` is masked.
SECRET_WORDS: tuple[str, ...] = (
    "password", "passwd", "passphrase", "secret", "token", "credential", "api_key", "apikey",
    "private_key", "auth", "authorization", "bearer", "headers", "cookie",
)
_PLURALS = {"password", "secret", "credential", "passphrase", "cookie"}
# Sections that hold where secrets are, not secrets (`[secrets] file = ...`).
_EXEMPT_SECTIONS = {"secrets"}

_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#@\s]+)@")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _words(segment: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", segment).lower()) if w]


def _segment_is_secret(segment: str) -> bool:
    words = _words(segment)
    for term in SECRET_WORDS:
        tw = term.split("_")
        n = len(tw)
        for i in range(len(words) - n + 1):
            window = words[i:i + n]
            if window == tw:
                return True
            if n == 1 and term in _PLURALS and window[0] == term + "s":
                return True
    return False


def is_secret_key(path: str | Sequence[str]) -> bool:
    """Does a dotted path (or its segments) name something secret?"""
    segments = path.split(".") if isinstance(path, str) else list(path)
    if segments and segments[0] in _EXEMPT_SECTIONS:
        segments = segments[1:]
    return any(_segment_is_secret(s) for s in segments)


def mask_url_userinfo(text: str) -> str:
    """`https://user:pw@host/x` -> `https://***@host/x` (anywhere in the text)."""
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)


def url_userinfo(text: str) -> list[str]:
    """The userinfo parts (user:password) of every URL in the text, and their password parts."""
    out = []
    for m in _URL_USERINFO.finditer(text):
        info = m.group("userinfo")
        out.append(info)
        if ":" in info:
            out.append(info.split(":", 1)[1])
    return out


def mask_value(path: str | Sequence[str], value: Any, *, secret: bool = False) -> Any:
    """The value as it may be shown: `***` for secrets, URL userinfo scrubbed, structure kept.

    `secret=True` masks whatever the key is called (the value came from a `secret:` ref).
    `None` stays `None`: an unset key is not a secret.
    """
    segments = path.split(".") if isinstance(path, str) else list(path)
    secret = secret or is_secret_key(segments)
    if value is None:
        return None
    if isinstance(value, dict):
        return {k: mask_value([*segments, str(k)], v, secret=secret) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_value(segments, v, secret=secret) for v in value]
    if secret:
        return MASK
    if isinstance(value, str):
        return mask_url_userinfo(value)
    return value


def mask_known_secrets(text: str, values: Iterable[str], *, min_length: int = 4) -> str:
    """Replace every occurrence of each secret value in `text` with `***`.

    Values shorter than `min_length` are left alone (masking every `a` would destroy the text and
    such a value is not a meaningful secret). Longest values are replaced first.
    """
    unique = sorted({v for v in values if isinstance(v, str) and len(v) >= min_length}, key=len, reverse=True)
    for v in unique:
        text = text.replace(v, MASK)
    return text


def mask_known_secrets_in(value: Any, values: Sequence[str], *, min_length: int = 4) -> Any:
    """`value` (JSON-like) with `mask_known_secrets` applied to every string in it, keys included.

    Dicts and lists are changed in place (whoever holds them, such as a step still running, sees the
    masked data) and returned; a string comes back masked.
    """
    values = [v for v in values if isinstance(v, str) and len(v) >= min_length]
    if not values:
        return value
    if isinstance(value, str):
        return mask_known_secrets(value, values, min_length=min_length) if any(v in value for v in values) else value
    if isinstance(value, dict):
        for key in list(value):
            masked_key = mask_known_secrets_in(key, values) if isinstance(key, str) else key
            item = mask_known_secrets_in(value[key], values)
            if masked_key != key:
                del value[key]
            value[masked_key] = item
    elif isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = mask_known_secrets_in(item, values)
    return value
