"""The room: two learners on the real hub, each as their own Unix account, run notebook 00 and attack the room.

One hub for the module (starting it, and two JupyterLab servers, costs most of
the time). The hub runs as root, as ``make workshop`` does for a room, with the
dummy authenticator of the test's own config (never the real one's), learner
accounts of a prefix of its own (removed, with their homes, when it stops) and
a private copy of the solved notebooks. Each attack is what a learner's code
can do in a notebook cell; the tests show it fails with PermissionError, not
merely that a file is missing (a file in /tmp or /dev/shm is not there at all
for a learner: her server has its own).
"""
from __future__ import annotations

import json
import pwd
import shutil
import stat
import tempfile
import time
import urllib.error
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

import labkit
from labkit.workshop.accounts import learner_accounts
from labkit.workshop.handout import hand_out_solutions
from labkit.workshop.limits import PRIVATE_FOLDERS
from labkit.workshop.memory import memory_cgroups
from labkit.workshop.settings import PREFIX, ROOT, HubSettings
from tests.workshop.hub import Hub, learner_install, request, require_proxy, run_code, run_notebook, server_process, workshop_hub

LEARNERS = ("ada", "grace")
LEARNER_PASSWORD, ADMIN_PASSWORD = "the-room-password", "the instructor's own password, 32+ long"
pytestmark = [pytest.mark.workshop, pytest.mark.slow]


@dataclass
class Room:
    hub: Hub
    settings: HubSettings
    tokens: dict[str, str]
    folder: Path

    def workspace(self, name: str) -> Path:
        return self.settings.workspace(name)


@pytest.fixture(scope="module")
def room() -> Iterator[Room]:
    require_proxy()
    install = learner_install()
    # Private to root (mkdtemp makes it 0700), as a hub's folder must be, and outside /tmp: each learner's server
    # gets a /tmp of its own, where the hub's files would be missing, not refused, and the attacks below prove less.
    folder = Path(tempfile.mkdtemp(prefix="labkit-room-test-", dir="/var/lib"))
    try:
        yield from _room_in(folder, install)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _room_in(folder: Path, install: Path) -> Iterator[Room]:
    settings = {PREFIX + "INSTALL": str(install), PREFIX + "PASSWORD": LEARNER_PASSWORD,
                PREFIX + "ADMIN_PASSWORD": ADMIN_PASSWORD}  # in the hub's environment: a secret to look for
    with workshop_hub(folder, settings=settings) as hub:
        hub.api("users", "POST", {"usernames": list(LEARNERS)})
        for name in LEARNERS:
            hub.start_server(name)
        for name in LEARNERS:
            hub.wait_until_ready(name)
        yield Room(hub, hub.settings, {name: hub.learner_token(name) for name in LEARNERS}, folder)
    assert sorted(hub.removed_accounts) == sorted(hub.settings.account(name) for name in LEARNERS)
    assert learner_accounts(hub.settings.account_prefix) == [], "a learner account was left behind"
    assert not hub.settings.home("ada").exists()


def test_each_learner_runs_as_their_own_account_in_their_own_workspace(room: Room):
    for name in LEARNERS:
        account = pwd.getpwnam(room.settings.account(name))
        server = server_process(room.hub, name)
        assert server.uids().real == account.pw_uid and server.uids().effective == account.pw_uid
        assert server.environ().get("OMP_NUM_THREADS") == str(HubSettings().threads)
        assert server.environ().get("OMP_WAIT_POLICY") == "PASSIVE"
        assert f"--MappingKernelManager.cull_idle_timeout={HubSettings().kernel_cull_after_s}" in server.cmdline()
        assert not any(key.startswith(PREFIX) for key in server.environ()), "the hub's settings reached a learner"
        listing = request(f"{room.hub.server_url(name)}/api/contents", token=room.tokens[name])
        assert "00_start_here.ipynb" in {item["name"] for item in listing["content"]}
        home = room.workspace(name).parent
        assert stat.S_IMODE(home.stat().st_mode) == 0o700 and home.stat().st_uid == account.pw_uid
        assert (room.workspace(name) / "00_start_here.ipynb").stat().st_uid == account.pw_uid


def test_one_learners_token_does_not_open_anothers_server(room: Room):
    with pytest.raises(urllib.error.HTTPError) as refused:
        request(f"{room.hub.server_url('grace')}/api/contents", token=room.tokens["ada"])
    assert refused.value.code == 403


def test_the_workspace_readme_points_only_inside_the_workspace(room: Room):
    readme = (room.workspace("ada") / "README.md").read_text()
    assert "solutions/" in readme and "lab-reference" not in readme
    assert str(room.settings.notebooks) not in readme and "../" not in readme


def _secrets(room: Room) -> dict[str, str]:
    """What a learner must never see, read by root from where the hub keeps it."""
    found = {"cookie secret": (room.settings.state / "jupyterhub_cookie_secret").read_text().strip(),
             "hub service token": room.hub.token, "admin password": ADMIN_PASSWORD,
             "grace's server token": server_process(room.hub, "grace").environ()["JUPYTERHUB_API_TOKEN"]}
    for process in room.hub.processes():
        token = process.environ().get("CONFIGPROXY_AUTH_TOKEN")
        if token:
            found["proxy token"] = token
    return found


ATTACK = '''
import glob, json, os
targets = json.loads({targets!r})
results = {{}}
for name, (mode, path) in targets.items():
    try:
        if mode == "list":
            os.listdir(path)
        else:
            with open(path, mode):
                pass
        results[name] = "succeeded"
    except OSError as error:
        results[name] = type(error).__name__
seen = []
for folder in glob.glob("/proc/[0-9]*"):
    for part in ("environ", "cmdline"):
        try:
            with open(folder + "/" + part, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        seen += [secret for secret, text in json.loads({secrets!r}).items() if text.encode() in data]
print(json.dumps({{"uid": os.getuid(), "results": results, "secrets seen": sorted(set(seen))}}))
'''


def test_a_learners_code_cannot_reach_the_hub_the_others_or_the_solutions(room: Room):
    secrets = _secrets(room)
    assert len(secrets) == 5, f"the test did not find every secret to look for: {sorted(secrets)}"
    grace, solution = room.workspace("grace"), sorted((room.settings.notebooks / "solutions").glob("*.py"))[0]
    learner_labkit = next((room.settings.install / "venv" / "lib").glob("python3*/site-packages/labkit"))
    targets = {
        "read the cookie secret": ("r", room.settings.state / "jupyterhub_cookie_secret"),
        "read the hub's database": ("rb", room.settings.state / "jupyterhub.sqlite"),
        "read the hub's environment": ("rb", f"/proc/{room.hub.pid}/environ"),
        "read grace's server's environment": ("rb", f"/proc/{server_process(room.hub, 'grace').pid}/environ"),
        "list grace's home": ("list", grace.parent),
        "read grace's notebook": ("r", grace / "00_start_here.ipynb"),
        "read a solution": ("r", solution),
        "read a solved notebook": ("r", room.settings.notebooks / "01_fx_profiling.ipynb"),
        "write labkit's code (the hub's)": ("a", Path(labkit.__file__)),
        "write labkit's code (the learners')": ("a", learner_labkit / "__init__.py"),
        "write the hub's config": ("a", ROOT / "workshop" / "jupyterhub_config.py"),
        "write the learner edition": ("a", room.settings.edition / "00_start_here.ipynb"),
    }
    for _, path in targets.values():  # each target exists: a refusal below is a permission, not a missing file
        assert Path(path).exists(), path
    code = ATTACK.format(targets=json.dumps({name: (mode, str(path)) for name, (mode, path) in targets.items()}),
                         secrets=json.dumps(secrets))
    reply = run_code(room.hub.server_url("ada"), room.tokens["ada"], code)
    assert reply.errors == []
    outcome = json.loads(reply.stdout)
    assert outcome["uid"] == pwd.getpwnam(room.settings.account("ada")).pw_uid
    # A path in /tmp (a checkout cloned there, say) is not even there for a learner: her server has a /tmp of its own
    assert outcome["results"] == {name: "FileNotFoundError" if _in_private_folder(path) else "PermissionError"
                                  for name, (_, path) in targets.items()}
    assert outcome["secrets seen"] == []


def _in_private_folder(path: str | Path) -> bool:
    """Whether a learner's server sees its own folder at ``path`` (labkit.workshop.limits.PRIVATE_FOLDERS)."""
    return any(Path(path).resolve().is_relative_to(folder) for folder in PRIVATE_FOLDERS)


def test_hand_out_gives_each_learner_the_solutions_in_their_own_workspace(room: Room):
    result = hand_out_solutions(room.workspace("ada"), room.settings.notebooks / "solutions")
    assert result.written and not result.refused
    solutions = str(room.workspace("ada") / "solutions")
    code = (f"import os; first = sorted(os.listdir({solutions!r}))[0]; "
            f"print(first, len(open(os.path.join({solutions!r}, first)).read()))")
    reply = run_code(room.hub.server_url("ada"), room.tokens["ada"], code)
    assert reply.errors == [] and reply.stdout.split()[0] == result.written[0]
    assert (room.workspace("ada") / "solutions" / result.written[0]).stat().st_uid == pwd.getpwnam(
        room.settings.account("ada")).pw_uid


def test_notebook_00_runs_for_both_learners_at_once(room: Room):
    with ThreadPoolExecutor(len(LEARNERS)) as pool:
        errors = dict(zip(LEARNERS, pool.map(
            lambda name: run_notebook(room.hub.server_url(name), room.tokens[name], "00_start_here.ipynb").errors, LEARNERS)))
    assert errors == {name: [] for name in LEARNERS}, f"notebook 00 failed:\n{room.hub.log()}"


def test_a_learners_memory_is_bounded(room: Room):
    cgroups = memory_cgroups()
    if isinstance(cgroups, str):
        pytest.skip(cgroups)
    group = cgroups.parent / room.settings.account("ada")
    assert int((group / cgroups.limit_file).read_text()) == 2 * 2**30  # LABKIT_WORKSHOP_MEM_LIMIT's default, 2G
    assert server_process(room.hub, "ada").pid in {int(pid) for pid in (group / "cgroup.procs").read_text().split()}
    code = ("import subprocess, sys\n"
            "print(subprocess.run([sys.executable, '-c', 'b = bytearray(3 * 2**30)'], capture_output=True).returncode)")
    reply = run_code(room.hub.server_url("ada"), room.tokens["ada"], code)
    assert reply.errors == [] and reply.stdout.strip() == "-9", "a 3 GiB allocation beyond the 2 GiB bound was not stopped"


def test_no_process_runs_as_a_learner_but_the_hubs(room: Room):
    accounts = {pwd.getpwnam(room.settings.account(name)).pw_uid for name in LEARNERS}
    theirs = [process for process in psutil.process_iter(["uids"]) if process.info["uids"].real in accounts]
    started = {process.pid for process in room.hub.processes()}
    assert theirs and all(process.pid in started for process in theirs)


def test_a_learner_deleted_from_the_hub_loses_their_account_and_home(room: Room):
    room.hub.api("users", "POST", {"usernames": ["eve"]})
    room.hub.start_server("eve")
    room.hub.wait_until_ready("eve")
    account, home = room.settings.account("eve"), room.settings.home("eve")
    assert (home / "labkit-workspace").is_dir()
    room.hub.api("users/eve/server", "DELETE")
    for _ in range(60):  # the server stops within its bounded wait; then the user can be deleted
        if not room.hub.api("users/eve")["servers"]:
            break
        time.sleep(1)
    room.hub.api("users/eve", "DELETE")
    assert account not in learner_accounts(room.settings.account_prefix) and not home.exists()
