"""labkit.authoring.docs: the Sphinx site is built from stored outputs, with -W, and moved in without losing the user's files.

A Sphinx build of even two small notebooks takes seconds (the API page imports labkit
and torch), so one site is built per module and copied by the tests that need an old
site; only the tests of a rebuild build again.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from labkit.__main__ import main as cli
from labkit.authoring import docs
from labkit.core.errors import LabkitError, LabkitValueError

pytestmark = [pytest.mark.slow, pytest.mark.torch_free]  # torch_free: no torch op; the torch-floor job leaves it out


def write_notebook(path: Path, *, title: str, goals: list[str], executed: bool = True, link: str = "") -> None:
    intro = "\n".join([f"# {title}", "", "**Learning goals**", *[f"- {g}" for g in goals], "", "Text after the list.", link])
    cell = nbformat.v4.new_code_cell("print(6 * 7)")
    timing = nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\n# a timing: not the same twice\nprint(0.25)")
    if executed:
        cell.execution_count, timing.execution_count = 1, 2
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
        timing.outputs = [nbformat.v4.new_output("stream", name="stdout", text="0.25\n")]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(intro), cell, timing])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    nbformat.write(notebook, path)


def make_two_notebooks(folder: Path) -> Path:
    folder.mkdir()
    write_notebook(folder / "00_intro.ipynb", title="00 · Intro", goals=["read `code`", "count"],
                   link="[next](01_more.ipynb)")
    write_notebook(folder / "01_more.ipynb", title="01 · More", goals=["go further"])
    more = nbformat.read(folder / "01_more.ipynb", as_version=4)
    more.metadata["labkit"] = {"run_seconds": 12.3, "cpu_count": 4}  # what make notebooks records
    nbformat.write(more, folder / "01_more.ipynb")
    (folder / "scratch.ipynb").write_text("not a lab notebook, ignored")
    return folder


@pytest.fixture
def two_notebooks(tmp_path: Path) -> Path:
    return make_two_notebooks(tmp_path / "notebooks")


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of the two notebooks, built once; copy it before changing it."""
    folder = tmp_path_factory.mktemp("docs")
    out = folder / "site"
    docs.build_site(make_two_notebooks(folder / "notebooks"), out)
    return out


def copy_of(site: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    return copy


def files_in(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_describe_notebook_reads_title_and_goals(two_notebooks: Path) -> None:
    path = two_notebooks / "00_intro.ipynb"
    page = docs.describe_notebook(path, nbformat.read(path, as_version=4))
    assert page.title == "00 · Intro"
    assert page.goals_markdown == "- read `code`\n- count"


def test_site_has_the_learning_path_a_page_per_notebook_and_the_api(built_site: Path) -> None:
    assert sorted(p.name for p in (built_site / "notebooks").glob("*.html")) == ["00_intro.html", "01_more.html"]
    assert (built_site / "api.html").is_file() and (built_site / "running.html").is_file()
    # what the README hands on to the site: installing (size, the CPU-only route), a workshop, the maintainers' figures
    install = (built_site / "install.html").read_text()
    assert "https://download.pytorch.org/whl/cpu" in install and "torch-labkit" in install
    assert "In a provisioning script" in (built_site / "instructors.html").read_text()  # doctor --json
    assert all(figure in (built_site / "maintainers.html").read_text() for figure in ("P1", "P6", "P7"))
    assert (built_site / "searchindex.js").is_file()
    index = (built_site / "index.html").read_text()
    path = index[index.index("labkit-learning-path"):]
    assert path.index('href="notebooks/00_intro.html"') < path.index('href="notebooks/01_more.html"')
    assert "<code" in path and "go further" in path  # the goals, Markdown rendered
    assert "ran in 12 s on a 4-core machine" in path  # the measured run time, from the notebook's metadata
    intro = (built_site / "notebooks" / "00_intro.html").read_text()
    assert "42" in intro  # the stored output is shown
    assert 'href="01_more.html"' in intro  # a link to a notebook points to its page
    assert (built_site / "_sources" / "notebooks" / "00_intro.ipynb").is_file()  # what the download button offers
    assert "profile_model" in (built_site / "api.html").read_text()


def test_a_page_shows_no_nbval_marker_and_keeps_the_comment_under_it(built_site: Path) -> None:
    """``# NBVAL_IGNORE_OUTPUT`` tells the test what to compare; a reader of the page has no use for it."""
    for page in (built_site / "notebooks").glob("*.html"):
        text = page.read_text()
        assert "NBVAL" not in text and "a timing: not the same twice" in text and "0.25" in text, page.name
    downloaded = (built_site / "_sources" / "notebooks" / "00_intro.ipynb").read_text()
    assert "NBVAL" not in downloaded and "a timing: not the same twice" in downloaded


def test_no_sidebar_holds_a_second_search_box_and_every_page_loads_the_snippet_fix(built_site: Path) -> None:
    """The theme's sidebar field and its header button were two search boxes on one page: the header's stays.

    (tests/ui/test_docs_ui.py counts the visible ones in Chromium.)
    """
    for page in [built_site / "index.html", *(built_site / "notebooks").glob("*.html")]:
        text = page.read_text()
        sidebar = text[text.index('class="bd-sidebar-primary'):text.index('class="bd-main"')]
        assert "search-button" not in sidebar and "search-button__button" in text, page.name
        assert "search-snippets.js" in text, page.name
    assert (built_site / "_static" / "search-snippets.js").is_file()


def test_no_page_loads_a_script_or_style_from_the_network(built_site: Path) -> None:
    for page in built_site.rglob("*.html"):
        text = page.read_text()
        sources = re.findall(r'<(?:script|link)[^>]*\s(?:src|href)="([^"]+)"', text)
        remote = [s for s in sources if s.startswith(("http:", "https:", "//"))]
        assert remote == [], f"{page.name} loads {remote}"


def test_rebuild_keeps_what_the_user_added_or_changed_and_drops_removed_pages(
    built_site: Path, two_notebooks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_of(built_site, tmp_path)
    (out / "custom.css").write_text("body { color: teal }")
    (out / "_static" / "extra.js").write_text("// mine")
    (out / "notebooks" / "00_intro.html").write_text("<p>my hand-edited page</p>")
    (two_notebooks / "01_more.ipynb").unlink()
    (two_notebooks / "00_intro.ipynb").write_text(
        (two_notebooks / "00_intro.ipynb").read_text().replace("[next](01_more.ipynb)", "")
    )
    capsys.readouterr()
    docs.build_site(two_notebooks, out)
    assert (out / "custom.css").read_text() == "body { color: teal }"
    assert (out / "_static" / "extra.js").read_text() == "// mine"
    assert (out / "notebooks" / "00_intro.html").read_text() == "<p>my hand-edited page</p>"
    assert "42" in (out / "notebooks" / "00_intro.labkit-new.html").read_text()
    assert not (out / "notebooks" / "01_more.html").exists()
    printed = capsys.readouterr().out
    assert "kept 2 files you added: _static/extra.js, custom.css" in printed
    assert "notebooks/00_intro.html (new version: notebooks/00_intro.labkit-new.html)" in printed


def test_a_sphinx_warning_fails_the_build_and_leaves_the_previous_site(
    built_site: Path, two_notebooks: Path, tmp_path: Path
) -> None:
    out = copy_of(built_site, tmp_path)
    before = files_in(out)
    write_notebook(two_notebooks / "01_more.ipynb", title="01 · More", goals=[], link="![a figure](missing.png)")
    with pytest.raises(LabkitError, match=r"(?s)sphinx-build failed.*missing\.png"):
        docs.build_site(two_notebooks, out)
    assert files_in(out) == before


def test_never_run_notebook_is_refused_and_nothing_is_written(two_notebooks: Path, tmp_path: Path) -> None:
    write_notebook(two_notebooks / "02_raw.ipynb", title="02", goals=[], executed=False)
    out = tmp_path / "site"
    with pytest.raises(LabkitError, match="make notebooks"):
        docs.build_site(two_notebooks, out)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left


def test_foreign_folder_is_never_written_to(two_notebooks: Path, tmp_path: Path) -> None:
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


def test_missing_sphinx_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = docs.importlib.util.find_spec
    monkeypatch.setattr(docs.importlib.util, "find_spec", lambda name: None if name == "myst_nb" else real_find_spec(name))
    with pytest.raises(LabkitError, match=r"myst_nb.*pip install -e '\.\[docs\]'"):
        docs.require_sphinx()


def test_main_reports_errors_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["docs", str(tmp_path / "site"), "--notebooks", str(tmp_path / "nope")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_vendored_bundles_ship_with_their_licenses() -> None:
    vendor = docs.DOCS_SOURCE / "_static" / "vendor"
    for folder, bundle in [("html-manager", "embed.js"), ("mathjax", "tex-svg.js")]:
        assert (vendor / folder / bundle).stat().st_size > 100_000
        assert "copyright" in (vendor / folder / "LICENSE").read_text().lower()


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
    built_site: Path, two_notebooks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_of(built_site, tmp_path)
    before = files_in(out)

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(docs, "run_sphinx", interrupted)
    capsys.readouterr()
    assert cli(["docs", str(out), "--notebooks", str(two_notebooks)]) == 130
    err = capsys.readouterr().err
    assert err.startswith("docs: interrupted") and err.count("\n") == 1
    assert files_in(out) == before


def test_no_module_of_labkit_writes_the_sites_html() -> None:
    """Sphinx builds the site from docs/; the hand-made nbconvert builder and its template stay gone."""
    package = Path(docs.__file__).resolve().parents[1]
    assert not (package / "_templates").exists()
    exporters = [p.name for p in package.rglob("*.py") if "HTMLExporter" in p.read_text() or "import nbconvert" in p.read_text()]
    assert exporters == []
