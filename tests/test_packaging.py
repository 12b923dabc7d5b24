"""Packaging invariants: one source of truth, and a cheap headless import."""
import json
import subprocess
import sys
from pathlib import Path

import tomllib
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _normalized(requirements):
    return {(Requirement(r).name.lower().replace("_", "-"), str(Requirement(r).specifier)) for r in requirements}


def test_environment_yml_lists_the_same_dependencies_as_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    declared = [line for line in pip_section if not line.startswith("-e")]
    assert _normalized(declared) == _normalized(pyproject["project"]["dependencies"])
    assert "-e ." in pip_section, "environment.yml must install labkit itself from the checkout"


def test_import_labkit_is_headless_and_light():
    code = (
        "import json, sys, labkit, labkit.core.timing, labkit.core.tables, labkit.core.device, labkit.widgets, "
        "labkit.core.checks\n"
        "print(json.dumps(sorted(m for m in ('ipywidgets', 'matplotlib', 'torchvision') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert json.loads(out) == []



def test_the_declared_floor_the_doctor_and_the_floor_ci_job_name_the_same_releases():
    from labkit.tools.doctor import TESTED_RANGE

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    floors = {Requirement(r).name: str(Requirement(r).specifier) for r in pyproject["project"]["dependencies"]}
    makefile = (ROOT / "Makefile").read_text()
    pins = next(line for line in makefile.splitlines() if line.startswith("TORCH_FLOOR :=")).split(":=")[1].split()
    assert sorted(pins) == sorted(f"{dist}=={oldest}" for dist, (oldest, _) in TESTED_RANGE.items())
    for dist, (oldest, _) in TESTED_RANGE.items():
        assert floors[dist] == f">={oldest.removesuffix('.0')}", f"pyproject's {dist} floor is not the tested {oldest}"
