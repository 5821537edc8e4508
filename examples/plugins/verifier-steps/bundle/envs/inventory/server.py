"""The inventory env of the verifier-steps example: stock levels per SKU, one tool to read them and one to
reserve stock, and a data plane (`data/add` loads `{"items": [...]}`, `data/get` exports it), which is what
`sql_state_verifier` reads when it is given `env_id`."""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import Field

from agentenv_local.env import DataPart, Env, EnvError, add_data, environment_card, get_data, reset_data, tool


@environment_card(name="inventory", description="Stock levels per SKU.")
class Inventory(Env):
    def __init__(self) -> None:
        self.items: dict[str, dict] = {}

    @tool(annotations={"readOnlyHint": True})
    def stock(self, sku: Annotated[str, Field(description="The SKU to look up")]) -> dict:
        """The stock level of one SKU."""
        if sku not in self.items:
            raise EnvError("not_found", f"no SKU {sku!r}")
        return self.items[sku]

    @tool()
    def reserve(self, sku: Annotated[str, Field(description="The SKU")], qty: Annotated[int, Field(ge=1)]) -> dict:
        """Take `qty` units of a SKU out of stock."""
        item = self.items.get(sku)
        if item is None:
            raise EnvError("not_found", f"no SKU {sku!r}")
        if item["qty"] < qty:
            raise EnvError("insufficient_stock", f"{sku} has {item['qty']} left, asked for {qty}")
        item["qty"] -= qty
        return item

    @reset_data
    def reset(self) -> None:
        self.items.clear()

    @add_data
    def load(self, parts: list) -> None:
        for part in parts:
            data = part.data if part.kind == "data" else json.loads(part.read_bytes()) if part.kind == "file" else None
            items = data.get("items") if isinstance(data, dict) else None
            if not isinstance(items, list):
                raise EnvError("bad_data", "expected {\"items\": [{\"sku\", \"name\", \"qty\"}]}")
            for item in items:
                self.items[str(item["sku"])] = {"sku": str(item["sku"]), "name": str(item.get("name", "")),
                                                "qty": int(item.get("qty", 0))}

    @get_data
    def export(self) -> list:
        return [DataPart(data={"items": list(self.items.values())})]
