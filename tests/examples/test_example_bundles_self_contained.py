"""The office and support bundles carry their own copies of the crm and mail envs and seeds (a bundle
must be self-contained: links that leave it are refused, and a copied folder keeps working). The copies
must stay the same as the canonical envs in examples/envs/, which the env tests exercise."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
COPIES = {
    "envs/crm/server.py": "envs/crm/server.py",
    "envs/mail/server.py": "envs/mail/server.py",
    "artifacts/crm-seed/crm.json": "envs/crm/seed.json",
    "artifacts/mail-seed/mail.json": "envs/mail/seed.json",
}


@pytest.mark.parametrize("bundle", ["office", "support"])
@pytest.mark.parametrize(("in_bundle", "canonical"), sorted(COPIES.items()))
def test_bundle_copies_match_the_canonical_env(bundle: str, in_bundle: str, canonical: str) -> None:
    copy = EXAMPLES / bundle / in_bundle
    assert not copy.is_symlink(), f"{copy} must be a file in the bundle, not a link out of it"
    assert copy.read_bytes() == (EXAMPLES / canonical).read_bytes(), (
        f"{copy} differs from examples/{canonical}: change both (or copy the canonical one over)")


@pytest.mark.parametrize("bundle", ["hello", "office", "support"])
def test_no_example_bundle_has_a_link(bundle: str) -> None:
    folder = EXAMPLES / bundle
    if not folder.exists():
        pytest.skip(f"no examples/{bundle}")
    assert [p for p in folder.rglob("*") if p.is_symlink()] == []
