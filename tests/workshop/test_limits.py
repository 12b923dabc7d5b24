"""Where a learner's pids cgroup goes, how every process in it ends, the disk margin (labkit.workshop.limits).

Fake cgroup trees for where; a real pids cgroup (as root, where the machine has one) for the limit and
the end, with at most 40 sleeping processes, never a fork bomb.
"""
from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # no types published
import pytest

from labkit.workshop.limits import PidsCgroups, end_processes, pids_cgroups, private_folders, short_of_space
from labkit.workshop.spawner import LearnerSpawner

V1 = "8:pids:/hub\n4:memory:/process_api/abc\n0::/\n"
V2 = "0::/hub.service\n"


def test_cgroup_v1_below_the_hubs_own_pids_cgroup(tmp_path: Path):
    parent = tmp_path / "pids" / "hub"
    parent.mkdir(parents=True)
    (parent / "cgroup.procs").write_text("")
    assert pids_cgroups(tmp_path, V1) == PidsCgroups(parent)


def test_cgroup_v2_needs_the_pids_controller_for_its_children(tmp_path: Path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    parent = tmp_path / "hub.service"
    parent.mkdir()
    (parent / "cgroup.subtree_control").write_text("memory\n")
    assert "no writable pids cgroup" in str(pids_cgroups(tmp_path, V2))
    (parent / "cgroup.subtree_control").write_text("memory pids\n")
    assert pids_cgroups(tmp_path, V2) == PidsCgroups(parent)


def test_a_disk_short_of_the_margin_says_where_and_what_to_do(tmp_path: Path):
    usage = os.statvfs(tmp_path)
    free = usage.f_bavail * usage.f_frsize
    assert short_of_space([tmp_path], keep_free=free // 2) == ""
    why = short_of_space([tmp_path], keep_free=free + 2**40)
    assert str(tmp_path) in why and "GiB free" in why and "free space there" in why


@pytest.fixture
def real_group() -> Iterator[Path]:
    groups = pids_cgroups()
    if os.geteuid() != 0 or isinstance(groups, str):
        pytest.skip(groups if isinstance(groups, str) else "only root makes cgroups")
    name = f"labkit-test-{secrets.token_hex(3)}"
    yield groups.prepare(name, limit=20).parent
    groups.release(name)
    assert not (groups.parent / name).exists()


SPAWN = """
import subprocess, sys
started = []
try:
    for _ in range(40):
        started.append(subprocess.Popen(["sleep", "600"], start_new_session=True))
except OSError as exc:
    print(len(started), type(exc).__name__, flush=True)
else:
    print(len(started), "none", flush=True)
sys.stdout.close()
import time; time.sleep(600)
"""


def test_the_pids_limit_holds_and_every_process_ends_with_the_group(real_group: Path):
    procs = str(real_group / "cgroup.procs")

    def join() -> None:
        with open(procs, "w") as handle:
            handle.write(str(os.getpid()))

    parent = subprocess.Popen([sys.executable, "-c", SPAWN], stdout=subprocess.PIPE, text=True, preexec_fn=join)
    try:
        assert parent.stdout is not None
        started, error = parent.stdout.readline().split()
        assert error == "BlockingIOError" and int(started) < 20  # 20 in all, the python and its helper threads included
        pids = [int(pid) for pid in (real_group / "cgroup.procs").read_text().split()]
        assert parent.pid in pids and len(pids) > 1  # the setsid sleeps are in it, outside the parent's session
        assert end_processes(real_group) == []
        assert parent.wait(timeout=10) == -9
        assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_no_learner_server_starts_when_a_disk_is_short_of_the_margin():
    spawner = LearnerSpawner(user=types.SimpleNamespace(name="root", url="/user/root/"), account_prefix="",
                             keep_free=2**60)  # root's home stands for a learner's: the check comes before any start
    with pytest.raises(RuntimeError, match="labkit does not start root's server: the disk of /root has .* GiB free"):
        asyncio.run(spawner.start())


def test_private_folders_are_bounded_tmpfs_seen_by_the_child_alone():
    if os.geteuid() != 0:
        pytest.skip("only root makes a mount namespace")
    marker = f"labkit-test-{secrets.token_hex(3)}"
    script = (f"touch /tmp/{marker} /dev/shm/{marker} && ls /tmp && "
              f"head -c 2M /dev/zero > /dev/shm/{marker}-big; echo $?; df --output=size -B1 /tmp /dev/shm | tail -2")
    result = subprocess.run(["sh", "-c", script], preexec_fn=lambda: private_folders(2**20), capture_output=True,
                            text=True, timeout=30)
    lines = result.stdout.split()
    assert lines[0] == marker  # the child's /tmp holds its own file alone
    assert lines[1] != "0" and "No space left" in result.stderr  # 2 MiB do not fit in 1 MiB
    assert lines[2:] == [str(2**20), str(2**20)]
    assert not Path(f"/tmp/{marker}").exists() and not Path(f"/dev/shm/{marker}").exists()


def test_on_cgroup_v2_the_whole_group_is_killed_at_once(tmp_path: Path):
    (tmp_path / "cgroup.kill").write_text("")
    (tmp_path / "cgroup.procs").write_text("")  # the kernel empties it once every process is gone
    assert end_processes(tmp_path, seconds=1) == []
    assert (tmp_path / "cgroup.kill").read_text() == "1"
