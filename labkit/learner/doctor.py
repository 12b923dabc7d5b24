"""Preflight for a lab or a workshop: ``python -m labkit doctor``.

Why: in a workshop of thirty, the first ten minutes are lost to one missing
package or a widgets extension that JupyterLab cannot find (widgets then show
as plain text). The doctor probes exactly what the labs need, prints versions
and the device, and ends with one verdict line. When something is missing it
exits non-zero and names the command that fixes it.

The doctor must work on exactly the machines where something is broken, so it
never imports what it probes: every probe that imports a third-party package
runs in a fresh interpreter with a timeout (an import can raise anything,
call ``sys.exit``, kill its process or hang). This module imports only the
standard library at top level (and :mod:`labkit.i18n.messages`, which does too) and renders its own table rather than through
tabulate, which is one of the packages it probes.

Where the probes run (:func:`preflight_mode`): ``python -m labkit doctor`` always isolates them
as above. Notebook 00 calls :func:`run_preflight` from a kernel that has already imported torch;
starting sixteen interpreters that each import torch again costs that kernel more CPU and memory than
every other cell of the notebook together, so there the probes run *in-process*: a package the
kernel already imported only has its version read (``importlib.metadata``), the others are imported
here, one at a time, each in a worker thread bounded by the same timeout (a hanging import is
reported as hanging and left behind; the preflight goes on). That is safe in a kernel where it
would not be in the doctor: the kernel already runs torch, so its worst cases are already here, and
a package whose import kills the interpreter would kill the notebook the moment a lab imports it.
JupyterLab is the server's package, which a kernel never imports: in-process it is looked up (found,
and its version read), not imported. On a workshop hub the learners share one installation that the
instructor's doctor checked once (workshop/README.md): with ``JUPYTERHUB_USER`` set and
``LABKIT_PREFLIGHT=image`` (the hub sets it for every learner's server), the preflight looks up every
package and probes only what is the learner's own: the device, the widgets extension, the kernel.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata as metadata
import json
import math
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from labkit.core.columns import columns
from labkit.i18n.messages import N_, _

# distribution name -> module name; the labs import each of these.
LAB_PACKAGES = {
    "torch": "torch",
    "torchvision": "torchvision",
    "jupyterlab": "jupyterlab",
    "ipywidgets": "ipywidgets",
    "matplotlib": "matplotlib",
    "tabulate": "tabulate",
}
# What the doctor's own later probes use: version specifiers, Jupyter paths, kernel specs.
HELPER_PACKAGES = {
    "packaging": "packaging",
    "jupyter_core": "jupyter_core",
    "jupyter_client": "jupyter_client",
}
# The releases the test suite runs on: strict nbval stores the notebooks' outputs on the newest, and
# `make test-torch-floor` (a CI job) runs the unit tests and executes every notebook on the oldest, which is
# also pyproject's floor (tests/test_packaging.py keeps the three in step). A newer release gets a warning:
# the labs may well work on it, but nothing has checked that they do.
TESTED_RANGE = {"torch": ("2.4.1", "2.14.1"), "torchvision": ("0.19.1", "0.29.1")}
WIDGETS_EXTENSION = "@jupyter-widgets/jupyterlab-manager"
MIN_PYTHON = (3, 10)
TIMEOUT_ENV = "LABKIT_DOCTOR_TIMEOUT"
#: ``image`` (with ``JUPYTERHUB_USER``): the hub's learners share one installation the instructor checked once.
PREFLIGHT_ENV = "LABKIT_PREFLIGHT"
IMAGE = "image"
#: Packages a kernel never imports (the server's): in-process they are looked up, not imported.
SERVER_PACKAGES = frozenset({"jupyterlab"})
Mode = Literal["isolated", "in-process", "image"]
MODES: tuple[Mode, ...] = ("isolated", "in-process", "image")
# Generous: all probes run at once, and importing torchvision alone took 30 s on a busy 2-core machine.
DEFAULT_TIMEOUT_S = 120.0
_RESULT_MARK = "@@labkit-doctor-result@@ "
#: The version of ``labkit doctor --json``'s keys (:meth:`DoctorReport.to_dict`).
JSON_FORMAT = 1


@dataclass(frozen=True)
class Probe:
    """One line of the preflight: what was probed, whether it passed, how to fix it.

    A ``warning`` passes (the labs can run) but names something the learner should know.
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: str = ""


@dataclass
class DoctorReport:
    probes: list[Probe] = field(default_factory=list)
    note: str = ""  # how the probes ran, when not each in its own interpreter; printed before the verdict
    next_step: str = N_("open 00_start_here.ipynb")  # after READY (:func:`next_step`); "" inside that notebook

    @property
    def problems(self) -> list[Probe]:
        return [p for p in self.probes if not p.ok]

    @property
    def warnings(self) -> list[Probe]:
        return [p for p in self.probes if p.ok and p.warning]

    @property
    def ok(self) -> bool:
        return not self.problems

    def verdict(self) -> str:
        if self.ok:
            warned = _(", {count} with a warning ({names})").format(
                count=len(self.warnings), names=", ".join(p.name for p in self.warnings)) if self.warnings else ""
            then = f"; {_(self.next_step)}" if self.next_step else ""
            return _("doctor: READY - all {count} probes passed{warned}{then}").format(
                count=len(self.probes), warned=warned, then=then)
        names = ", ".join(c.name for c in self.problems)
        return _("doctor: NOT READY - {count} problem(s): {names}. "
                 "Run the fix command(s) above, then `python -m labkit doctor` again.").format(
                     count=len(self.problems), names=names)

    def to_text(self) -> str:
        rows = [(_("PROBLEM") if not p.ok else _("WARNING") if p.warning else _("ok"), shown_probe(p.name), p.detail)
                for p in self.probes]
        lines = [_plain_table([_("status"), _("probe"), _("detail")], rows), ""]
        for problem in self.problems:
            lines.append(_("To fix {name}: {fix}").format(name=problem.name, fix=problem.fix))
        for warned in self.warnings:
            lines.append(_("Warning on {name}: {warning}").format(name=warned.name, warning=warned.warning))
        if self.note:
            lines.append(self.note)
        lines.append(self.verdict())
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as ``labkit doctor --json`` prints it: keys that stay, for provisioning scripts.

        ``format`` changes only when a key changes meaning. Each probe's ``status`` is ``ok``, ``warning``
        (passed, with something to know) or ``problem`` (with the ``fix`` command).
        """
        probes = [{"name": p.name, "status": "problem" if not p.ok else "warning" if p.warning else "ok",
                   "detail": p.detail, "fix": p.fix, "warning": p.warning} for p in self.probes]
        return {"format": JSON_FORMAT, "ready": self.ok, "verdict": self.verdict(), "problems": [p.name for p in self.problems],
                "warnings": [p.name for p in self.warnings], "note": self.note, "probes": probes}

    def __str__(self) -> str:
        return self.to_text()


#: Probes named in labkit's words (the others are package names): shown in the learner's language, kept in the JSON.
PROBE_WORDS = (N_("device"), N_("threads"), N_("widgets extension"), N_("python3 kernel"))


def shown_probe(name: str) -> str:
    """A probe's name as the table shows it."""
    return _(name) if name in PROBE_WORDS else name


def _plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The layout of tabulate's ``simple`` format, without needing tabulate to work."""
    widths = [max(columns(str(cell)) for cell in column) for column in zip(headers, *rows)]
    lines = [headers, ["-" * w for w in widths], *rows]
    return "\n".join("  ".join(str(c) + " " * (w - columns(str(c))) for c, w in zip(line, widths)).rstrip()
                     for line in lines)


# --- what runs in the fresh interpreter (``_probe_main``) -----------------------------------


def _import_facts(dist: str, module: str) -> dict[str, Any]:
    """Import ``module``; report its distribution's version, or that it is missing."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:  # the package is there but one of its own imports is not: broken
            raise
        return {"missing": True}
    try:
        return {"version": metadata.version(dist)}
    except metadata.PackageNotFoundError:
        return {"unregistered": True}


def _lookup_facts(dist: str, module: str) -> dict[str, Any]:
    """Find ``module`` without importing it; report its distribution's version, or that it is missing."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        return {"missing": True}
    try:
        return {"version": metadata.version(dist)}
    except metadata.PackageNotFoundError:
        return {"unregistered": True}


def _extension_dirs() -> list[str]:
    """Folders where JupyterLab looks for prebuilt extensions."""
    from jupyter_core.paths import jupyter_path

    return jupyter_path("labextensions")


def _kernel_names() -> list[str]:
    from jupyter_client.kernelspec import KernelSpecManager

    return sorted(KernelSpecManager().find_kernel_specs())


def _device_facts() -> list[dict[str, Any]]:
    """Device, threads, MKLDNN and cuDNN: facts, never failures (CPU is fine)."""
    import torch

    from labkit.core.device import ENV_VAR, available_devices, device_line, pick_device
    from labkit.core.errors import LabkitError

    try:
        device = pick_device()
    except LabkitError as exc:
        fix = _("unset {variable}, or set it to one of {devices}").format(variable=ENV_VAR, devices=available_devices())
        return [{"name": "device", "ok": False, "detail": str(exc), "fix": fix}]
    cudnn = torch.backends.cudnn.is_available() if torch.cuda.is_available() else False
    facts = [
        ("device", device_line(device)),
        ("threads", str(torch.get_num_threads())),
        ("MKLDNN (oneDNN)", _("available") if torch.backends.mkldnn.is_available() else _("not available")),
        ("cuDNN", _("available ({version})").format(version=torch.backends.cudnn.version()) if cudnn
         else _("not available (no CUDA GPU)")),
    ]
    return [{"name": name, "ok": True, "detail": detail} for name, detail in facts]


_PROBES: dict[str, Callable[..., Any]] = {
    "import": _import_facts,
    "lookup": _lookup_facts,
    "extensions": _extension_dirs,
    "kernels": _kernel_names,
    "device": _device_facts,
}


def _origin(exc: BaseException) -> str:
    """Top-level package of the innermost frame outside importlib and this module: where an import broke."""
    origin = ""
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__", "")
        if name and name != __name__ and not name.startswith(("importlib", "_frozen_importlib")):
            origin = name.partition(".")[0]
        tb = tb.tb_next
    return origin


def _run_probe(kind: str, args: Sequence[str]) -> dict[str, Any]:
    """One probe, here: ``{"value": ...}``, or ``{"error": ..., "origin": ...}`` for whatever it raised."""
    try:
        return {"value": _PROBES[kind](*args)}
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from an import are findings too
        if isinstance(exc, SystemExit):
            return {"error": f"called sys.exit({exc.code!r})", "origin": _origin(exc)}
        return {"error": f"raised {type(exc).__name__}: {exc}", "origin": _origin(exc)}


def _probe_main() -> None:
    """Entry point in the fresh interpreter: run one probe, print its result as one marked JSON line."""
    kind, *args = sys.argv[1:]
    result = _run_probe(kind, args)
    sys.stdout.write("\n" + _RESULT_MARK + json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)  # a thread or atexit hook left by the import must not hold the exit


# --- running probes -----------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeResult:
    """What a probe returned (``value``), or why it returned nothing (``problem``, a phrase
    such as "raised ValueError: ..." that completes "importing torch ...")."""

    value: Any = None
    problem: str = ""
    timed_out: bool = False
    origin: str = ""  # the top-level package where the error was raised, when known


def _timed_out(timeout: float) -> ProbeResult:
    return ProbeResult(problem=f"did not finish within {timeout:g} s", timed_out=True)


def _result(found: dict[str, Any]) -> ProbeResult:
    return ProbeResult(found.get("value"), found.get("error", ""), origin=found.get("origin", ""))


class _ProbeProcess:
    """One fresh interpreter running one probe; output goes to files, so no pipe can fill up."""

    def __init__(self, kind: str, args: Sequence[str], timeout: float) -> None:
        self.timeout = timeout
        self.out = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self.err = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        code = "from labkit.learner.doctor import _probe_main; _probe_main()"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, kind, *args],
            stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
            start_new_session=hasattr(os, "killpg"),  # so that kill() also ends what the import started
        )
        self.deadline = time.monotonic() + timeout

    def poll(self) -> ProbeResult | None:
        """The result once the probe has ended or run out of time; ``None`` while it still runs."""
        if self.process.poll() is None:
            if time.monotonic() < self.deadline:
                return None
            self.kill()
            return _timed_out(self.timeout)
        self.out.seek(0)
        for line in reversed(self.out.read().splitlines()):
            if line.startswith(_RESULT_MARK):
                return _result(json.loads(line[len(_RESULT_MARK):]))
        self.err.seek(0)
        last = (self.err.read().strip().splitlines() or [""])[-1]
        return ProbeResult(problem=f"ended its interpreter (exit status {self.process.returncode}) "
                                   f"before it could report. {last}".strip())

    def kill(self) -> None:
        if self.process.poll() is None:
            if hasattr(os, "killpg"):
                os.killpg(self.process.pid, signal.SIGKILL)
            else:
                self.process.kill()
            self.process.wait()

    def close(self) -> None:
        self.kill()
        self.out.close()
        self.err.close()


def run_probes_in_process(probes: dict[str, tuple[str, ...]], timeout: float) -> dict[str, ProbeResult]:
    """Run every probe (``name -> (kind, *args)``) in this interpreter, one after another, each bounded by ``timeout``.

    Each runs in a daemon thread of its own: one that does not finish in time is reported as hanging and left
    behind (a thread cannot be killed), and the next probe starts. One at a time, because two imports running
    at once in one interpreter can each wait on a module the other is importing.
    """
    def run_into(found: dict[str, Any], kind: str, args: Sequence[str]) -> None:
        found.update(_run_probe(kind, args))

    results: dict[str, ProbeResult] = {}
    for name, (kind, *args) in probes.items():
        found: dict[str, Any] = {}  # a new one per probe: a probe left behind can only ever fill its own
        worker = threading.Thread(target=run_into, args=(found, kind, args), daemon=True, name=f"labkit-doctor-{name}")
        worker.start()
        worker.join(timeout)
        results[name] = _result(found) if found else _timed_out(timeout)
    return results


def run_probes(probes: dict[str, tuple[str, ...]], timeout: float) -> dict[str, ProbeResult]:
    """Run every probe (``name -> (kind, *args)``) at once, each in its own interpreter with ``timeout``."""
    running: dict[str, _ProbeProcess] = {}
    results: dict[str, ProbeResult] = {}
    try:
        for name, (kind, *args) in probes.items():
            running[name] = _ProbeProcess(kind, args, timeout)
        while len(results) < len(running):
            for name, probe in running.items():
                if name not in results and (result := probe.poll()) is not None:
                    results[name] = result
            time.sleep(0.05)
    finally:  # also on Ctrl-C: no interpreter is left behind
        for probe in running.values():
            probe.close()
    return results


# --- turning results into probes ------------------------------------------------------------


def _python() -> str:
    """This interpreter as the user should type it: relative when below the current folder."""
    relative = os.path.relpath(sys.executable)
    return shlex.quote(sys.executable if relative.startswith("..") else relative)


def probe_python() -> Probe:
    version = platform.python_version()
    ok = sys.version_info[:2] >= MIN_PYTHON
    wanted = ".".join(map(str, MIN_PYTHON))
    return Probe("python", ok, version, "" if ok else _("install Python {version} or newer").format(version=wanted))


def package_probe(dist: str, module: str, result: ProbeResult, spec: str = "",
                  satisfies: Callable[[str, str], bool] | None = None) -> Probe:
    """Turn an import probe into a line: ok with the version, or the problem and the pip command that fixes it."""
    install = f"{_python()} -m pip install {shlex.quote(dist + spec)}"
    reinstall = f"{_python()} -m pip install --force-reinstall {shlex.quote(dist + spec)}"
    if result.timed_out:
        return Probe(dist, False, _("importing {module} {problem}: it hangs, or this machine is very busy "
                                    "(set {variable} to more seconds to wait longer)").format(
                                        module=module, problem=result.problem, variable=TIMEOUT_ENV), reinstall)
    if result.origin and result.origin != module.partition(".")[0]:  # a broken dependency: reinstall that one
        culprit = metadata.packages_distributions().get(result.origin, [result.origin])[0]
        return Probe(dist, False, _("importing {module} {problem} (the error comes from {origin})").format(
                         module=module, problem=result.problem, origin=result.origin),
                     f"{_python()} -m pip install --force-reinstall {shlex.quote(culprit)}")
    if result.problem:
        return Probe(dist, False, _("importing {module} {problem}").format(module=module, problem=result.problem), reinstall)
    facts = result.value
    if facts.get("missing"):
        return Probe(dist, False, _("not installed (no module named {module})").format(module=module), install)
    if facts.get("unregistered"):
        return Probe(dist, False, _("{module} imports but {dist} is not installed as a package").format(module=module, dist=dist),
                     reinstall)
    version = facts["version"]
    if spec and satisfies is not None and not satisfies(version, spec):  # an unparsable version satisfies nothing
        return Probe(dist, False, _("{version} installed, labkit needs {spec}").format(version=version, spec=spec), install)
    return Probe(dist, True, version, warning=untested_warning(dist, version, satisfies))


def untested_warning(dist: str, version: str, satisfies: Callable[[str, str], bool] | None) -> str:
    """Why ``version`` of ``dist`` is newer than the newest release series labkit is tested on, or ``""``."""
    if dist not in TESTED_RANGE or satisfies is None:
        return ""
    oldest, newest = TESTED_RANGE[dist]
    major, minor = (int(part) for part in newest.split(".")[:2])
    if satisfies(version, f"<{major}.{minor + 1}"):  # 2.14.x counts as tested when 2.14.1 is
        return ""
    return _("{dist} {version} is newer than labkit's tested range ({oldest} to {newest}): the labs may work, "
             "but no test has run on it. If a lab breaks, {command} gives the tested release.").format(
                 dist=dist, version=version, oldest=oldest, newest=newest,
                 command=f"{_python()} -m pip install {shlex.quote(f'{dist}=={newest}')}")


def _version_tools() -> tuple[dict[str, str], Callable[[str, str], bool]]:
    """labkit's declared specifiers (e.g. ``{"torch": ">=2.14.1"}``) and a version test, from packaging.

    Called only after packaging imported cleanly in a probe.
    """
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    try:
        from labkit.labs import DISTRIBUTION  # pyproject's name, not the import name

        declared = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        declared = []
    specs = {}
    for line in declared:
        req = Requirement(line)
        if req.marker is None:
            specs[req.name.lower()] = str(req.specifier)
    return specs, lambda version, spec: version in SpecifierSet(spec)


def probe_widgets_extension(search_dirs: Sequence[Path]) -> Probe:
    """Is the ipywidgets JupyterLab extension where JupyterLab will find it?"""
    for folder in search_dirs:
        if (Path(folder) / WIDGETS_EXTENSION / "package.json").is_file():
            return Probe("widgets extension", True, _("{extension} found").format(extension=WIDGETS_EXTENSION))
    return Probe(
        "widgets extension",
        False,
        _("{extension} not found; widgets would show as text").format(extension=WIDGETS_EXTENSION),
        _("{command}, then restart JupyterLab (list them with: jupyter labextension list)").format(
            command=f"{_python()} -m pip install 'ipywidgets>=8' 'jupyterlab_widgets>=3'"),
    )


def probe_kernel(names: Sequence[str]) -> Probe:
    ok = "python3" in names
    return Probe("python3 kernel", ok, _("python3 kernel found") if ok else _("no python3 kernel"),
                 "" if ok else f"{_python()} -m ipykernel install --sys-prefix --name python3")


def _unprobed(name: str, result: ProbeResult, needs: str) -> Probe:
    """A line whose probe failed: say why, and point at the package it needs."""
    return Probe(name, False, _("could not be probed: the probe {problem}").format(problem=result.problem),
                 _("fix {package} first (see its line above), then run the doctor again").format(
                     package=result.origin or needs))


def resolve_timeout(timeout: float | None = None) -> tuple[float, Probe | None]:
    """Seconds each probe may take: ``timeout``, else ``$LABKIT_DOCTOR_TIMEOUT``, else the default.

    A malformed environment value is reported as a problem (with the default used), never ignored.
    """
    if timeout is not None:
        return timeout, None
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT_S, None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if math.isfinite(value) and value > 0:
        return value, None
    return DEFAULT_TIMEOUT_S, Probe(
        TIMEOUT_ENV, False, _("{value} is not a positive number of seconds; used {default} s").format(
            value=repr(raw), default=f"{DEFAULT_TIMEOUT_S:g}"),
        _("unset {variable}, or set it to a number of seconds such as 300").format(variable=TIMEOUT_ENV))


def _in_kernel() -> bool:
    """Whether this interpreter is a Jupyter kernel (IPython with a kernel), without importing IPython."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def preflight_mode() -> tuple[Mode, Probe | None]:
    """Where :func:`run_preflight` runs its probes when not told (the module docstring says why).

    ``image`` on a hub (``JUPYTERHUB_USER`` and ``LABKIT_PREFLIGHT=image``), ``in-process`` in a kernel that has
    already imported torch, else ``isolated``. A ``LABKIT_PREFLIGHT`` value other than ``image`` is reported as a
    problem (and the probes run as if it were unset), never ignored.
    """
    raw = os.environ.get(PREFLIGHT_ENV)
    problem = None
    if raw not in (None, "", IMAGE):
        problem = Probe(PREFLIGHT_ENV, False, _("{value} is not a preflight mode; probed as if it were unset").format(
                            value=repr(raw)),
                        _("unset {variable}, or set it to {image} (a workshop hub's learners; workshop/README.md)").format(
                            variable=PREFLIGHT_ENV, image=repr(IMAGE)))
    if raw == IMAGE and os.environ.get("JUPYTERHUB_USER"):
        return "image", problem
    if _in_kernel() and "torch" in sys.modules:
        return "in-process", problem
    return "isolated", problem


_NOTES = {  # translated where the report is made (run_preflight)
    "in-process": N_("Probed in this kernel, which had already imported torch; `python -m labkit doctor` in a terminal "
                     "probes each package in a fresh interpreter."),
    "image": N_("The packages are the room's installation, which your instructor's doctor checked once for everyone "
                "({setting}): their versions were read here; your device, the widgets extension and "
                "the kernel were probed for you."),
}


def run_preflight(packages: dict[str, str] | None = None, *, timeout: float | None = None,
                  record: bool = True, mode: Mode | None = None) -> DoctorReport:
    """Run every probe, each limited to ``timeout`` seconds, and return the report.

    ``mode`` says where the probes run (``None``: :func:`preflight_mode` picks): ``isolated``, each import in a
    fresh interpreter (``python -m labkit doctor``); ``in-process``, here (a kernel that already runs torch);
    ``image``, versions looked up here and only the device, widgets extension and kernel probed (a hub's
    learner). The report has the same lines in every mode. ``packages`` (distribution -> module) replaces
    :data:`LAB_PACKAGES`, for tests. ``record``: the verdict is an event of the learner's progress (notebook
    00; :mod:`labkit.progress`), which ``python -m labkit doctor`` (the instructor's, before a workshop) leaves out.
    """
    packages = LAB_PACKAGES if packages is None else packages
    timeout, timeout_problem = resolve_timeout(timeout)
    mode_problem = None
    if mode is None:
        mode, mode_problem = preflight_mode()
    elif mode not in MODES:
        from labkit.core.errors import LabkitValueError  # standard library only, like this module

        raise LabkitValueError(f"mode must be one of {', '.join(map(repr, MODES))} (or None: picked for you); got {mode!r}.")
    wanted = {**packages, **HELPER_PACKAGES}

    def kind(dist: str) -> str:
        return "lookup" if mode == "image" or (mode == "in-process" and dist in SERVER_PACKAGES) else "import"

    commands: dict[str, tuple[str, ...]] = {dist: (kind(dist), dist, module) for dist, module in wanted.items()}
    commands |= {"@extensions": ("extensions",), "@kernels": ("kernels",), "@device": ("device",)}
    results = run_probes(commands, timeout) if mode == "isolated" else run_probes_in_process(commands, timeout)

    probes = [probe_python()] + [problem for problem in (timeout_problem, mode_problem) if problem]
    specs: dict[str, str] = {}
    satisfies = None
    packaging = package_probe("packaging", "packaging", results["packaging"])
    if packaging.ok:
        try:
            specs, satisfies = _version_tools()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - metadata or packaging can fail in odd ways
            packaging = Probe("packaging", False, _("reading labkit's requirements failed: {error}").format(error=repr(exc)),
                              f"{_python()} -m pip install --force-reinstall packaging")
    for dist, module in wanted.items():
        probes.append(packaging if dist == "packaging" else
                      package_probe(dist, module, results[dist], specs.get(dist, ""), satisfies))

    extensions, kernels = results["@extensions"], results["@kernels"]
    probes.append(probe_widgets_extension([Path(p) for p in extensions.value]) if not extensions.problem
                  else _unprobed("widgets extension", extensions, "jupyter_core"))
    probes.append(probe_kernel(kernels.value) if not kernels.problem
                  else _unprobed("python3 kernel", kernels, "jupyter_client"))
    if all(p.ok for p in probes if p.name == "torch"):
        device = results["@device"]
        probes += ([Probe(**fact) for fact in device.value] if not device.problem
                   else [_unprobed("device", device, "torch")])
    in_a_notebook = mode in ("in-process", "image")  # notebook 00's own cell: no "open 00_start_here.ipynb"
    note = _(_NOTES[mode]).format(setting=f"{PREFLIGHT_ENV}={IMAGE}") if mode in _NOTES else ""
    report = DoctorReport(probes, note, next_step="" if in_a_notebook else next_step())
    if record:
        _record(report)
    return report


START_HERE = "00_start_here.ipynb"
_LAB_HERE = N_("`labkit lab` starts JupyterLab on your workspace/ here; open 00_start_here.ipynb there")
_MAKE_ONE = N_("there is no 00_start_here.ipynb here yet: `labkit lab` makes your workspace (workspace/ in this "
               "folder) and starts JupyterLab on it; open 00_start_here.ipynb there")


def next_step(cwd: Path | None = None) -> str:
    """What to do after READY, for the folder the doctor runs in: open notebook 00 where there is one, else make it.

    Why not always "open 00_start_here.ipynb": a newcomer who installed labkit with pip has no notebook yet.
    """
    folder = cwd or Path.cwd()
    if (folder / START_HERE).is_file():
        return DoctorReport.next_step
    # "workspace": the folder labkit lab makes (labkit.progress.journal.LAB_FOLDER)
    return _LAB_HERE if (folder / "workspace" / START_HERE).is_file() else _MAKE_ONE


def _record(report: DoctorReport) -> None:
    """The verdict in the learner's progress; labkit itself may be what is broken, so a failed import is no event."""
    try:
        from labkit.progress.record import record_preflight
    except Exception:  # noqa: BLE001 - the preflight's verdict must come out whatever is broken
        return
    record_preflight([probe.name for probe in report.problems])


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=_positive_seconds, default=None, metavar="SECONDS",
                        help=_("how long one probe may take before it counts as hanging (default: ${variable}, "
                               "else {seconds})").format(variable=TIMEOUT_ENV, seconds=f"{DEFAULT_TIMEOUT_S:g}"))
    parser.add_argument("--json", action="store_true",
                        help=_("print the report as JSON (keys: format, ready, verdict, problems, warnings, note, "
                               "probes), for provisioning scripts; the exit code is the same"))


def _failed(verdict: str, as_json: bool) -> None:
    """A verdict without a report (interrupted, or the doctor itself failed), as text or as ``--json`` prints one."""
    print(json.dumps({"format": JSON_FORMAT, "ready": False, "verdict": verdict, "problems": [], "warnings": [],
                      "note": "", "probes": []}, indent=2) if as_json else verdict)


def run(args: argparse.Namespace) -> int:
    as_json = args.json
    try:
        report = run_preflight(timeout=args.timeout, record=False, mode="isolated")
    except KeyboardInterrupt:
        _failed(_("doctor: NOT READY - interrupted before every probe had finished; run it again."), as_json)
        return 128 + signal.SIGINT
    except Exception as exc:  # noqa: BLE001 - the doctor must still end with a verdict
        _failed(_("doctor: NOT READY - the doctor itself failed ({error}). Please report this with the line above.").format(
            error=f"{type(exc).__name__}: {exc}"), as_json)
        return 1
    print(json.dumps(report.to_dict(), indent=2) if as_json else report.to_text())
    return 0 if report.ok else 1
