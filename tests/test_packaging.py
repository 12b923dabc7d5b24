"""Packaging invariants: one source of truth, and a cheap headless import."""
import ast
import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)

ROOT = Path(__file__).resolve().parents[1]


def _normalized(requirements):
    return {(Requirement(r).name.lower().replace("_", "-"), str(Requirement(r).specifier)) for r in requirements}


def test_environment_yml_lists_the_same_dependencies_as_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    declared = [line for line in pip_section if not line.startswith("-")]  # pip's options: -e ., --extra-index-url
    assert _normalized(declared) == _normalized(pyproject["project"]["dependencies"])
    assert "-e ." in pip_section, "environment.yml must install labkit itself from the checkout"
    # the labs run on a CPU: the environment takes torch's CPU build, not PyPI's CUDA one (3.2 GB of CUDA libraries)
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in pip_section


def test_the_distribution_is_torch_labkit_wherever_a_user_types_its_name():
    """`labkit` on PyPI is an unrelated package: `pip install labkit` or `labkit[hf]` would install that one."""
    from labkit.labs import DISTRIBUTION

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == DISTRIBUTION == "torch-labkit"
    assert pyproject["project"]["scripts"] == {"labkit": "labkit.__main__:main"}  # the command keeps its name
    assert metadata.version(DISTRIBUTION) == __import__("labkit").__version__, "reinstall: pip install -e '.[dev]'"
    old_name = re.compile(r"""(?<![\w-])labkit(?:\[\w,]+\]| @ git\+)|pip install (?:-U )?['"]?labkit(?![\w-])""")
    typed = [ROOT / "README.md", ROOT / "INSTRUCTORS.md", ROOT / "CONTRIBUTING.md", ROOT / "environment.yml",
             ROOT / "pyproject.toml", *(ROOT / "docs").rglob("*.md"), *(ROOT / "labkit").rglob("*.py"),
             *(ROOT / "workshop").rglob("*.md"), *(ROOT / "notebooks").rglob("*.ipynb"), *(ROOT / "notebooks").rglob("*.po")]
    found = {str(path.relative_to(ROOT)): old_name.findall(path.read_text(encoding="utf-8")) for path in typed}
    assert not {name: hits for name, hits in found.items() if hits}
    assert old_name.search("pip install 'labkit[hf]'") and old_name.search('pip install "labkit @ git+https://x/y"')
    assert not old_name.search("pip install 'torch-labkit[hf]' and python -m labkit lab")


def _top_level_imports(folder):
    """Each top-level module that a file of ``folder`` imports, outside the standard library and labkit."""
    found = {}
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "labkit":
                    found.setdefault(top, path.relative_to(ROOT).as_posix())
    return found


def test_every_package_labkit_imports_is_declared():
    """A dependency that only arrives through another one can leave with it (packaging, once, was only jupyterlab's)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lines = [*pyproject["project"]["dependencies"], *pyproject["build-system"]["requires"],  # build_labs: the build's
             *(line for extra in pyproject["project"]["optional-dependencies"].values() for line in extra)]
    declared = {Requirement(line).name.lower().replace("_", "-") for line in lines}
    distributions = metadata.packages_distributions()
    undeclared = {module: where for module, where in _top_level_imports(ROOT / "labkit").items()
                  if not {name.lower().replace("_", "-") for name in distributions.get(module, [module])} & declared}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_the_package_metadata_names_its_authors_and_audience_and_no_address_that_cannot_work():
    from labkit.labs import REPOSITORY_URL

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["authors"] and project["license"] == "BSD-3-Clause"
    assert {"Intended Audience :: Education", "Framework :: Jupyter"} <= set(project["classifiers"])
    urls = project.get("urls", {})
    assert all(REPOSITORY_URL and url.startswith(REPOSITORY_URL) for url in urls.values()), urls
    assert "OWNER" not in json.dumps(project)


def test_the_long_description_has_no_relative_link():
    """README.md is also the package's page on PyPI, where a relative link leads nowhere."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)", readme) + re.findall(r"<(?:a|img)\b[^>]*(?:href|src)=\"([^\"]+)", readme)
    relative = [target for target in targets if not re.match(r"https?://|#|mailto:", target)]
    assert not relative, f"README.md links {relative}: make them absolute (https://...), or name the file in `code`"


def test_import_labkit_is_headless_and_light():
    code = (
        "import json, sys, labkit, labkit.core.timing, labkit.core.tables, labkit.core.device, labkit.widgets, "
        "labkit.core.checks\n"
        "print(json.dumps(sorted(m for m in ('ipywidgets', 'matplotlib', 'torchvision') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert json.loads(out) == []



def test_the_declared_floor_the_doctor_and_the_floor_ci_job_name_the_same_releases():
    from labkit.learner.doctor import TESTED_RANGE

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    floors = {Requirement(r).name: str(Requirement(r).specifier) for r in pyproject["project"]["dependencies"]}
    makefile = (ROOT / "Makefile").read_text()
    pins = next(line for line in makefile.splitlines() if line.startswith("TORCH_FLOOR :=")).split(":=")[1].split()
    assert sorted(pins) == sorted(f"{dist}=={oldest}" for dist, (oldest, _) in TESTED_RANGE.items())
    for dist, (oldest, _) in TESTED_RANGE.items():
        assert floors[dist] == f">={oldest.removesuffix('.0')}", f"pyproject's {dist} floor is not the tested {oldest}"
    # the floor job's transformers is a release of the oldest labkit[hf] takes
    hf_pin = Requirement(next(line for line in makefile.splitlines() if line.startswith("HF_FLOOR :=")).split(":=")[1].strip())
    hf_floor = next(Requirement(r) for r in pyproject["project"]["optional-dependencies"]["hf"])
    oldest_hf = str(hf_floor.specifier).removeprefix(">=")
    assert hf_pin.name == hf_floor.name == "transformers" and str(hf_pin.specifier).startswith(f"=={oldest_hf}.")


def test_version_prints_the_packages_version(capsys):
    import labkit
    from labkit.__main__ import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"labkit {labkit.__version__}\n"


# The build's conversion of the notebooks (labkit/authoring/build_labs.py) as in pip's isolated build environment: a
# top-level module imports only from the standard library, labkit, or the folders of the distributions that
# [build-system] requires brings (argv[2:]); any other is missing, as it would be there. An optional import
# (try/except ImportError) then takes its fallback, as it would there too.
ISOLATED_CONVERSION = """
import importlib.machinery, sys, sysconfig
from pathlib import Path

allowed = [Path(sysconfig.get_path("stdlib")), Path(sys.argv[1]).parent / "labkit", *map(Path, sys.argv[2:])]


class OnlyTheBuildRequirements:
    # The first copy of top-level `name` on sys.path that the build's environment has; one it lacks is an error.
    @staticmethod
    def find_spec(name, path=None, target=None):
        if path is not None or name in sys.builtin_module_names:
            return None
        found = False
        for entry in sys.path:
            spec = importlib.machinery.PathFinder.find_spec(name, [entry])
            if spec is None:
                continue
            found = True
            where = [spec.origin] if spec.origin not in (None, "namespace") else list(spec.submodule_search_locations or [])
            if any(Path(place).is_relative_to(folder) for place in where for folder in allowed):
                return spec
        if found:
            raise ModuleNotFoundError(f"{name} is not in the build's environment", name=name)
        return None  # labkit (found by an editable install's finder), or a module nobody has


sys.meta_path.insert(0, OnlyTheBuildRequirements)
from labkit.authoring.build_labs import BuildPy
from labkit.learner.workspace import learner_edition
for track in ("all", "core"):
    learner_edition(Path(sys.argv[1]), None, track, installed=True)
"""


def _installed_folders(requirements):
    """The top-level folders (and modules) of the distributions ``requirements`` install, with all they require."""
    seen, folders, todo = set(), set(), [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        name = requirement.name.lower().replace("_", "-")
        if name in seen or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        dist = metadata.distribution(requirement.name)
        for file in dist.files or []:
            if len(file.parts) > 1 and not file.parts[0].endswith((".dist-info", ".data")) and file.parts[0] != "..":
                folders.add(str(dist.locate_file(file.parts[0])))
            elif file.suffix in (".py", ".so"):
                folders.add(str(dist.locate_file(file)))
        todo += [Requirement(r) for r in dist.requires or []]
    return sorted(folders)


def test_the_build_requires_everything_its_conversion_of_the_notebooks_imports():
    """pip's isolated build has only [build-system] requires: a new import in the conversion must be listed there."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["cmdclass"]["build_py"] == "labkit.authoring.build_labs.BuildPy"
    folders = _installed_folders(pyproject["build-system"]["requires"])
    done = subprocess.run([sys.executable, "-c", ISOLATED_CONVERSION, str(ROOT / "notebooks"), *folders],
                          capture_output=True, text=True, timeout=300, cwd=ROOT / "notebooks")
    assert done.returncode == 0, f"the conversion needs more than [build-system] requires brings:\n{done.stderr[-3000:]}"


def test_the_sdist_carries_the_notebooks_the_build_converts():
    manifest = (ROOT / "MANIFEST.in").read_text()
    assert "include notebooks/[0-9][0-9]_*.ipynb" in manifest and "include notebooks/solutions/*.py" in manifest
