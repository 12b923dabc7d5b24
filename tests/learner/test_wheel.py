"""The labs travel with the package: labkit's wheel, installed into a fresh venv outside the checkout, serves them.

The sdist and the wheel are built as ``make dist`` builds them (``python -m build``: the wheel from the sdist), from
a copy of the checkout, so that nothing is written into the checkout, and without build isolation: the build's own
requirements are this venv's, and nothing is downloaded.

How the fresh venv reuses this venv's torch instead of downloading it again:
``python -m venv --without-pip`` (venv makes it from the base interpreter, even when run
from a venv, so ``--system-site-packages`` would not see this venv's packages), plus a
``.pth`` file in its site-packages naming this interpreter's site-packages. Python then
puts that folder on ``sys.path`` but does not process the ``.pth`` files inside it, so
this checkout's editable labkit stays out: ``import labkit`` finds the wheel's only (a
test says so). Two things pip would also have put in a fresh venv, which a ``.pth``
cannot give, are given here as pip would have: the ``jupyter-lab`` command (a console
script of this venv's JupyterLab, with the fresh venv's Python), and the data files
under ``share/jupyter`` (the widgets extension, JupyterLab's application folder), through
``JUPYTER_PATH``. Every command runs from a folder outside the checkout, with ``HOME``
and ``TMPDIR`` under the test's own folder.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tarfile
import time
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
import tomllib
from packaging.requirements import Requirement

import labkit
from labkit.authoring import hosted
from labkit.i18n.messages import LANGUAGES
from labkit.labs import find_notebooks
from labkit.learner import workspace
from labkit.learner.edition import RECORD
from labkit.learner.tracks import TRACKS
from tests.learner.test_workspace import assert_no_solution_code, real_solutions

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SOURCE_FILES = ("pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "CHANGELOG.md", "environment.yml")
SECONDS = 600  # a notebook on two busy cores, or pip
PACKAGED = f"labkit/{workspace.PACKAGED_LABS.name}"

# Runs in the fresh venv: execute a notebook as nbclient (make notebooks) does, from its own folder, and say which
# labkit the kernel imported.
RUN_NOTEBOOK = '''\
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

source, executed = Path(sys.argv[1]), Path(sys.argv[2])
notebook = nbformat.read(source, as_version=4)
NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(source.parent)}}).execute()
nbformat.write(notebook, executed)
probe = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import labkit\\nprint(labkit.__file__)")])
NotebookClient(probe, timeout=600, kernel_name="python3").execute()
print(probe.cells[0].outputs[0].text.strip())
'''
JUPYTER_LAB_SCRIPT = '''\
#!{python}
import sys
from jupyterlab.labapp import main
sys.exit(main())
'''


def run(command: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``command`` to its end; its output, or a failure that shows it."""
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=SECONDS)
    assert done.returncode == 0, f"{command} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


def unmet_build_requirements() -> list[str]:
    """The requirements of [build-system] this environment does not meet (a build without isolation uses its own)."""
    unmet = []
    for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]:
        requirement = Requirement(line)
        try:
            if metadata.version(requirement.name) in requirement.specifier:
                continue
        except metadata.PackageNotFoundError:
            pass
        unmet.append(line)
    return unmet


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist, built from a copy of the checkout, and the wheel pip builds from that sdist."""
    if unmet := unmet_build_requirements():  # e.g. the torch-floor venv's setuptools, from its ensurepip
        pytest.skip(f"this environment lacks the build's {unmet}: the wheel is built and tested by make test")
    folder = tmp_path_factory.mktemp("build")
    source = folder / "source"
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.pyc")
    shutil.copytree(ROOT / "labkit", source / "labkit", ignore=ignore)
    shutil.copytree(NOTEBOOKS, source / "notebooks", ignore=ignore)
    # as in a checkout: the sdist must leave it out
    shutil.copytree(ROOT / "tests", source / "tests", ignore=shutil.ignore_patterns("__pycache__", "node_modules", "*.pyc"))
    for name in SOURCE_FILES:
        shutil.copy2(ROOT / name, source / name)
    env = {**os.environ, "TMPDIR": str(folder), "HOME": str(folder / "home")}
    (folder / "tmp").mkdir()
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", folder / "dist", source], folder, env)  # make dist
    [sdist] = (folder / "dist").glob("torch_labkit-*.tar.gz")
    [wheel] = (folder / "dist").glob("torch_labkit-*.whl")  # the distribution's name (labkit's is taken on PyPI)
    return sdist, wheel


def test_make_dist_builds_the_sdist_and_the_wheel_as_the_fixture_does():
    """README's way to a wheel until labkit is published: ``make dist`` runs ``python -m build`` (sdist, then the
    wheel from it), as :func:`built` does."""
    done = subprocess.run(["make", "-n", "-o", ".venv/.labkit-installed", "dist", "PY=python"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # -o: print it, the venv taken as made
    assert done.returncode == 0, done.stderr
    assert "python -m build --outdir dist" in done.stdout
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make dist" in readme and "pip install dist/torch_labkit-*.whl" in readme


@pytest.fixture(scope="module")
def venv(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh venv outside the checkout with labkit installed from the wheel (see the module's docstring); and its env."""
    folder = tmp_path_factory.mktemp("fresh")
    venv = folder / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], folder)
    python = venv / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], folder).strip())
    (site / "labkit-test-reuses-torch.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env = {
        "HOME": str(folder / "home"), "TMPDIR": str(folder), "LABKIT_PROGRESS": "off",
        "PATH": os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"]),
        "JUPYTER_PATH": str(Path(sys.prefix) / "share" / "jupyter"),
    }
    run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--ignore-installed",
         "--no-cache-dir", built[1]], folder, {**os.environ, **env})
    (venv / "bin" / "jupyter-lab").write_text(JUPYTER_LAB_SCRIPT.format(python=python))
    (venv / "bin" / "jupyter-lab").chmod(0o755)
    (folder / "elsewhere").mkdir()
    return venv, env


def elsewhere(venv: Path) -> Path:
    """The folder every command runs in: outside the checkout, next to the venv."""
    return venv.parent / "elsewhere"


def executed(venv: Path, env: dict[str, str], notebook: Path) -> tuple[nbformat.NotebookNode, str]:
    """``notebook`` run top to bottom in the fresh venv, and the file of the labkit its kernel imported."""
    script = venv.parent / "run_notebook.py"
    script.write_text(RUN_NOTEBOOK)
    out = venv.parent / f"executed-{notebook.name}"
    imported = run([venv / "bin" / "python", script, notebook, out], elsewhere(venv), env).strip().splitlines()[-1]
    return nbformat.read(out, as_version=4), imported


def outputs_text(notebook: nbformat.NotebookNode) -> list[str]:
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output.output_type != "error", f"{output.get('ename')}: {output.get('evalue')} in {cell.source[:80]!r}"
            assert output.get("name") != "stderr", f"stderr in {cell.source[:80]!r}: {output.text[:300]!r}"
            texts.append(output.get("text", "") + str(output.get("data", {}).get("text/plain", "")))
    return texts


def test_the_sdist_holds_the_solved_labs_and_the_wheel_only_the_learner_edition(built: tuple[Path, Path]) -> None:
    sdist, wheel = built
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    labs = find_notebooks(NOTEBOOKS)
    assert {f"notebooks/{path.name}" for path in labs} <= in_sdist
    assert {f"notebooks/{lang}/{path.name}" for path in labs for lang in ("zh", "ru")} <= in_sdist  # the translations
    assert {f"notebooks/solutions/{name.removeprefix('solutions/')}" for name in real_solutions()} <= in_sdist
    assert {"CHANGELOG.md", "environment.yml", "LICENSE", "README.md"} <= in_sdist
    assert not [name for name in in_sdist if name.startswith("tests/")], "a partial tests/ that cannot run from the sdist"
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
        files = {name: archive.read(name).decode() for name in in_wheel if name.startswith(PACKAGED + "/")}
    # no solutions folder and no solution file (notebooks/solutions/02_1_<slug>.py); labkit.progress.solutions is code
    solution_files = [name for name in in_wheel if "/solutions/" in f"/{name}" or re.search(r"(^|/)\d\d_\d+_\w+\.py$", name)]
    assert not solution_files and not [name for name in in_wheel if name.startswith("notebooks/")], solution_files
    solutions = real_solutions()
    for lang in LANGUAGES:  # every language's learner edition, both tracks
        for track in TRACKS:
            edition = f"{PACKAGED}/{lang}/{track}/"
            names = {name.removeprefix(edition) for name in files if name.startswith(edition)}
            assert names == {path.name for path in labs} | {"README.md", RECORD}, edition
            for path in labs:
                notebook = nbformat.reads(files[edition + path.name], as_version=4)
                assert_no_solution_code(path.name, notebook, solutions)
                source = nbformat.read(NOTEBOOKS / (lang if lang != "en" else "") / path.name, as_version=4)
                assert notebook.cells[0].source.splitlines()[0] == source.cells[0].source.splitlines()[0], edition + path.name
    data = {path.relative_to(ROOT).as_posix() for path in (ROOT / "labkit").rglob("*")
            if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts}
    assert data - in_wheel == set(), "data files of the labkit package missing from the wheel: add them to package-data"


def test_the_installed_labkit_is_the_wheels_and_says_its_version_and_the_doctor_says_ready(
    venv: tuple[Path, dict[str, str]]
) -> None:
    folder, env = venv
    here = elsewhere(folder)
    imported = run([folder / "bin" / "python", "-c", "import labkit; print(labkit.__file__)"], here, env).strip()
    assert Path(imported).is_relative_to(folder)
    assert run([folder / "bin" / "labkit", "--version"], here, env) == f"labkit {labkit.__version__}\n"
    assert run([folder / "bin" / "python", "-m", "labkit", "--version"], here, env) == f"labkit {labkit.__version__}\n"
    shown = run([folder / "bin" / "labkit", "--help"], here, env)  # named as typed, the learner's commands first
    assert shown.startswith("usage: labkit [-h] [--version] COMMAND ...\n") and "\nlearning with the labs:\n  lab " in shown
    in_chinese = run([folder / "bin" / "labkit", "--help"], here, {**env, "LABKIT_LANG": "zh"})  # the wheel's catalogues
    assert in_chinese.startswith("用法：labkit ") and "用这些实验学习" in in_chinese
    report = run([folder / "bin" / "labkit", "doctor"], here, env)
    assert report.rstrip().splitlines()[-1].startswith("doctor: READY"), report
    as_json = json.loads(run([folder / "bin" / "labkit", "doctor", "--json"], here, env))
    assert as_json["ready"] is True and as_json["problems"] == [] and as_json["verdict"].startswith("doctor: READY")


@pytest.mark.parametrize("command", [["docs", "site"], ["student-copy", "student"], ["hosted"]])
def test_the_authors_commands_say_they_need_a_checkout(venv: tuple[Path, dict[str, str]], command: list[str]) -> None:
    folder, env = venv
    done = subprocess.run([str(folder / "bin" / "labkit"), *command], cwd=elsewhere(folder), env=env, capture_output=True,
                          text=True, timeout=SECONDS)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.startswith(f"{command[0]}: `labkit {command[0]}` works in a checkout of labkit's repository (")
    assert "Traceback" not in done.stderr and "-e '.[docs]'" not in done.stderr
    assert not (elsewhere(folder) / command[-1]).exists()


def test_labkit_workspace_gives_what_make_lab_gives_and_a_notebook_runs_there_with_stubs_not_yet_solved(
    venv: tuple[Path, dict[str, str]]
) -> None:
    folder, env = venv
    here = elsewhere(folder)
    out = run([folder / "bin" / "labkit", "workspace", "ws"], here, env)
    assert out.startswith("workspace: created ws: 5 notebooks with blank exercises")
    run([folder / "bin" / "labkit", "workspace", "core-ws", "--track", "core"], here, env)
    run([folder / "bin" / "labkit", "workspace", "zh-ws", "--track", "core", "--lang", "zh"], here, env)
    for name, track, lang in (("ws", "all", "en"), ("core-ws", "core", "en"), ("zh-ws", "core", "zh")):
        labs = workspace.language_labs(NOTEBOOKS, lang)
        in_checkout = workspace.learner_edition(labs, here / name, track, language=lang)  # what make lab writes
        for path in find_notebooks(NOTEBOOKS):
            assert (here / name / path.name).read_text(encoding="utf-8") == in_checkout[path.name], (name, path.name)
        readme = (here / name / "README.md").read_text(encoding="utf-8")
        assert hosted.repository_link("notebooks/solutions") in readme and "../" not in readme
        assert json.loads((here / name / ".labkit-manifest.json").read_text())["language"] == lang
    notebook, imported = executed(folder, env, here / "ws" / "02_memory_format.ipynb")
    assert Path(imported).is_relative_to(folder), "the kernel must import the wheel's labkit"
    verdicts = [text for text in outputs_text(notebook) if "Exercise 2." in text]
    assert len(verdicts) == 3 and all("not yet solved" in text for text in verdicts), verdicts


def test_labkit_lab_serves_the_workspace_from_the_installed_package(venv: tuple[Path, dict[str, str]]) -> None:
    folder, env = venv
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = secrets.token_hex(8)
    process = subprocess.Popen(
        [str(folder / "bin" / "labkit"), "lab", "lab-ws", f"--port={port}",
         f"--lab-args=--IdentityProvider.token={token} --ServerApp.port_retries=0"],
        cwd=elsewhere(folder), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + SECONDS
        while True:
            try:
                url = f"http://127.0.0.1:{port}/api/contents/00_start_here.ipynb?token={token}&content=0"
                with urllib.request.urlopen(url, timeout=10) as response:
                    listing = json.loads(response.read())
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"labkit lab did not serve the workspace:\n{process.stdout.read() if process.stdout else ''}")
                time.sleep(1)
        assert listing["name"] == "00_start_here.ipynb"
        assert (elsewhere(folder) / "lab-ws" / ".labkit-manifest.json").is_file()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_a_solved_notebook_copied_alone_into_an_empty_folder_runs_top_to_bottom(
    venv: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """What Colab does with a notebook opened from the repository, labkit installed (the install lines do nothing)."""
    folder, env = venv
    alone = tmp_path / "alone" / "03_forward_ad.ipynb"
    alone.parent.mkdir()
    shutil.copy2(NOTEBOOKS / alone.name, alone)
    current = hosted.planned_text(alone, [])  # its first cell as `python -m labkit hosted --write` leaves it
    if current is not None:
        alone.write_text(current, encoding="utf-8")
    notebook, imported = executed(folder, env, alone)
    assert Path(imported).is_relative_to(folder)
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    assert first.source.startswith(hosted.install_block())
    [ready] = [output.text for output in first.outputs]  # the setup's one line, and nothing from the install lines
    assert ready.startswith("labkit ready: seed 0, device type ")
    verdicts = [text for text in outputs_text(notebook) if "Exercise 3." in text]
    assert len(verdicts) == 4 and all(re.search(r"Exercise 3\.\d: solved\.", text) for text in verdicts), verdicts
    assert sorted(path.name for path in alone.parent.iterdir()) == [alone.name]
