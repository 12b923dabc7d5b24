"""The board's settings: read from the environment, refused with a sentence that says what to change."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from labkit.core.errors import LabkitValueError
from labkit.workshop.board.settings import BoardSettings, check_private_folder, read_cookie_secret

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def hub_env(folder, **more):
    return {"JUPYTERHUB_API_TOKEN": "t", "JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api",
            "JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:10101", "JUPYTERHUB_CLIENT_ID": "service-labkit-board",
            "JUPYTERHUB_SERVICE_PREFIX": "/services/labkit-board/", "LABKIT_BOARD_DB": str(folder / "board.sqlite"),
            **more}


def test_the_settings_from_the_hub_s_environment(tmp_path):
    settings = BoardSettings.from_environment(hub_env(
        tmp_path, LABKIT_BOARD_INSTRUCTORS=" teacher, helper ,", LABKIT_BOARD_EXERCISES="1.1,1.2,2.1",
        LABKIT_BOARD_STUCK_ATTEMPTS="4", LABKIT_BOARD_SERVER_URL="https://{name}.hub.example.org/"))
    assert (settings.host, settings.port, settings.prefix) == ("127.0.0.1", 10101, "/services/labkit-board/")
    assert settings.instructors == {"teacher", "helper"}
    assert settings.exercises == ("1.1", "1.2", "2.1")
    assert (settings.stuck_attempts, settings.stuck_minutes) == (4, 10)
    assert settings.cookie_secret_file == tmp_path / "cookie_secret"
    assert settings.admin_url == "/hub/admin"


@pytest.mark.parametrize(("change", "words"), [
    ({"JUPYTERHUB_API_TOKEN": ""}, "JUPYTERHUB_API_TOKEN is not set"),
    ({"LABKIT_BOARD_DB": ""}, "LABKIT_BOARD_DB is not set"),
    ({"LABKIT_BOARD_EXERCISES": "1.1,one"}, "'one' is not an exercise id"),
    ({"LABKIT_BOARD_EXERCISES": "1.1,1.1"}, "names an exercise twice"),
    ({"LABKIT_BOARD_STUCK_MINUTES": "0"}, "at least 1"),
    ({"LABKIT_BOARD_STUCK_ATTEMPTS": "three"}, "give a whole number"),
    ({"LABKIT_BOARD_SERVER_URL": "javascript:alert(1)//{name}"}, "give an http(s) URL"),
    ({"LABKIT_BOARD_SERVER_URL": "https://{user}.example.org/"}, "give an http(s) URL"),
])
def test_a_setting_the_board_would_misread_is_refused(tmp_path, change, words):
    with pytest.raises(LabkitValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        BoardSettings.from_environment(hub_env(tmp_path, **change))


def test_the_database_folder_must_exist_and_be_0700(tmp_path):
    with pytest.raises(LabkitValueError, match="does not exist: make it with `mkdir -m 700"):
        check_private_folder(tmp_path / "missing" / "board.sqlite")
    folder = tmp_path / "board"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    with pytest.raises(LabkitValueError, match="is 0755: .* must be 0700"):
        check_private_folder(folder / "board.sqlite")
    folder.chmod(0o700)
    check_private_folder(folder / "board.sqlite")
    with pytest.raises(LabkitValueError, match="belongs to another account"):
        check_private_folder(folder / "board.sqlite", euid=os.geteuid() + 1)


def test_the_cookie_secret_is_made_once_0600_and_kept(tmp_path):
    path = tmp_path / "cookie_secret"
    secret = read_cookie_secret(path)
    assert len(secret) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_cookie_secret(path) == secret  # a restart keeps the instructor's session


def test_a_cookie_secret_others_may_read_or_a_link_is_refused(tmp_path):
    path = tmp_path / "cookie_secret"
    read_cookie_secret(path)
    path.chmod(0o640)
    with pytest.raises(LabkitValueError, match="chmod 600"):
        read_cookie_secret(path)
    link = tmp_path / "link"
    link.symlink_to(path)
    with pytest.raises(LabkitValueError, match="a link is refused"):
        read_cookie_secret(link)
    short = tmp_path / "short"
    short.write_bytes(b"x")
    short.chmod(0o600)
    with pytest.raises(LabkitValueError, match="at least 32"):
        read_cookie_secret(short)


def test_the_service_refuses_a_folder_others_may_read_in_one_line(tmp_path):
    folder = tmp_path / "board"
    folder.mkdir()
    folder.chmod(0o755)
    env = {**os.environ, **hub_env(folder)}
    result = subprocess.run([sys.executable, "-m", "labkit.workshop.board"], env=env, cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"labkit-board: {folder} is 0755: it holds every learner's verdicts "
                                                  f"and the board's cookie secret, so it must be 0700 (`chmod 700 {folder}`)."]


def test_the_hub_passes_every_stuck_setting_to_the_board(tmp_path):
    from labkit.workshop.board_service import board_service
    from labkit.workshop.settings import HubSettings
    room = HubSettings.from_environment({"LABKIT_WORKSHOP_SPAWNER": "shared-account", "LABKIT_WORKSHOP_STUCK_ATTEMPTS": "5",
                                         "LABKIT_WORKSHOP_STUCK_MINUTES": "7", "LABKIT_WORKSHOP_STUCK_REPEATS": "4",
                                         "LABKIT_WORKSHOP_STUCK_SLOWER": "3"}, euid=1000)
    environment = board_service(room)["environment"]
    settings = BoardSettings.from_environment(hub_env(tmp_path, **environment))
    assert (settings.stuck_attempts, settings.stuck_minutes, settings.stuck_repeats, settings.stuck_slower) == (5, 7, 4, 3)
    with pytest.raises(LabkitValueError, match="LABKIT_WORKSHOP_STUCK_REPEATS=0: give a whole number of at least 1"):
        HubSettings.from_environment({"LABKIT_WORKSHOP_SPAWNER": "shared-account", "LABKIT_WORKSHOP_STUCK_REPEATS": "0"},
                                     euid=1000)
