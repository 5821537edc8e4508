"""Reading a value's `env:`/`secret:` references: the secret store they read, resolving and coercing a value
(and the same value as it may be shown), and every secret value the config holds (to scrub from text)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentenv_local.config import schema
from agentenv_local.config.checking import Entry, Path_, dotted
from agentenv_local.config.masking import MASK, is_secret_key, mask_value, url_userinfo
from agentenv_local.config.refs import Ref, parse_ref
from agentenv_local.errors import ConfigError


class ReferenceResolution:
    """The reference half of ``Config`` (loader.py), which holds the state it reads."""

    _state_dir: Path
    _environ: Mapping[str, str] | None
    _secret_store: Any
    _store_building: bool
    _live: dict[Path_, Entry]

    @property
    def environ(self) -> Mapping[str, str]:
        raise NotImplementedError  # Config's

    def get(self, path: str, default: Any = None) -> Any:
        raise NotImplementedError  # Config's

    def secret_store(self):
        """The secret store `secret:` refs read ([secrets] file, use_env)."""
        if self._secret_store is None:
            from agentenv_local.plugins import registry

            # Stores register as plugins (the core never imports the stores package directly).
            SecretStore: Any = registry().get("stores", "secrets")
            if SecretStore is None:
                why = registry().failure("stores", "secrets") or "nothing is registered under that name"
                raise ConfigError(f"no secrets store to read `secret:` references with: the 'secrets' store "
                                  f"plugin (entry point group agentenv_local.stores) is not available ({why})",
                                  hint="reinstall agentenv-local (pip install -e .), and see what failed to load "
                                       "with `agentenv plugin check`")

            self._store_building = True
            try:
                file_value = self.get("secrets.file")
                use_env = self.get("secrets.use_env")
            finally:
                self._store_building = False
            path = Path(str(file_value)).expanduser()
            if not path.is_absolute():
                path = self._state_dir / path
            self._secret_store = SecretStore(path, use_env=bool(use_env), environ=self._environ)
        return self._secret_store

    def _resolve_ref(self, path: Path_, ref: Ref) -> str:
        key = dotted(path)
        if ref.kind == "env":
            value = self.environ.get(ref.name)
            if value is not None:
                return value
            if ref.default is not None:
                return ref.default
            raise ConfigError(f"'{key}' is {ref.text}, but the environment variable {ref.name} is not set",
                              hint=f"export {ref.name}=..., or give a default: env:{ref.name}?VALUE")
        if self._store_building:
            raise ConfigError(f"'{key}' cannot be a secret: reference (it says where secrets are)",
                              hint="use a plain path or an env: reference")
        store = self.secret_store()
        value = store.get(ref.name)
        if value is not None:
            return value
        if ref.default is not None:
            return ref.default
        hint = store.how_to_set(ref.name) if hasattr(store, "how_to_set") else f"set the secret {ref.name}"
        where = store.where() if hasattr(store, "where") else "the secret store"
        raise ConfigError(f"'{key}' is {ref.text}, but no secret named {ref.name} was found (looked in {where})",
                          hint=f"{hint}; or give a default: secret:{ref.name}?VALUE")

    def _coerce(self, node: schema.Node, path: Path_, ref: Ref, text: str) -> Any:
        try:
            return node.check(schema.parse_text(node.annotation, text))
        except ValueError:
            raise ConfigError(f"'{dotted(path)}' is {ref.text}, which resolves to something that is not "
                              f"{node.expects}", hint=f"set {ref.name} to {node.expects}") from None

    def _resolve(self, path: Path_, value: Any, node: schema.Node | None) -> tuple[Any, Any]:
        """(resolved value, the same value as it may be shown)."""
        ref = parse_ref(value)
        if ref is not None:
            text = self._resolve_ref(path, ref)
            out = self._coerce(node, path, ref, text) if node is not None and node.kind == "leaf" else text
            return out, (MASK if ref.kind == "secret" else mask_value(path, out))
        if isinstance(value, dict):
            res, shown = {}, {}
            for k, v in value.items():
                res[k], shown[k] = self._resolve(path + (str(k),), v, None)
            return res, shown
        if isinstance(value, list):
            pairs = [self._resolve(path, v, None) for v in value]
            return [p[0] for p in pairs], [p[1] for p in pairs]
        return value, mask_value(path, value)

    def secret_values(self) -> list[str]:
        """Every secret value the config currently holds, resolved (to scrub from text).

        Values of `secret:` references, values under secret-shaped keys (however they were given)
        and the userinfo of URLs. References that cannot be resolved are skipped.
        """
        found: set[str] = set()

        def collect(path: Path_, value: Any, node: schema.Node | None) -> None:
            ref = parse_ref(value)
            if ref is not None:
                try:
                    resolved = self._resolve(path, value, node)[0]
                except ConfigError:
                    return
                if ref.kind == "secret" or is_secret_key(path):
                    found.add(str(resolved))
                elif isinstance(resolved, str):
                    found.update(url_userinfo(resolved))
                return
            if isinstance(value, dict):
                for k, v in value.items():
                    collect(path + (str(k),), v, None)
            elif isinstance(value, list):
                for v in value:
                    collect(path, v, None)
            elif isinstance(value, str):
                if is_secret_key(path):
                    found.add(value)
                found.update(url_userinfo(value))

        leaf_nodes = {n.path: n for n in schema.leaves()}
        for path, entry in self._live.items():
            collect(path, entry.value, leaf_nodes.get(path))
        return sorted(v for v in found if v)
