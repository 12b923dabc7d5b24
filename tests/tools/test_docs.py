"""labkit.tools.docs: the static site is built from stored outputs, offline, atomically."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from labkit.__main__ import main as cli
from labkit.core.errors import LabkitError, LabkitValueError
from labkit.tools import docs

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def write_notebook(path: Path, *, title: str, goals: list[str], executed: bool = True, link: str = "") -> None:
    intro = "\n".join([f"# {title}", "", "**Learning goals**", *[f"- {g}" for g in goals], "", "Text after the list.", link])
    cell = nbformat.v4.new_code_cell("print(6 * 7)")
    if executed:
        cell.execution_count = 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(intro), cell])
    nbformat.write(notebook, path)


@pytest.fixture
def two_notebooks(tmp_path: Path) -> Path:
    folder = tmp_path / "notebooks"
    folder.mkdir()
    write_notebook(folder / "00_intro.ipynb", title="00 · Intro", goals=["read `code`", "count"],
                   link="[next](01_more.ipynb#Top)")
    write_notebook(folder / "01_more.ipynb", title="01 · More", goals=["go further"])
    (folder / "scratch.ipynb").write_text("not a lab notebook, ignored")
    return folder


def test_describe_notebook_reads_title_and_goals(two_notebooks: Path) -> None:
    path = two_notebooks / "00_intro.ipynb"
    page = docs.describe_notebook(path, nbformat.read(path, as_version=4))
    assert page.title == "00 · Intro"
    assert page.goals_markdown == "- read `code`\n- count"
    assert page.html_name == "00_intro.html"


def test_site_has_index_with_learning_path_and_one_page_per_notebook(two_notebooks: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    pages = docs.build_site(two_notebooks, out)
    assert [p.html_name for p in pages] == ["00_intro.html", "01_more.html"]
    assert sorted(p.name for p in out.glob("*.html")) == ["00_intro.html", "01_more.html", "index.html"]
    index = (out / "index.html").read_text()
    assert index.index('href="00_intro.html"') < index.index('href="01_more.html"')
    assert "<code>code</code>" in index and "go further" in index
    intro = (out / "00_intro.html").read_text()
    assert "42" in intro  # stored outputs are shown
    assert 'href="01_more.html#Top"' in intro  # notebook links point to pages
    assert 'class="labkit-nav-next" href="01_more.html"' in intro


def test_real_notebook_page_embeds_widget_state_and_loads_no_remote_script(tmp_path: Path) -> None:
    out = tmp_path / "site"
    docs.build_site(NOTEBOOKS, out)
    page = (out / "00_start_here.html").read_text()
    assert 'type="application/vnd.jupyter.widget-state+json"' in page
    assert 'type="application/vnd.jupyter.widget-view+json"' in page
    sources = re.findall(r'<script[^>]*\ssrc="([^"]+)"', page)
    assert "_static/html-manager/embed.js" in sources
    assert all(not s.startswith(("http:", "https:", "//")) for s in sources), sources
    for source in sources:
        assert (out / source).is_file(), source


def test_never_run_notebook_is_refused_and_nothing_is_written(two_notebooks: Path, tmp_path: Path) -> None:
    write_notebook(two_notebooks / "02_raw.ipynb", title="02", goals=[], executed=False)
    out = tmp_path / "site"
    with pytest.raises(LabkitError, match="make notebooks"):
        docs.build_site(two_notebooks, out)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left


def test_rebuild_replaces_the_old_site_but_never_a_foreign_folder(two_notebooks: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    docs.build_site(two_notebooks, out)
    (two_notebooks / "01_more.ipynb").unlink()
    docs.build_site(two_notebooks, out)
    assert not (out / "01_more.html").exists()

    foreign = tmp_path / "my_stuff"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(LabkitValueError, match="not a labkit site"):
        docs.build_site(two_notebooks, foreign)
    assert [p.name for p in foreign.iterdir()] == ["keep.txt"]


def test_missing_or_empty_notebook_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LabkitValueError, match="not a folder"):
        docs.build_site(tmp_path / "nope", tmp_path / "site")
    with pytest.raises(LabkitValueError, match="No notebooks"):
        docs.build_site(tmp_path, tmp_path / "site")


def test_main_reports_errors_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["docs", str(tmp_path / "site"), "--notebooks", str(tmp_path / "nope")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_vendored_bundles_ship_with_their_licenses() -> None:
    for folder, bundle in [("html-manager", "embed.js"), ("mathjax", "tex-svg.js")]:
        assert (docs.VENDOR / folder / bundle).stat().st_size > 100_000
        assert "copyright" in (docs.VENDOR / folder / "LICENSE").read_text().lower()


def test_rebuild_keeps_files_added_to_the_site_and_says_so(
    two_notebooks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "site"
    docs.build_site(two_notebooks, out)
    (out / "custom.css").write_text("body { color: teal }")
    (out / "_static" / "extra.js").write_text("// mine")
    (out / "00_intro.html").write_text("<p>my hand-edited page</p>")
    capsys.readouterr()
    docs.build_site(two_notebooks, out)
    assert (out / "custom.css").read_text() == "body { color: teal }"
    assert (out / "_static" / "extra.js").read_text() == "// mine"
    assert (out / "00_intro.html").read_text() == "<p>my hand-edited page</p>"
    assert "42" in (out / "00_intro.labkit-new.html").read_text()
    printed = capsys.readouterr().out
    assert "kept 2 files you added: _static/extra.js, custom.css" in printed
    assert "00_intro.html (new version: 00_intro.labkit-new.html)" in printed


def test_failed_build_leaves_the_previous_site_as_it_was(
    two_notebooks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "site"
    docs.build_site(two_notebooks, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    real_render = docs._render

    def render_failing_on_second_page(*args, **kwargs) -> str:
        if kwargs["name"] == "01 · More":
            raise LabkitError("render failed")
        return real_render(*args, **kwargs)

    monkeypatch.setattr(docs, "_render", render_failing_on_second_page)
    with pytest.raises(LabkitError, match="render failed"):
        docs.build_site(two_notebooks, out)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_outdir_that_is_a_file_is_one_line_and_exit_2(
    two_notebooks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert cli(["docs", str(afile), "--notebooks", str(two_notebooks)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("docs: ") and "is a file, not a folder" in err and err.count("\n") == 1
    assert afile.read_text() == "mine"


def test_ctrl_c_is_one_line_exit_130_and_leaves_the_site(
    two_notebooks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "site"
    docs.build_site(two_notebooks, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def interrupted(*args, **kwargs) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(docs, "_render", interrupted)
    capsys.readouterr()
    assert cli(["docs", str(out), "--notebooks", str(two_notebooks)]) == 130
    err = capsys.readouterr().err
    assert err.startswith("docs: interrupted") and err.count("\n") == 1
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
