"""Preflight for a lab or a workshop: ``python -m labkit doctor``.

Why: in a workshop of thirty, the first ten minutes are lost to one missing
package or a widgets extension that JupyterLab cannot find (widgets then show
as plain text). The doctor checks exactly what the labs need, prints versions
and the device, and ends with one verdict line. When something is missing it
exits non-zero and names the command that fixes it.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata as metadata
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from labkit.tables import Table

# distribution name -> module name; the labs import each of these.
LAB_PACKAGES = {
    "torch": "torch",
    "torchvision": "torchvision",
    "jupyterlab": "jupyterlab",
    "ipywidgets": "ipywidgets",
    "matplotlib": "matplotlib",
    "tabulate": "tabulate",
}
WIDGETS_EXTENSION = "@jupyter-widgets/jupyterlab-manager"
MIN_PYTHON = (3, 10)
REINSTALL = "make lab  (or: python -m pip install -e '.[dev]' from the labkit checkout)"


@dataclass(frozen=True)
class Check:
    """One line of the preflight: what was checked, whether it passed, how to fix it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


@dataclass
class DoctorReport:
    checks: list[Check] = field(default_factory=list)

    @property
    def problems(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.problems

    def verdict(self) -> str:
        if self.ok:
            return f"doctor: READY - all {len(self.checks)} checks passed; open notebooks/00_start_here.ipynb"
        names = ", ".join(c.name for c in self.problems)
        return f"doctor: NOT READY - {len(self.problems)} problem(s): {names}. Run the fix command(s) above, then `python -m labkit doctor` again."

    def to_text(self) -> str:
        rows = [("ok" if c.ok else "MISSING", c.name, c.detail) for c in self.checks]
        lines = [Table(["status", "check", "detail"], rows).to_text(), ""]
        for check in self.problems:
            lines.append(f"To fix {check.name}: {check.fix}")
        lines.append(self.verdict())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


def _requirement_specs() -> dict[str, str]:
    """Version specifiers labkit declares, e.g. ``{"torch": ">=2.14.1"}``."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # packaging ships with pip/jupyterlab, but be safe
        return {}
    try:
        declared = metadata.requires("labkit") or []
    except metadata.PackageNotFoundError:
        return {}
    specs = {}
    for line in declared:
        req = Requirement(line)
        if req.marker is None:
            specs[req.name.lower()] = str(req.specifier)
    return specs


def check_python() -> Check:
    version = platform.python_version()
    ok = sys.version_info[:2] >= MIN_PYTHON
    wanted = ".".join(map(str, MIN_PYTHON))
    return Check("python", ok, version, "" if ok else f"install Python {wanted} or newer")


def check_package(
    dist: str,
    module: str,
    spec: str = "",
    import_module: Callable[[str], ModuleType] = importlib.import_module,
) -> Check:
    """Is ``dist`` installed, importable, and new enough?"""
    fix = f"python -m pip install '{dist}{spec}'"
    try:
        import_module(module)
    except Exception as exc:  # noqa: BLE001 - a broken install raises anything
        return Check(dist, False, f"cannot import {module}: {type(exc).__name__}: {exc}", fix)
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        return Check(dist, False, f"{module} imports but {dist} is not installed as a package", fix)
    if spec:
        from packaging.specifiers import SpecifierSet

        if version not in SpecifierSet(spec):
            return Check(dist, False, f"{version} installed, labkit needs {spec}", fix)
    return Check(dist, True, version)


def labextension_dirs() -> list[Path]:
    """Folders where JupyterLab looks for prebuilt extensions."""
    try:
        from jupyter_core.paths import jupyter_path
    except ImportError:
        return [Path(sys.prefix) / "share" / "jupyter" / "labextensions"]
    return [Path(p) for p in jupyter_path("labextensions")]


def check_widgets_extension(search_dirs: list[Path] | None = None) -> Check:
    """Is the ipywidgets JupyterLab extension where JupyterLab will find it?"""
    dirs = labextension_dirs() if search_dirs is None else search_dirs
    for folder in dirs:
        if (folder / WIDGETS_EXTENSION / "package.json").is_file():
            return Check("widgets extension", True, f"{WIDGETS_EXTENSION} found")
    return Check(
        "widgets extension",
        False,
        f"{WIDGETS_EXTENSION} not found; widgets would show as text",
        "python -m pip install 'ipywidgets>=8' 'jupyterlab_widgets>=3', then restart JupyterLab "
        "(check with: jupyter labextension list)",
    )


def check_kernel() -> Check:
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        names = KernelSpecManager().find_kernel_specs()
    except Exception as exc:  # noqa: BLE001
        names = {}
        detail = f"kernel specs unreadable: {exc}"
    else:
        detail = "python3 kernel found" if "python3" in names else "no python3 kernel"
    ok = "python3" in names
    return Check("python3 kernel", ok, detail, "" if ok else "python -m ipykernel install --sys-prefix --name python3")


def device_checks() -> list[Check]:
    """Device, threads, MKLDNN and cuDNN: facts, never failures (CPU is fine)."""
    import torch

    from labkit.device import ENV_VAR, available_devices, device_line, pick_device
    from labkit.errors import LabkitError

    try:
        device = pick_device()
    except LabkitError as exc:
        return [Check("device", False, str(exc), f"unset {ENV_VAR}, or set it to one of {available_devices()}")]
    cudnn = torch.backends.cudnn.is_available() if torch.cuda.is_available() else False
    return [
        Check("device", True, device_line(device)),
        Check("threads", True, str(torch.get_num_threads())),
        Check("MKLDNN (oneDNN)", True, "available" if torch.backends.mkldnn.is_available() else "not available"),
        Check("cuDNN", True, f"available ({torch.backends.cudnn.version()})" if cudnn else "not available (no CUDA GPU)"),
    ]


def run_checks(
    packages: dict[str, str] | None = None,
    import_module: Callable[[str], ModuleType] = importlib.import_module,
) -> DoctorReport:
    """Run every check. ``packages`` and ``import_module`` exist for tests."""
    packages = LAB_PACKAGES if packages is None else packages
    specs = _requirement_specs()
    report = DoctorReport([check_python()])
    report.checks += [check_package(d, m, specs.get(d, ""), import_module) for d, m in packages.items()]
    report.checks.append(check_widgets_extension())
    report.checks.append(check_kernel())
    if all(c.ok for c in report.checks if c.name == "torch"):
        report.checks += device_checks()
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Check that this machine is ready for the labs."


def run(args: argparse.Namespace) -> int:
    report = run_checks()
    print(report.to_text())
    return 0 if report.ok else 1
