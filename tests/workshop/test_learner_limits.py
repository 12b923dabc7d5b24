"""One learner cannot take the room down: processes, /tmp and /dev/shm, what outlives a stop, another's torch cache.

One hub (root, a room, as ``make workshop`` runs it) and one learner's server; each attack is what a
learner's cell can do, every loop bounded in count and time (the fork test starts at most
``PROCESSES + 64`` sleeping processes, never a fork bomb). The learner's account has a prefix of its
own and is removed with its home when the hub stops, a failure included (``workshop_hub``).
"""
from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # no types published
import pytest

from labkit.workshop.limits import PROCESSES, pids_cgroups
from labkit.workshop.settings import PREFIX, HubSettings
from tests.workshop.hub import Hub, learner_install, require_proxy, run_code, workshop_hub

pytestmark = [pytest.mark.workshop, pytest.mark.slow]
NAME = "mallory"
STOP_SECONDS = 60


@dataclass
class Room:
    hub: Hub
    settings: HubSettings
    token: str
    planted: Path  # the torch.compile cache folder another account made in the shared /tmp for mallory

    def run(self, code: str) -> dict[str, object]:
        reply = run_code(self.hub.server_url(NAME), self.token, code)
        assert reply.errors == [], reply.errors
        return dict(json.loads(reply.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Room]:
    require_proxy()
    install = learner_install()
    folder = tmp_path_factory.mktemp("limits")
    prefix = f"lm{secrets.token_hex(2)}-"
    planted = Path("/tmp") / f"torchinductor_{prefix}{NAME}"  # torch's default: $TMPDIR/torchinductor_<account>
    try:
        planted.mkdir(mode=0o777)
        (planted / "planted.py").write_text("print('another learner's code')\n")
        os.chown(planted, pwd.getpwnam("nobody").pw_uid, -1)
        with workshop_hub(folder, settings={PREFIX + "INSTALL": str(install), PREFIX + "ACCOUNT_PREFIX": prefix}) as hub:
            hub.api("users", "POST", {"usernames": [NAME]})
            hub.start_server(NAME)
            hub.wait_until_ready(NAME)
            yield Room(hub, hub.settings, hub.learner_token(NAME), planted)
    finally:
        shutil.rmtree(planted, ignore_errors=True)


FORK = f"""
import json, subprocess
started, error = [], ""
try:
    for _ in range({PROCESSES + 64}):
        started.append(subprocess.Popen(["sleep", "60"]))
except OSError as exc:
    error = type(exc).__name__
for process in started:
    process.kill()
    process.wait()
limit = [line for line in open("/proc/self/limits") if line.startswith("Max processes")][0].split()[2]
print(json.dumps({{"started": len(started), "error": error, "nproc": limit}}))
"""


def test_a_learner_cannot_start_more_than_the_process_limit(room: Room):
    result = room.run(FORK)
    assert result["nproc"] == str(PROCESSES)  # today's main: 96,365, above pid_max
    assert result["error"] == "BlockingIOError" and int(str(result["started"])) < PROCESSES, result
    groups = pids_cgroups()
    if not isinstance(groups, str):
        assert (groups.parent / room.settings.account(NAME) / "pids.max").read_text().strip() == str(PROCESSES)


def test_another_accounts_torch_compile_cache_in_the_shared_tmp_is_not_used(room: Room):
    code = (f"import json, os, tempfile\nfrom torch._inductor.runtime.cache_dir_utils import cache_dir\n"
            f"print(json.dumps({{'cache': cache_dir(), 'planted': os.path.exists({str(room.planted)!r}), "
            f"'tmp': tempfile.gettempdir(), 'mine': os.stat('/tmp').st_dev != os.stat('/').st_dev}}))")
    result = room.run(code)
    assert result["planted"] is False, result  # today's main: the learner's torch loads from the planted folder
    assert result["tmp"] == "/tmp" and result["mine"] is True
    assert result["cache"] == "/tmp/torchinductor"


def test_dev_shm_and_a_background_process_end_with_the_server(room: Room):
    marker = f"labkit-limits-{secrets.token_hex(4)}"
    code = (f"import json, subprocess\nopen('/dev/shm/{marker}', 'wb').write(b'x' * 2**20)\n"
            f"open('/tmp/{marker}', 'wb').write(b'x')\n"
            "process = subprocess.Popen(['sleep', '600'], start_new_session=True)  # setsid: outlives its kernel\n"
            "print(json.dumps({'pid': process.pid}))")
    pid = int(str(room.run(code)["pid"]))
    account = pwd.getpwnam(room.settings.account(NAME))
    try:
        assert psutil.Process(pid).uids().real == account.pw_uid
        assert not Path(f"/dev/shm/{marker}").exists(), "the learner's /dev/shm is the machine's"  # today's main: it is
        assert not Path(f"/tmp/{marker}").exists(), "the learner's /tmp is the machine's"
        room.hub.api(f"users/{NAME}/server", "DELETE")  # what the idle culler does too
        deadline = time.monotonic() + STOP_SECONDS
        while room.hub.api(f"users/{NAME}")["servers"] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not room.hub.api(f"users/{NAME}")["servers"], "the server did not stop"
        assert _running(account.pw_uid) == [], "processes of the learner still run after the stop"  # today's main: sleep
        groups = pids_cgroups()
        if not isinstance(groups, str):
            assert not (groups.parent / account.pw_name).exists()
    finally:
        for path in (Path(f"/dev/shm/{marker}"), Path(f"/tmp/{marker}")):
            path.unlink(missing_ok=True)
        if psutil.pid_exists(pid) and psutil.Process(pid).uids().real == account.pw_uid:
            psutil.Process(pid).kill()


def _running(uid: int) -> list[str]:
    """The command lines of ``uid``'s processes, less those that ended and wait for their parent to read their status."""
    found = []
    for process in psutil.process_iter(["uids", "status", "cmdline"]):
        if process.info["uids"] and process.info["uids"].real == uid and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(" ".join(process.info["cmdline"] or ()))
    return found


# A learner's cell: every world-writable folder she can see (proc and sys aside, at most 240 s of find), a marker
# written into each, and whether each is a mount of its own (another device than the folder above it).
WORLD_WRITABLE = """
import json, os, subprocess
found = subprocess.run(["find", "/", "(", "-path", "/proc", "-o", "-path", "/sys", ")", "-prune", "-o", "-type", "d",
                        "-perm", "-0002", "-print"], capture_output=True, text=True, timeout=240).stdout.split()
folders = [folder for folder in found if not any(folder.startswith(other + "/") for other in found)]
written = []
for folder in folders:
    try:
        with open(os.path.join(folder, {marker!r}), "w") as handle:
            handle.write("a learner's file")
        written.append(folder)
    except OSError:
        pass
own = {{folder: os.stat(folder).st_dev != os.stat(os.path.dirname(folder)).st_dev for folder in folders}}
print(json.dumps({{"folders": folders, "written": written, "own": own}}))
"""


def test_no_world_writable_folder_in_a_learners_view_is_shared(room: Room):
    marker = f"labkit-shared-{secrets.token_hex(4)}"
    if not room.hub.api(f"users/{NAME}")["servers"]:  # stopped by the test before
        room.hub.start_server(NAME)
        room.hub.wait_until_ready(NAME)
    result = room.run(WORLD_WRITABLE.format(marker=marker))
    folders, written = list(result["folders"]), list(result["written"])  # type: ignore[call-overload]
    try:
        assert {"/tmp", "/var/tmp", "/dev/shm"} <= set(folders), folders
        seen_by_others = [folder for folder in written if (Path(folder) / marker).exists()]
        assert seen_by_others == [], f"a learner's file shows in the machine's {seen_by_others}"  # main: /var/tmp, /run/lock
        assert all(dict(result["own"]).values()), f"not a folder of her own: {result['own']}"  # type: ignore[call-overload]
    finally:
        for folder in written:
            (Path(folder) / marker).unlink(missing_ok=True)
