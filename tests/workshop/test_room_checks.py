"""What a room's hub checks before it starts (labkit.workshop.room), and the learner accounts (labkit.workshop.accounts)."""
from __future__ import annotations

import dataclasses
import functools
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from labkit.core.errors import LabkitValueError
from labkit.workshop.accounts import AccountError, ensure_account, learner_accounts, remove_account, remove_accounts
from labkit.workshop.install import others_can_run
from labkit.workshop.limits import short_of_space
from labkit.workshop.room import (
    INSTRUCTOR_CODE,
    RoomError,
    check_isolation,
    check_room,
    instructor_sign_up_code,
    prepare_state,
    writable_by_others,
)
from labkit.workshop.settings import PREFIX, ROOT, HubSettings

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="makes Unix accounts: root only")


def test_state_is_the_hubs_alone(tmp_path: Path):
    settings = HubSettings(state=tmp_path / "state")
    (tmp_path / "state").mkdir(mode=0o755)
    (tmp_path / "state" / "jupyterhub.sqlite").write_bytes(b"")
    (tmp_path / "state" / "jupyterhub.sqlite").chmod(0o644)  # as JupyterHub left it under umask 022
    prepare_state(settings)
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "state" / "jupyterhub.sqlite").stat().st_mode) == 0o600


def test_state_behind_a_link_is_refused(tmp_path: Path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "state").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RoomError, match="not a folder of the hub's own account"):
        prepare_state(HubSettings(state=tmp_path / "state"))


def test_reachable_means_every_folder_above_lets_others_through():
    with tempfile.TemporaryDirectory(dir="/tmp") as top:  # pytest's tmp_path sits in a folder of mode 0700
        Path(top).chmod(0o755)
        inner = Path(top) / "open" / "notebooks"
        inner.mkdir(parents=True, mode=0o755)
        assert others_can_run(inner)
        (Path(top) / "open").chmod(0o700)
        assert not others_can_run(inner)


def test_a_group_or_world_writable_folder_above_the_code_is_found(tmp_path: Path):
    code = tmp_path / "venv" / "labkit"
    code.mkdir(parents=True)
    assert writable_by_others(code) is None
    (tmp_path / "venv").chmod(0o777)
    assert writable_by_others(code) == tmp_path / "venv"
    (tmp_path / "venv").chmod(0o755)
    deep = code / "fx" / "profile.py"
    deep.parent.mkdir()
    deep.write_text("")
    deep.chmod(0o646)  # one world-writable file deep in the tree is enough
    assert writable_by_others(tmp_path / "venv") == deep
    (code / "link").symlink_to("/etc/passwd")  # a link is not followed (its target is checked where it lies)
    deep.chmod(0o644)
    assert writable_by_others(tmp_path / "venv") is None


def _room(tmp_path: Path, notebooks: Path) -> HubSettings:
    return HubSettings(spawner="system-users", install=tmp_path / "install", notebooks=notebooks, state=tmp_path / "state")


def test_a_room_without_the_learner_venv_is_refused(tmp_path: Path):
    with pytest.raises(RoomError, match="make workshop-install"):
        check_room(_room(tmp_path, tmp_path), hub_code=[])


def test_a_room_whose_learners_could_read_the_solutions_is_refused(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("labkit.workshop.room.is_current", lambda prefix: True)
    settings = _room(tmp_path, tmp_path / "notebooks")
    settings.learner_python.parent.mkdir(parents=True)
    settings.learner_python.touch()
    (tmp_path / "notebooks").mkdir()
    monkeypatch.setattr("labkit.workshop.room.others_can_run", lambda path: path == settings.notebooks)
    with pytest.raises(RoomError, match="learners could read the solved notebooks"):
        check_room(settings, hub_code=[])
    monkeypatch.setattr("labkit.workshop.room.others_can_run", lambda path: False)
    check_room(settings, hub_code=[])
    (tmp_path / "install").chmod(0o777)
    with pytest.raises(RoomError, match="a learner could change"):
        check_room(settings, hub_code=[])


def test_a_room_whose_learners_could_read_the_checkout_is_refused(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("labkit.workshop.room.is_current", lambda prefix: True)
    monkeypatch.setattr("labkit.workshop.room.others_can_run", lambda path: path == ROOT)
    settings = _room(tmp_path, tmp_path / "notebooks")
    settings.learner_python.parent.mkdir(parents=True)
    settings.learner_python.touch()
    with pytest.raises(RoomError, match="learners could read the labkit checkout"):
        check_room(settings, hub_code=[])
    check_room(dataclasses.replace(settings, unsafe_readable_checkout=True), hub_code=[])


def test_a_trusted_shared_account_hub_is_not_checked(tmp_path: Path):
    check_room(HubSettings(spawner="shared-account", install=tmp_path / "none"), hub_code=[])


def test_account_names_are_checked_before_any_command(tmp_path: Path):
    with pytest.raises(LabkitValueError, match="not a learner name"):
        ensure_account(HubSettings(homes=tmp_path), "root; rm -rf /")


@needs_root
def test_an_account_is_made_once_private_and_removed_with_its_home(tmp_path: Path):
    prefix = f"lu{secrets.token_hex(2)}-"
    tmp_path.chmod(0o755)
    settings = HubSettings(homes=tmp_path / "homes", account_prefix=prefix)
    try:
        entry = ensure_account(settings, "ada")
        assert entry.pw_name == f"{prefix}ada" and Path(entry.pw_dir) == settings.home("ada")
        assert stat.S_IMODE(Path(entry.pw_dir).stat().st_mode) == 0o700 and Path(entry.pw_dir).stat().st_uid == entry.pw_uid
        assert ensure_account(settings, "ada").pw_uid == entry.pw_uid  # the next log-in finds it
        expiry = subprocess.run(["chage", "-l", entry.pw_name], capture_output=True, text=True, check=True).stdout
        assert "Jan 02, 1970" in expiry, "the account must be expired: no ssh, cron or su outside the server's bound"
        assert learner_accounts(prefix) == [f"{prefix}ada"]
    finally:
        removed = remove_accounts(prefix)
    assert removed == [f"{prefix}ada"] and learner_accounts(prefix) == []
    assert not settings.home("ada").exists()
    with pytest.raises(KeyError):
        pwd.getpwnam(f"{prefix}ada")


@needs_root
def test_one_account_is_removed_with_its_home_and_another_learners_stays(tmp_path: Path):
    prefix = f"lu{secrets.token_hex(2)}-"
    settings = HubSettings(homes=tmp_path / "homes", account_prefix=prefix)
    try:
        ensure_account(settings, "bob")
        ensure_account(settings, "ada")
        assert remove_account(f"{prefix}bob") and not settings.home("bob").exists()
        assert learner_accounts(prefix) == [f"{prefix}ada"]
        assert not remove_account(f"{prefix}bob")  # gone already
    finally:
        remove_accounts(prefix)


@needs_root
def test_an_account_labkit_did_not_make_is_never_taken_or_removed():
    settings = HubSettings(account_prefix="r", homes=Path("/nonexistent"))  # learner "oot" would be the account root
    with pytest.raises(AccountError, match="is not a labkit learner's"):
        ensure_account(settings, "oot")
    assert remove_accounts("r") == []  # root's GECOS is not labkit's
    assert not remove_account("root")


def test_the_instructors_sign_up_code_is_made_once_and_private(tmp_path: Path):
    settings = HubSettings(state=tmp_path / "state")
    prepare_state(settings)
    code = instructor_sign_up_code(settings)
    assert len(code) >= 16 and instructor_sign_up_code(settings) == code
    assert stat.S_IMODE((tmp_path / "state" / INSTRUCTOR_CODE).stat().st_mode) == 0o600
    (tmp_path / "state" / INSTRUCTOR_CODE).write_text("")  # a write cut short: never an empty code
    assert len(instructor_sign_up_code(settings)) >= 16


# --- isolation: a room's learners never run as root, and never share the hub's origin -----------------------------


def test_a_room_without_subdomains_is_refused_unless_every_participant_is_trusted():
    for room in (HubSettings(), HubSettings(ip="0.0.0.0")):
        with pytest.raises(RoomError, match="SUBDOMAIN_HOST=https://hub.example.org") as refused:
            check_isolation(room, euid=0)
        assert "UNSAFE_EVERY_PARTICIPANT_TRUSTED=yes" in str(refused.value)
        check_isolation(dataclasses.replace(room, subdomain_host="https://hub.example.org"), euid=0)
        check_isolation(dataclasses.replace(room, unsafe_trusted=True), euid=0)


def test_a_non_root_hub_on_loopback_needs_no_subdomains():
    check_isolation(HubSettings(spawner="shared-account"), euid=4242)


def test_the_shared_account_is_refused_when_the_hub_runs_as_root():
    for shared in (HubSettings(spawner="shared-account"), HubSettings(spawner="shared-account", unsafe_trusted=True),
                   HubSettings(spawner="shared-account", subdomain_host="https://hub.example.org", unsafe_trusted=True)):
        with pytest.raises(RoomError, match="every learner's kernel would run as root"):
            check_isolation(shared, euid=0)
    check_isolation(HubSettings(spawner="shared-account", unsafe_shared_account_as_root=True), euid=0)  # the tests' machine


def test_a_room_short_of_disk_space_is_refused_before_it_starts(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("labkit.workshop.room.is_current", lambda prefix: True)
    monkeypatch.setattr("labkit.workshop.room.others_can_run", lambda path: False)
    settings = dataclasses.replace(_room(tmp_path, tmp_path / "notebooks"), homes=tmp_path / "homes")
    settings.learner_python.parent.mkdir(parents=True)
    settings.learner_python.touch()
    check_room(settings, hub_code=[])  # this disk has room: the state and homes folders need not exist yet
    free = shutil.disk_usage(tmp_path).free
    monkeypatch.setattr("labkit.workshop.room.short_of_space",
                        functools.partial(short_of_space, keep_free=free + 2**40))
    with pytest.raises(RoomError, match=r"not starting the room: the disk of .* GiB free"):
        check_room(settings, hub_code=[])


def _config_console(tmp_path: Path, **settings: str) -> str:
    """What ``workshop/jupyterhub_config.py`` prints on the hub's console as it loads, with these settings."""
    import sys

    env = {**{key: value for key, value in os.environ.items() if not key.startswith(PREFIX)},
           PREFIX + "STATE": str(tmp_path / "state"), PREFIX + "SPAWNER": "shared-account",
           PREFIX + "HOMES": str(tmp_path / "learners"), PREFIX + "BOARD_PORT": "18090",
           **{PREFIX + key.upper(): value for key, value in settings.items()}}
    if os.geteuid() == 0:
        env[PREFIX + "UNSAFE_SHARED_ACCOUNT_AS_ROOT"] = "yes"
    code = ("import runpy; from traitlets.config import Config; c = Config()\n"
            f"runpy.run_path({str(ROOT / 'workshop' / 'jupyterhub_config.py')!r}, "
            "init_globals={'get_config': lambda: c, 'load_subconfig': lambda path: None})")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_the_trusted_participants_setting_says_at_start_what_it_gives_away(tmp_path: Path):
    said = _config_console(tmp_path, unsafe_every_participant_trusted="yes")
    assert "UNSAFE_EVERY_PARTICIPANT_TRUSTED=yes: every learner's server shares the hub's origin" in said, said
    assert "acts as whoever opens it, the instructor included" in said and "Open no link into a learner's server" in said
    with_subdomains = _config_console(tmp_path, unsafe_every_participant_trusted="yes",
                                      subdomain_host="https://hub.example.org")
    assert "gives nothing away here" in with_subdomains
