"""Which memory cgroup a learner's server goes in (labkit.workshop.memory), on fake cgroup trees."""
from __future__ import annotations

from pathlib import Path

from labkit.workshop.memory import MemoryCgroups, memory_cgroups

V1 = "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n"
V2 = "0::/hub.service\n"


def _v1(root: Path) -> Path:
    parent = root / "memory" / "process_api" / "abc"
    parent.mkdir(parents=True)
    (parent / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    return parent


def test_cgroup_v1_below_the_hubs_own_memory_cgroup(tmp_path: Path):
    parent = _v1(tmp_path)
    assert memory_cgroups(tmp_path, V1) == MemoryCgroups(parent, "memory.limit_in_bytes")


def test_cgroup_v2_needs_the_memory_controller_for_its_children(tmp_path: Path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    parent = tmp_path / "hub.service"
    parent.mkdir()
    (parent / "cgroup.subtree_control").write_text("cpu\n")
    assert "no writable memory cgroup" in str(memory_cgroups(tmp_path, V2))
    (parent / "cgroup.subtree_control").write_text("cpu memory\n")
    assert memory_cgroups(tmp_path, V2) == MemoryCgroups(parent, "memory.max")


def test_no_memory_hierarchy_says_why(tmp_path: Path):
    assert "no writable memory cgroup" in str(memory_cgroups(tmp_path, "1:cpu:/\n0::/\n"))


def test_bound_then_release(tmp_path: Path):
    groups = MemoryCgroups(_v1(tmp_path), "memory.limit_in_bytes")
    group = groups.bound("labkit-ada", 4321, 2 * 2**30)
    assert (group / "memory.limit_in_bytes").read_text() == str(2 * 2**30)
    assert (group / "cgroup.procs").read_text() == "4321"
    groups.release("labkit-ada")  # a real cgroup with no process left is removed by rmdir; this fake one holds files
    assert group.exists()
    for child in group.iterdir():
        child.unlink()
    groups.release("labkit-ada")
    assert not group.exists()
