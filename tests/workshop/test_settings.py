"""The hub's settings (labkit.workshop.settings): a room separates learners by default, and weak settings are refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from labkit.core.errors import LabkitValueError
from labkit.workshop.settings import HubSettings, is_loopback

ROOT_UID, LEARNER_UID = 0, 4242
STRONG = "correct horse battery staple, 32+ characters long"


def settings(euid: int = ROOT_UID, **env: str) -> HubSettings:
    return HubSettings.from_environment({f"LABKIT_WORKSHOP_{name.upper()}": value for name, value in env.items()}, euid)


@pytest.mark.parametrize("name, value, message", [
    ("TRACK", "short", "choose one of all, core"),
    ("SPAWNER", "docker", "choose one of shared-account, system-users"),
    ("PORT", "eighty", "give a whole number"),
    ("PASSWORD", "only-the-learners-one", "Set both"),
    ("THREADS", "0", "at least 1"),
    ("THREADS", "two", "give a whole number"),
    ("KERNEL_CULL_AFTER_S", "-5", "at least 1"),
    ("ADMIN", "Instructor Smith", "an account name is a lowercase letter"),
    ("ADMIN", "<b>x</b>", "an account name is a lowercase letter"),
    ("ACCOUNT_PREFIX", "way-too-long-", "up to 7"),
    ("UNSAFE_SHARED_ACCOUNT_BEYOND_LOOPBACK", "maybe", "give yes or no"),
])
def test_bad_settings_are_refused_with_what_to_do(name: str, value: str, message: str):
    with pytest.raises(LabkitValueError, match=message):
        settings(**{name: value})


def test_a_root_hub_separates_learners_by_default():
    room = settings()
    assert room.spawner == "system-users" and room.separated
    assert room.account("ada") == "labkit-ada"
    assert room.workspace("ada") == Path("/home/labkit-ada/labkit-workspace")
    assert room.learner_python == Path("/opt/labkit/venv/bin/python")
    assert room.edition == Path("/opt/labkit/edition/core")


def test_a_hub_beyond_loopback_separates_learners_and_needs_root():
    with pytest.raises(LabkitValueError, match="only a hub running as root"):
        settings(LEARNER_UID, ip="0.0.0.0")
    assert settings(ROOT_UID, ip="0.0.0.0").separated


def test_the_shared_account_is_for_a_non_root_hub_on_loopback():
    trusted = settings(LEARNER_UID)
    assert trusted.spawner == "shared-account" and not trusted.separated
    assert trusted.workspace("ada").parts[-3:] == ("learners", "ada", "labkit-workspace")


@pytest.mark.parametrize("ip", ["0.0.0.0", "", "10.1.2.3", "::", "hub.example.org"])
def test_the_shared_account_never_listens_beyond_loopback_by_accident(ip: str):
    with pytest.raises(LabkitValueError, match="UNSAFE_SHARED_ACCOUNT_BEYOND_LOOPBACK=yes"):
        settings(LEARNER_UID, ip=ip, spawner="shared-account")
    loud = settings(LEARNER_UID, ip=ip, spawner="shared-account", unsafe_shared_account_beyond_loopback="yes")
    assert loud.spawner == "shared-account"


@pytest.mark.parametrize("ip, loopback", [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("localhost", True),
                                          ("0.0.0.0", False), ("", False), ("192.168.0.2", False)])
def test_loopback(ip: str, loopback: bool):
    assert is_loopback(ip) is loopback


@pytest.mark.parametrize("password, admin_password, message", [
    ("seven77", STRONG, "at least 8"),
    ("learners-password", "short-admin-password", "at least 32"),
    (STRONG, STRONG, "must differ"),
])
def test_shared_passwords_have_minimums(password: str, admin_password: str, message: str):
    with pytest.raises(LabkitValueError, match=message):
        settings(password=password, admin_password=admin_password)


def test_strong_shared_passwords_are_taken():
    assert settings(password="learners-password", admin_password=STRONG).password == "learners-password"


def test_defaults_are_loopback_core_track_and_no_shared_password():
    trusted = settings(LEARNER_UID)
    assert (trusted.ip, trusted.track, trusted.password, trusted.spawner) == ("127.0.0.1", "core", "", "shared-account")
    assert (trusted.threads, trusted.kernel_cull_after_s, trusted.mem_limit) == (2, 1800, "2G")
