"""labkit.authoring.output_folder: a tool replaces only the files it wrote, keeps the rest, and says so."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from labkit.authoring import output_folder
from labkit.authoring.output_folder import MANIFEST, OutputFolder
from labkit.core.errors import LabkitError, LabkitValueError

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)


def folder(path: Path) -> OutputFolder:
    return OutputFolder(path, tool="demo", marker=".labkit-demo", what="a demo output")


def builder(files: dict[str, str]) -> Callable[[Path], None]:
    def build(staging: Path) -> None:
        for rel, text in files.items():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / rel).write_text(text)

    return build


V1 = {"index.html": "v1 index", "pages/a.html": "v1 a", "pages/old.html": "v1 old", ".labkit-demo": "marker"}
V2 = {"index.html": "v2 index", "pages/a.html": "v2 a", ".labkit-demo": "marker"}


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links as 'link -> target', never followed) with its content."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            found[rel] = f"link -> {os.readlink(path)}" if path.is_symlink() else path.read_text()
    return found


def test_new_folder_gets_the_files_and_a_manifest_of_their_hashes(tmp_path: Path) -> None:
    out = tmp_path / "a" / "out"
    report = folder(out).update(builder(V1))
    assert {k: v for k, v in snapshot(out).items() if k != MANIFEST} == V1
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["tool"] == "demo" and sorted(manifest["files"]) == sorted(V1)
    assert report.added == [] and report.lines() == []
    assert [p.name for p in out.iterdir() if p.name.startswith(".labkit-staging")] == []


def test_rebuild_keeps_added_files_replaces_own_and_removes_own_stale(tmp_path: Path) -> None:
    out = tmp_path / "out"
    folder(out).update(builder(V1))
    (out / "custom.css").write_text("mine")
    (out / "pages" / "notes.md").write_text("mine too")
    report = folder(out).update(builder(V2))
    files = snapshot(out)
    assert files["index.html"] == "v2 index" and files["pages/a.html"] == "v2 a"
    assert "pages/old.html" not in files  # written by the tool, unchanged, no longer produced
    assert files["custom.css"] == "mine" and files["pages/notes.md"] == "mine too"
    assert report.added == ["custom.css", "pages/notes.md"] and report.removed == ["pages/old.html"]
    assert "kept 2 files you added: custom.css, pages/notes.md" in report.lines()


def test_edited_file_is_kept_and_the_new_version_goes_beside_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    folder(out).update(builder(V1))
    (out / "pages" / "a.html").write_text("my edit")
    (out / "pages" / "old.html").write_text("my edit of a page the tool drops")
    report = folder(out).update(builder(V2))
    assert (out / "pages" / "a.html").read_text() == "my edit"
    assert (out / "pages" / "a.labkit-new.html").read_text() == "v2 a"
    assert (out / "pages" / "old.html").read_text() == "my edit of a page the tool drops"
    assert report.changed == [("pages/a.html", "pages/a.labkit-new.html")] and report.changed_stale == ["pages/old.html"]
    text = "\n".join(report.lines())
    assert "pages/a.html (new version: pages/a.labkit-new.html)" in text and "pages/old.html" in text
    # The next run replaces its own beside file and still keeps the user's.
    again = folder(out).update(builder({**V2, "pages/a.html": "v3 a"}))
    assert (out / "pages" / "a.html").read_text() == "my edit"
    assert (out / "pages" / "a.labkit-new.html").read_text() == "v3 a"
    assert again.changed == [("pages/a.html", "pages/a.labkit-new.html")]


def test_edited_file_and_edited_beside_file_is_refused_before_anything_moves(tmp_path: Path) -> None:
    out = tmp_path / "out"
    folder(out).update(builder(V1))
    (out / "index.html").write_text("my edit")
    folder(out).update(builder(V2))
    (out / "index.labkit-new.html").write_text("my edit of the new one too")
    before = snapshot(out)
    with pytest.raises(LabkitValueError, match="move one of them away"):
        folder(out).update(builder({**V2, "pages/a.html": "v3 a"}))
    assert snapshot(out) == before


def test_unchanged_identical_output_needs_no_move(tmp_path: Path) -> None:
    out = tmp_path / "out"
    folder(out).update(builder(V1))
    report = folder(out).update(builder(V1))
    assert report.lines() == [] and snapshot(out)["index.html"] == "v1 index"


def test_foreign_folder_other_tools_and_damaged_manifests_are_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(LabkitValueError, match="is not a demo output"):
        folder(foreign).update(builder(V1))
    assert snapshot(foreign) == {"keep.txt": "mine"}

    other = tmp_path / "other"
    OutputFolder(other, tool="other-tool", marker=".x", what="something else").update(builder({"a": "1"}))
    with pytest.raises(LabkitValueError, match="written by other-tool"):
        folder(other).update(builder(V1))

    damaged = tmp_path / "damaged"
    folder(damaged).update(builder(V1))
    (damaged / MANIFEST).write_text("{not json")
    with pytest.raises(LabkitValueError, match="damaged"):
        folder(damaged).update(builder(V2))
    assert snapshot(damaged)["index.html"] == "v1 index"


def legacy_folder(out: Path, files: dict[str, str]) -> None:
    """What a tool wrote before manifests: its files, marker last."""
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)


def test_legacy_folder_adopts_only_files_with_the_tools_bytes_and_keeps_every_other(tmp_path: Path) -> None:
    out = tmp_path / "out"
    legacy_folder(out, {**V1, "pages/same.html": "same"})
    (out / "added.txt").write_text("mine")
    (out / "index.html").write_text("my edit")
    report = folder(out).update(builder({**V2, "pages/same.html": "same"}))
    files = snapshot(out)
    assert files["pages/same.html"] == "same" and "pages/same.labkit-new.html" not in files  # the tool's bytes: adopted
    assert files["index.html"] == "my edit" and files["index.labkit-new.html"] == "v2 index"
    assert files["pages/a.html"] == "v1 a" and files["pages/a.labkit-new.html"] == "v2 a"  # maybe the old tool's: kept
    assert files["pages/old.html"] == "v1 old" and files["added.txt"] == "mine"  # unknown origin, so kept
    assert sorted(report.added) == ["added.txt", "pages/old.html"]
    assert report.changed == [("index.html", "index.labkit-new.html"), ("pages/a.html", "pages/a.labkit-new.html")]
    assert any("before labkit kept a manifest" in line for line in report.lines())
    manifest = json.loads(files[MANIFEST])
    assert manifest["tool"] == "demo" and "pages/same.html" in manifest["files"] and "index.html" not in manifest["files"]
    again = folder(out).update(builder({**V2, "pages/same.html": "same"}))  # now a folder with a manifest
    assert snapshot(out)["index.html"] == "my edit" and again.changed[0] == ("index.html", "index.labkit-new.html")


def test_legacy_adoption_never_trusts_a_restored_modification_time(tmp_path: Path) -> None:
    """``cp -p``, ``rsync -a``, ``tar`` and ``unzip`` give an edited file back its old time: it is still kept."""
    out = tmp_path / "out"
    legacy_folder(out, V1)
    (out / "index.html").write_text("my edit, copied back with cp -p")
    older = (out / ".labkit-demo").stat().st_mtime_ns - 86_400 * 10**9  # a day before the marker: "the tool's", by time
    os.utime(out / "index.html", ns=(older, older))
    folder(out).update(builder(V2))
    files = snapshot(out)
    assert files["index.html"] == "my edit, copied back with cp -p" and files["index.labkit-new.html"] == "v2 index"
    assert files["pages/a.html"] == "v1 a" and files["pages/a.labkit-new.html"] == "v2 a"


def test_links_inside_the_folder_are_never_followed(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.html").write_text("precious")
    folder(out).update(builder(V1))
    (out / "index.html").unlink()
    (out / "index.html").symlink_to(elsewhere / "precious.html")
    (out / "pages" / "old.html").unlink()
    (out / "pages" / "old.html").symlink_to(elsewhere / "precious.html")
    report = folder(out).update(builder(V2))
    assert (elsewhere / "precious.html").read_text() == "precious"
    assert (out / "index.html").is_symlink() and (out / "index.labkit-new.html").read_text() == "v2 index"
    assert (out / "pages" / "old.html").is_symlink()
    assert ("index.html", "index.labkit-new.html") in report.changed

    # A link where the tool needs a folder is refused; nothing is written through it.
    (out / "pages" / "a.html").unlink()
    (out / "pages" / "old.html").unlink()
    (out / "pages").rmdir()
    (out / "pages").symlink_to(elsewhere, target_is_directory=True)
    before = snapshot(out)
    with pytest.raises(LabkitValueError, match="symbolic link"):
        folder(out).update(builder(V2))
    assert snapshot(elsewhere) == {"precious.html": "precious"} and snapshot(out) == before


def test_a_manifest_that_is_a_link_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    folder(out).update(builder(V1))
    target = tmp_path / "real.json"
    (out / MANIFEST).rename(target)
    (out / MANIFEST).symlink_to(target)
    with pytest.raises(LabkitValueError, match="not a regular file"):
        folder(out).update(builder(V2))
    assert (out / MANIFEST).is_symlink()


def test_error_while_building_leaves_the_previous_output_and_no_new_folder(tmp_path: Path) -> None:
    def failing(staging: Path) -> None:
        (staging / "index.html").write_text("half")
        raise LabkitError("conversion failed")

    out = tmp_path / "out"
    folder(out).update(builder(V1))
    before = snapshot(out)
    with pytest.raises(LabkitError, match="conversion failed"):
        folder(out).update(failing)
    assert snapshot(out) == before
    new = tmp_path / "deep" / "new"
    with pytest.raises(LabkitError, match="conversion failed"):
        folder(new).update(failing)
    assert not (tmp_path / "deep").exists()


@pytest.mark.parametrize("exception", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_failure_while_moving_files_in_rolls_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exception: BaseException
) -> None:
    out = tmp_path / "out"
    folder(out).update(builder(V1))
    (out / "added.txt").write_text("mine")
    before = snapshot(out)
    real_replace, calls = os.replace, []

    def replace_failing_late(src, dst) -> None:
        calls.append(dst)
        if len(calls) == 5:
            raise exception
        real_replace(src, dst)

    monkeypatch.setattr(output_folder.os, "replace", replace_failing_late)
    expected = LabkitError if isinstance(exception, OSError) else KeyboardInterrupt
    with pytest.raises(expected) as info:
        folder(out).update(builder({**V2, "new/page.html": "new"}))
    monkeypatch.undo()
    assert len(calls) > 5  # the fifth move failed, then the undo moved files back
    assert snapshot(out) == before and not (out / "new").exists()
    assert [p.name for p in out.iterdir() if p.name.startswith(".labkit-staging")] == []
    if isinstance(exception, OSError):
        assert "No space left" in str(info.value) and "staging" not in str(info.value)
        assert f"{out} was left as it was" in str(info.value)


# --- the output path itself -----------------------------------------------------


def test_output_path_that_is_a_file_special_file_or_broken_link_is_a_clear_error(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(LabkitValueError, match="is a file, not a folder"):
        folder(afile).inspect()
    with pytest.raises(LabkitValueError, match="is a file, not a folder"):
        folder(afile / "sub").inspect()
    with pytest.raises(LabkitValueError, match="special file"):
        folder(Path("/dev/null")).inspect()
    broken = tmp_path / "broken"
    broken.symlink_to(tmp_path / "missing")
    with pytest.raises(LabkitValueError, match="broken symbolic link"):
        folder(broken).inspect()
    assert afile.read_text() == "x"


def test_output_folder_through_a_link_the_user_gave_is_followed(tmp_path: Path) -> None:
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    folder(link).update(builder(V1))
    assert link.is_symlink() and (real / "index.html").read_text() == "v1 index"


def test_no_permission_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root ignores permission bits, so simulate what a normal user would meet.
    monkeypatch.setattr(output_folder.os, "access", lambda path, mode: False)
    with pytest.raises(LabkitValueError, match=f"no permission to write in {tmp_path}"):
        folder(tmp_path / "out").inspect()
    monkeypatch.undo()

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "out"))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(LabkitValueError, match="Cannot create .*out: Permission denied"):
        folder(tmp_path / "out").update(builder(V1))


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits; covered by test_no_permission_is_a_clear_error")
def test_read_only_parent_is_a_clear_error(tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        with pytest.raises(LabkitValueError, match="no permission"):
            folder(parent / "out").update(builder(V1))
    finally:
        parent.chmod(0o755)


def test_staging_left_by_a_killed_run_does_not_block_and_is_reported(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / ".labkit-staging-dead" / "new").mkdir(parents=True)  # a first run killed while building
    (out / ".labkit-staging-dead" / "new" / "index.html").write_text("half")
    report = folder(out).update(builder(V1))
    assert (out / "index.html").read_text() == "v1 index" and report.added == []
    assert report.leftovers == [".labkit-staging-dead"]
    assert any("interrupted run" in line and ".labkit-staging-dead" in line for line in report.lines())
    assert (out / ".labkit-staging-dead" / "new" / "index.html").read_text() == "half"


def test_a_folder_of_stale_files_is_removed_with_them(tmp_path: Path) -> None:
    out = tmp_path / "out"
    folder(out).update(builder({**V1, "more/sub/c.py": "c", "solutions/a.py": "a", "solutions/b.py": "b"}))
    report = folder(out).update(builder(V2))
    assert not (out / "solutions").exists() and not (out / "more").exists()
    assert report.removed == ["more/sub/c.py", "pages/old.html", "solutions/a.py", "solutions/b.py"]
