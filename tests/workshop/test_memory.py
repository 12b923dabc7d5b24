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
    assert memory_cgroups(tmp_path, V1) == MemoryCgroups(parent, "memory.limit_in_bytes", "memory.memsw.limit_in_bytes")


def test_cgroup_v2_needs_the_memory_controller_for_its_children(tmp_path: Path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    parent = tmp_path / "hub.service"
    parent.mkdir()
    (parent / "cgroup.subtree_control").write_text("cpu\n")
    assert "no writable memory cgroup" in str(memory_cgroups(tmp_path, V2))
    (parent / "cgroup.subtree_control").write_text("cpu memory\n")
    assert memory_cgroups(tmp_path, V2) == MemoryCgroups(parent, "memory.max", "memory.swap.max")


def test_no_memory_hierarchy_says_why(tmp_path: Path):
    assert "no writable memory cgroup" in str(memory_cgroups(tmp_path, "1:cpu:/\n0::/\n"))


def test_prepare_bounds_memory_and_swap_then_release(tmp_path: Path):
    groups = MemoryCgroups(_v1(tmp_path), "memory.limit_in_bytes", "memory.memsw.limit_in_bytes")
    (groups.parent / "labkit-ada").mkdir()
    (groups.parent / "labkit-ada" / "memory.memsw.limit_in_bytes").write_text("9223372036854771712\n")
    procs = groups.prepare("labkit-ada", 2 * 2**30)
    group = procs.parent
    assert procs == group / "cgroup.procs"
    assert (group / "memory.limit_in_bytes").read_text() == str(2 * 2**30)
    assert (group / "memory.memsw.limit_in_bytes").read_text() == str(2 * 2**30)  # memory and swap: no swap beyond it
    groups.release("labkit-ada")  # a real cgroup with no process left is removed by rmdir; this fake one holds files
    assert group.exists()
    for child in group.iterdir():
        child.unlink()
    groups.release("labkit-ada")
    assert not group.exists()


def test_v2_swap_is_none(tmp_path: Path):
    groups = MemoryCgroups(tmp_path, "memory.max", "memory.swap.max")
    (tmp_path / "labkit-ada").mkdir()
    (tmp_path / "labkit-ada" / "memory.swap.max").write_text("max\n")
    groups.prepare("labkit-ada", 2**30)
    assert (tmp_path / "labkit-ada" / "memory.swap.max").read_text() == "0"
