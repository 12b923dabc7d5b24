"""labkit.learner.edition: a learner edition is written whole, read only when whole, and rebuilt in place."""
from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from labkit.core import files
from labkit.core.errors import LabkitValueError
from labkit.learner import edition
from labkit.learner.edition import RECORD, read_edition, write_edition

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

V1 = {"01_a.ipynb": "notebook a", "02_b.ipynb": "notebook b", "README.md": "read me"}


def test_an_edition_is_read_back_as_written(tmp_path: Path) -> None:
    written = write_edition(tmp_path / "ed", V1, "core", room=True)
    assert sorted(p.name for p in (tmp_path / "ed").iterdir()) == sorted([*V1, RECORD])
    assert (tmp_path / "ed").stat().st_mode & 0o777 == 0o755 and (tmp_path / "ed" / "README.md").stat().st_mode & 0o777 == 0o644
    read = read_edition(tmp_path / "ed")
    assert read == written and (read.track, read.room, read.files) == ("core", True, V1)
    assert json.loads((tmp_path / "ed" / RECORD).read_text())["complete"] is True


def test_a_rebuild_replaces_files_in_place_and_removes_only_those_it_no_longer_writes(tmp_path: Path) -> None:
    folder = tmp_path / "ed"
    write_edition(folder, V1, "core", room=True)
    (folder / "instructor-notes.txt").write_text("not listed: never touched")
    rebuilt = write_edition(folder, {"01_a.ipynb": "notebook a, fixed", "README.md": "read me"}, "all", room=False)
    assert not (folder / "02_b.ipynb").exists() and (folder / "instructor-notes.txt").is_file()
    assert read_edition(folder) == rebuilt and (rebuilt.track, rebuilt.room) == ("all", False)


def test_a_folder_that_is_not_an_edition_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "thesis.tex").write_text("mine")
    with pytest.raises(LabkitValueError, match="not a learner edition; choose another folder"):
        write_edition(busy, V1, "core", room=True)
    assert [p.name for p in busy.iterdir()] == ["thesis.tex"]
    with pytest.raises(LabkitValueError, match="holds no edition.json"):
        read_edition(busy)
    (busy / RECORD).write_text("{not json")
    with pytest.raises(LabkitValueError, match="damaged"):
        write_edition(busy, V1, "core", room=True)
    (tmp_path / "afile").write_text("")
    with pytest.raises(LabkitValueError, match="not a folder"):
        write_edition(tmp_path / "afile", V1, "core", room=True)
    (tmp_path / "link").symlink_to(busy)
    with pytest.raises(LabkitValueError, match="symbolic link"):
        write_edition(tmp_path / "link", V1, "core", room=True)
    with pytest.raises(LabkitValueError, match="not a file name"):
        write_edition(tmp_path / "new", {"../escape.ipynb": "x"}, "core", room=True)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("exception", [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")],
                         ids=["ctrl-c", "disk-full"])
def test_an_interrupted_build_is_never_read_and_the_next_build_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exception: BaseException
) -> None:
    folder = tmp_path / "ed"
    write_edition(folder, V1, "core", room=True)
    calls = []

    def write_text(path: Path, text: str) -> Path:
        calls.append(path)
        if len(calls) == 3:  # the record, 01_a, then 02_b fails

            def fail(handle) -> None:
                raise exception

            return files.write_file(path, fail)
        return files.write_text(path, text)

    monkeypatch.setattr(edition, "write_text", write_text)
    new = {"01_a.ipynb": "v2 a", "02_b.ipynb": "v2 b", "README.md": "v2"}
    with pytest.raises(KeyboardInterrupt if isinstance(exception, KeyboardInterrupt) else LabkitValueError):
        write_edition(folder, {**new, "03_c.ipynb": "c"}, "core", room=True)
    monkeypatch.undo()
    with pytest.raises(LabkitValueError, match="incomplete"):
        read_edition(folder)
    write_edition(folder, new, "core", room=True)  # 03_c was never written; 01_a's earlier listing is remembered
    assert read_edition(folder).files == new and sorted(p.name for p in folder.iterdir()) == sorted([*new, RECORD])


def test_a_file_changed_after_the_build_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ed"
    write_edition(folder, V1, "core", room=True)
    (folder / "02_b.ipynb").write_text("being rebuilt")
    with pytest.raises(LabkitValueError, match="changed since the learner edition was built"):
        read_edition(folder)
    (folder / "02_b.ipynb").unlink()
    with pytest.raises(LabkitValueError, match="Cannot read"):
        read_edition(folder)
    record = json.loads((folder / RECORD).read_text())
    (folder / RECORD).write_text(json.dumps({**record, "track": "short"}))
    with pytest.raises(LabkitValueError, match="format or track unknown"):
        read_edition(folder)
    with pytest.raises(LabkitValueError, match="not a folder holding a learner edition"):
        read_edition(tmp_path / "missing")
