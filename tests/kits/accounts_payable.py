"""The model's side of examples/accounts-payable with `--agent tool-loop`: the replies the local wire-format model
server plays, one per model call (`from kits.accounts_payable import model_script`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

BUNDLE = Path(__file__).resolve().parents[2] / "examples" / "accounts-payable"


def model_script() -> list[Any]:
    """Read the policy and the queue, decide all 26 invoices right (the answer key make_week.py writes), done."""
    from agentenv_local.testing.fake_models import Reply

    spec = importlib.util.spec_from_file_location("make_week", BUNDLE / "make_week.py")
    assert spec and spec.loader
    make_week = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_week)
    key = make_week.build()[1]
    decide = [(f"{r['decision']}_invoice", {"invoice_id": r["invoice_id"], "reason": r["why"]}) for r in key]
    return [Reply.calls([("read_policy", {}), ("list_invoices", {})]),
            Reply.calls(decide),
            Reply(text="Done: all 26 invoices are decided.")]
