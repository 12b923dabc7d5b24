"""The room's language (LABKIT_WORKSHOP_LANGUAGE): refused unless labkit speaks it, given to every learner server as
LABKIT_LANG and to the board, and recorded in each workspace the room makes. One test starts the real hub."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labkit.core.errors import LabkitValueError
from labkit.i18n.messages import workspace_language
from labkit.progress.journal import WORKSPACE_MARKER
from labkit.workshop import learner_workspace
from labkit.workshop.board_service import board_service
from labkit.workshop.load import parse_verdicts
from labkit.workshop.provision import server_environment, workspace_command, write_room_edition
from labkit.workshop.settings import ROOT, HubSettings
from tests.workshop.hub import require_proxy, run_code, workshop_hub

NOTEBOOKS = ROOT / "notebooks"


def test_the_room_speaks_english_unless_told_otherwise():
    assert HubSettings.from_environment({}, euid=1000).language == "en"
    assert HubSettings.from_environment({"LABKIT_WORKSHOP_LANGUAGE": "zh"}, euid=1000).language == "zh"


@pytest.mark.parametrize("value", ["fr", "zh_CN", "ZH", "", "en "])
def test_a_language_labkit_does_not_speak_is_refused_with_the_rule(value: str):
    with pytest.raises(LabkitValueError, match=r"LABKIT_WORKSHOP_LANGUAGE=.*one of en, zh, ru"):
        HubSettings.from_environment({"LABKIT_WORKSHOP_LANGUAGE": value}, euid=1000)


@pytest.mark.parametrize("spawner", ["shared-account", "system-users"])
def test_every_learner_server_and_the_board_get_the_room_language(spawner: str, tmp_path: Path):
    room = HubSettings(spawner=spawner, language="ru", install=tmp_path / "opt")
    assert server_environment(room, tmp_path / "bin")["LABKIT_LANG"] == "ru"
    assert board_service(room)["environment"]["LABKIT_LANG"] == "ru"
    command = workspace_command(room, tmp_path / "ws")
    assert command[command.index("--language") + 1] == "ru"


def test_the_workspace_the_room_makes_records_the_room_language(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    room = HubSettings(spawner="shared-account", language="zh", notebooks=NOTEBOOKS)
    command = workspace_command(room, tmp_path / "ws")
    assert learner_workspace.main(command[command.index("-m") + 2:]) == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "ws" / WORKSPACE_MARKER).read_text())["language"] == "zh"
    assert workspace_language(tmp_path / "ws") == "zh"  # what labkit's messages read when LABKIT_LANG is not set


def test_a_room_s_workspace_comes_from_its_edition_in_the_room_language(tmp_path: Path):
    room = HubSettings(spawner="system-users", language="ru", install=tmp_path / "opt", notebooks=NOTEBOOKS)
    edition = write_room_edition(room)
    command = workspace_command(room, tmp_path / "ws")
    assert learner_workspace.main(command[command.index("-m") + 2:]) == 0
    assert workspace_language(tmp_path / "ws") == "ru"
    start_here = (tmp_path / "ws" / "00_start_here.ipynb").read_text(encoding="utf-8")
    assert start_here == (edition / "00_start_here.ipynb").read_text(encoding="utf-8")
    assert re.search("[а-яА-Я]{4}", start_here), "the labs themselves in Russian"


def test_a_workspace_keeps_its_language_when_the_room_restarts_in_another(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    english, chinese = (HubSettings(spawner="shared-account", language=lang, notebooks=NOTEBOOKS) for lang in ("en", "zh"))
    for room in (english, chinese):
        command = workspace_command(room, tmp_path / "ws")
        assert learner_workspace.main(command[command.index("-m") + 2:]) == 0  # her server starts all the same
    assert workspace_language(tmp_path / "ws") == "en"
    assert "holds the labs in en, the room speaks zh: kept as it is" in capsys.readouterr().out


@pytest.mark.workshop
@pytest.mark.slow
def test_a_chinese_room_s_learner_gets_chinese_verdicts_and_may_switch_her_own_kernel(tmp_path: Path):
    """The real hub (shared account, one learner): her kernel, her workspace and the board all speak the room's zh."""
    require_proxy()
    with workshop_hub(tmp_path, settings={"LABKIT_WORKSHOP_LANGUAGE": "zh", "LABKIT_WORKSHOP_SPAWNER": "shared-account"}) as hub:
        hub.api("users", "POST", {"usernames": ["mei"]})
        hub.start_server("mei")
        hub.wait_until_ready("mei")
        verdict = 'from labkit.core.checks import CheckResult, Status\nprint(CheckResult("1.1", Status.SOLVED, ""))\n'
        code = ("import os\nprint(os.environ['LABKIT_LANG'])\n" + verdict
                + "os.environ['LABKIT_LANG'] = 'ru'\n" + verdict)  # she switches for herself, in her kernel
        reply = run_code(hub.server_url("mei"), hub.learner_token("mei"), code)
        assert not reply.errors, reply.errors
        lines = reply.stdout.splitlines()
        assert lines[0] == "zh" and parse_verdicts(lines[1], "zh") == {"1.1": "solved"}, lines
        assert parse_verdicts(lines[2], "ru") == {"1.1": "solved"}, lines
        assert workspace_language(hub.settings.workspace("mei")) == "zh"
        boards = [p for p in hub.processes() if "labkit.workshop.board" in " ".join(p.cmdline())]
        assert boards and all(board.environ()["LABKIT_LANG"] == "zh" for board in boards)
