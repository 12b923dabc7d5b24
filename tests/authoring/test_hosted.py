"""labkit.authoring.hosted: each notebook's install lines (for Colab) and every "Open in Colab" link, from one setting.

Colab itself cannot run here: the install lines run in a Python without labkit,
with a stand-in pip that records what it was asked and "installs" a small
labkit, and with torch and torchvision as bare package metadata. A notebook
running alone with labkit from its wheel is tests/authoring/test_wheel.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest
from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from labkit.__main__ import main
from labkit.authoring import hosted
from labkit.core.errors import LabkitValueError
from labkit.labs import DISTRIBUTION, NOTEBOOKS_DIR, find_notebooks

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "https://github.com/someone/labkit"  # a configured repository (labkit's own is not public yet)
SETUP = "import labkit\n\ndevice = labkit.setup_notebook()"
FAKE_PIP = '''\
import json, pathlib, sys
site = pathlib.Path(__file__).resolve().parents[1]
(site / "pip-argv.json").write_text(json.dumps(sys.argv[1:]))
(site / "labkit").mkdir()
(site / "labkit" / "__init__.py").write_text("def setup_notebook():\\n    print('stand-in labkit ready')\\n")
'''


def hosted_python(tmp_path: Path, dists: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """A folder for PYTHONPATH holding the stand-in pip and the metadata of ``dists`` (name -> version), and the env."""
    site = tmp_path / "site"
    (site / "pip").mkdir(parents=True)
    (site / "pip" / "__init__.py").write_text("")
    (site / "pip" / "__main__.py").write_text(FAKE_PIP)
    for dist, version in dists.items():
        info = site / f"{dist}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    return site, {**os.environ, "PYTHONPATH": str(site)}


def run_first_cell(tmp_path: Path, dists: dict[str, str]) -> tuple[list[str], list[str] | None]:
    """Run a first cell in a Python that has no labkit (``-S``: no site-packages); its printed lines and pip's arguments."""
    site, env = hosted_python(tmp_path, dists)
    code = hosted.with_install_block(SETUP)
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    argv = site / "pip-argv.json"
    return done.stdout.splitlines(), json.loads(argv.read_text()) if argv.exists() else None


def test_where_labkit_is_installed_the_install_lines_print_nothing_and_run_no_pip(tmp_path: Path) -> None:
    site, env = hosted_python(tmp_path, {"torch": "2.5.1"})
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])  # labkit importable, as wherever it is installed
    done = subprocess.run([sys.executable, "-c", hosted.install_block()], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not (site / "pip-argv.json").exists()


@pytest.mark.parametrize("repository", [None, REPOSITORY])
def test_where_labkit_is_missing_they_install_it_keeping_the_platforms_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repository: str | None
) -> None:
    monkeypatch.setattr(hosted, "REPOSITORY_URL", repository)
    lines, argv = run_first_cell(tmp_path, {"torch": "2.5.1+cu121", "torchvision": "0.20.1+cu121"})
    requirement = DISTRIBUTION if repository is None else f"torch-labkit @ git+{REPOSITORY}"
    assert argv == ["install", "--quiet", requirement, "torch==2.5.1+cu121", "torchvision==0.20.1+cu121"]
    assert lines == [
        "keeping torch 2.5.1+cu121",
        "keeping torchvision 0.20.1+cu121",
        f"installing labkit: pip install '{requirement}' 'torch==2.5.1+cu121' 'torchvision==0.20.1+cu121'",
        "labkit installed. If a widget then shows an error, restart the session and run the notebook again.",
        "stand-in labkit ready",  # the rest of the cell imports what pip installed, in the same process
    ]


def test_a_newer_torch_is_kept_and_called_untested_an_older_or_missing_one_is_left_to_pip(tmp_path: Path) -> None:
    lines, argv = run_first_cell(tmp_path / "newer", {"torch": "2.99.0", "torchvision": "0.29.3"})
    assert argv is not None and argv[3:] == ["torch==2.99.0", "torchvision==0.29.3"]
    assert lines[:2] == ["keeping torch 2.99.0 (newer than labkit's tested 2.14.1: untested)", "keeping torchvision 0.29.3"]
    lines, argv = run_first_cell(tmp_path / "older", {"torch": "2.3.1"})
    assert argv == ["install", "--quiet", "torch-labkit"]
    assert lines[:2] == ["torch 2.3.1 is older than labkit's tested 2.4.1 to 2.14.1: pip installs a newer one",
                         "no torchvision here: pip installs one (a large download)"]


def test_the_install_lines_name_the_tested_range_and_the_repository_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit.learner.doctor import TESTED_RANGE

    monkeypatch.setattr(hosted, "REPOSITORY_URL", REPOSITORY)
    block = hosted.install_block()
    assert block.count(REPOSITORY) == 1 and block.splitlines()[0].startswith("# Where labkit is missing")
    for dist, (oldest, newest) in TESTED_RANGE.items():
        assert f"('{dist}', '{oldest}', '{newest}')" in block


# --- every notebook and the README hold the current version ------------------------------------------


def test_every_notebook_starts_with_the_current_install_lines_and_the_readme_holds_the_current_links() -> None:
    labs = find_notebooks(NOTEBOOKS_DIR)
    stale = [path.name for path in [*labs, hosted.README] if hosted.planned_text(path, [p.name for p in labs]) is not None]
    assert not stale, f"{stale} hold older install lines or links: run `python -m labkit hosted --write`, then re-execute them"


def test_with_a_repository_the_readme_links_every_notebook_in_colab_and_binder_and_pip_installs_from_it(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosted, "REPOSITORY_URL", REPOSITORY)
    names = [path.name for path in find_notebooks(NOTEBOOKS_DIR)]
    block = hosted.readme_block(names)
    for name in names:
        assert f"[Open in Colab](https://colab.research.google.com/github/someone/labkit/blob/main/notebooks/{name})" in block
    assert "(https://mybinder.org/v2/gh/someone/labkit/HEAD?urlpath=lab/tree/workspace/00_start_here.ipynb)" in block
    assert f'pip install "torch-labkit @ git+{REPOSITORY}"' in block and hosted.UNCONFIGURED not in block
    assert hosted.repository_link("notebooks/solutions") == f"<{REPOSITORY}/tree/main/notebooks/solutions>"


def test_without_a_repository_nothing_links_to_one_and_the_readme_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hosted, "REPOSITORY_URL", None)
    block = hosted.readme_block(["00_a.ipynb"])
    assert "pip install torch-labkit\n" in block and hosted.UNCONFIGURED in block and "http" not in block
    assert hosted.colab_url("00_a.ipynb") is None and hosted.binder_url() is None
    assert hosted.repository_link("notebooks/solutions") == "`notebooks/solutions/`"
    assert "git+" not in hosted.install_block() and 'requirements = ["torch-labkit", *keep]' in hosted.install_block()


def lab_notebooks(tmp_path: Path) -> list[Path]:
    """Two notebooks whose first code cell sets up labkit, one of them with older install lines."""
    paths = []
    for name, first in (("00_a.ipynb", SETUP), ("01_b.ipynb", "# older install lines\nimport os\n" + SETUP)):
        cells = [nbformat.v4.new_markdown_cell("# 00 · A\n\n**Learning goals**\n\n- one"), nbformat.v4.new_code_cell(first)]
        nbformat.write(nbformat.v4.new_notebook(cells=cells), tmp_path / name)
        paths.append(tmp_path / name)
    return paths


def test_write_puts_the_lines_above_import_labkit_replacing_older_ones_and_check_then_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = lab_notebooks(tmp_path)
    assert main(["hosted", *map(str, paths)]) == 1
    assert capsys.readouterr().out.count("out of date") == 2
    assert main(["hosted", "--write", *map(str, paths)]) == 0
    for path in paths:
        first = nbformat.read(path, as_version=4).cells[1].source
        assert first == hosted.install_block() + SETUP
    written = [path.read_bytes() for path in paths]
    assert main(["hosted", *map(str, paths)]) == 0 and main(["hosted", "--write", *map(str, paths)]) == 0
    assert [path.read_bytes() for path in paths] == written
    assert "hold the current install lines" in capsys.readouterr().out


def test_a_notebook_without_a_place_for_the_lines_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, _ = lab_notebooks(tmp_path)
    bad = tmp_path / "02_c.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch")]), bad)
    before = good.read_bytes()
    assert main(["hosted", "--write", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: its first code cell has no line 'import labkit'" in err and "Traceback" not in err
    assert good.read_bytes() == before


def test_the_readme_block_is_replaced_between_its_markers_and_a_readme_without_them_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# Intro\n\n{hosted.README_START}\nold links\n{hosted.README_END}\n\n## After\n")
    text = hosted.planned_text(readme, ["00_a.ipynb"])
    assert text == f"# Intro\n\n{hosted.readme_block(['00_a.ipynb'])}\n\n## After\n"
    readme.write_text(text)
    assert hosted.planned_text(readme, ["00_a.ipynb"]) is None
    readme.write_text("# no block\n")
    with pytest.raises(LabkitValueError, match=f"{readme}: it has no block"):
        hosted.planned_text(readme, ["00_a.ipynb"])


def test_colab_and_binder_links_need_a_github_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hosted, "REPOSITORY_URL", "https://github.com/someone/labkit")
    assert hosted.colab_url("02_memory_format.ipynb") == (
        "https://colab.research.google.com/github/someone/labkit/blob/main/notebooks/02_memory_format.ipynb"
    )
    monkeypatch.setattr(hosted, "REPOSITORY_URL", "https://gitlab.com/someone/labkit")
    with pytest.raises(LabkitValueError, match="Colab and Binder open notebooks from GitHub"):
        hosted.colab_url("02_memory_format.ipynb")
    with pytest.raises(LabkitValueError, match="Colab and Binder open notebooks from GitHub"):
        hosted.binder_url()


# --- the docs site's link (docs/_ext/labkit_hosted.py) ------------------------------------------------


def page(docname: str) -> tuple[types.SimpleNamespace, nodes.document]:
    """A parsed page with a title, and a stand-in for the Sphinx app reading it."""
    document = new_document(docname, get_default_settings(Parser))
    Parser().parse("Title\n=====\n\nText.\n", document)
    return types.SimpleNamespace(env=types.SimpleNamespace(docname=docname)), document


def test_the_docs_site_links_each_notebook_page_to_colab_below_its_title(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "docs" / "_ext"))
    import labkit_hosted

    monkeypatch.setattr(hosted, "REPOSITORY_URL", None)  # no repository: no link
    app, document = page("notebooks/02_memory_format")
    labkit_hosted.add_colab_link(app, document)  # type: ignore[arg-type]
    assert not [p for p in document.findall(nodes.paragraph) if labkit_hosted.LINK_CLASS in p["classes"]]
    monkeypatch.setattr(hosted, "REPOSITORY_URL", REPOSITORY)
    app, document = page("notebooks/02_memory_format")
    labkit_hosted.add_colab_link(app, document)  # type: ignore[arg-type]
    section = next(iter(document.findall(nodes.section)))
    link = section[1]
    assert isinstance(section[0], nodes.title) and labkit_hosted.LINK_CLASS in link["classes"]
    [reference] = link.findall(nodes.reference)
    assert reference["refuri"] == hosted.colab_url("02_memory_format.ipynb") and reference.astext() == labkit_hosted.LINK_TEXT
    for other in ("index", "running", "api/core"):
        app, document = page(other)
        labkit_hosted.add_colab_link(app, document)  # type: ignore[arg-type]
        assert not [p for p in document.findall(nodes.paragraph) if labkit_hosted.LINK_CLASS in p["classes"]]
