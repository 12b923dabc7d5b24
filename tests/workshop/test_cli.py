"""``python -m labkit workshop``: install refuses a non-root user; remove-accounts asks, then removes only labkit's."""
from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from labkit.__main__ import main
from labkit.workshop.accounts import ensure_account, learner_accounts, remove_accounts
from labkit.workshop.settings import HubSettings


def test_install_needs_root(monkeypatch, capsys, tmp_path: Path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("LABKIT_WORKSHOP_INSTALL", str(tmp_path / "opt"))
    monkeypatch.setenv("LABKIT_WORKSHOP_SPAWNER", "shared-account")
    assert main(["workshop", "install"]) == 2
    assert "run this as root" in capsys.readouterr().err
    assert not (tmp_path / "opt").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="makes Unix accounts: root only")
def test_remove_accounts_asks_then_removes_every_learner_account(monkeypatch, capsys, tmp_path: Path):
    prefix = f"lc{secrets.token_hex(2)}-"
    monkeypatch.setenv("LABKIT_WORKSHOP_ACCOUNT_PREFIX", prefix)
    settings = HubSettings(homes=tmp_path, account_prefix=prefix)
    try:
        for name in ("ada", "grace"):
            ensure_account(settings, name)
        monkeypatch.setattr("builtins.input", lambda prompt: "n")
        assert main(["workshop", "remove-accounts"]) == 1
        assert learner_accounts(prefix) == [f"{prefix}ada", f"{prefix}grace"]
        assert main(["workshop", "remove-accounts", "--yes"]) == 0
        assert f"removed 2 accounts and their homes: {prefix}ada, {prefix}grace" in capsys.readouterr().out
        assert learner_accounts(prefix) == [] and list(tmp_path.iterdir()) == []
        assert main(["workshop", "remove-accounts", "--yes"]) == 0
        assert "no account labkit made" in capsys.readouterr().out
    finally:
        remove_accounts(prefix)
