"""labkit.core.files writes the file a user named, and nothing else."""
import os
import stat

import pytest

from labkit.core.errors import LabkitValueError
from labkit.core.files import write_text

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)


def test_writes_a_new_file_readable_by_others(tmp_path):
    path = write_text(tmp_path / "report.csv", "a,b\n")
    assert path.read_text() == "a,b\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_keeps_the_permission_bits_of_an_existing_file(tmp_path):
    path = tmp_path / "report.csv"
    path.write_text("old")
    path.chmod(0o600)
    write_text(path, "new")
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_writes_through_a_symlink_and_keeps_the_link(tmp_path):
    target = tmp_path / "shared" / "report.csv"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "latest.csv"
    link.symlink_to(target)
    write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_refuses_a_fifo_and_leaves_it_alone(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(LabkitValueError, match="special file"):
        write_text(fifo, "x")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_refuses_a_folder(tmp_path):
    with pytest.raises(LabkitValueError, match="is a folder"):
        write_text(tmp_path, "x")


def test_missing_folder_is_named_and_nothing_is_left_behind(tmp_path):
    with pytest.raises(LabkitValueError, match="does not exist"):
        write_text(tmp_path / "missing" / "report.csv", "x")
    assert list(tmp_path.iterdir()) == []


def test_an_error_while_writing_keeps_the_old_file_and_no_temp_file(tmp_path):
    path = tmp_path / "report.csv"
    path.write_text("old")

    def failing(handle):
        handle.write("half")
        raise RuntimeError("boom")

    from labkit.core.files import write_file

    with pytest.raises(RuntimeError, match="boom"):
        write_file(path, failing)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.csv"]
