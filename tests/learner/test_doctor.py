import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.learner import doctor

# Lines every full report has.
ALL_PROBES = ("python", "torch", "torchvision", "jupyterlab", "ipywidgets", "matplotlib", "tabulate", "packaging",
              "jupyter_core", "jupyter_client", "widgets extension", "python3 kernel", "device", "threads", "MKLDNN",
              "cuDNN")


@pytest.mark.slow
def test_cli_doctor_is_ready_here(tmp_path):
    result = subprocess.run([sys.executable, "-m", "labkit", "doctor"], capture_output=True, text=True, timeout=600,
                            cwd=tmp_path)  # a folder with no notebook: the verdict says how to make one
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ALL_PROBES:
        assert f"ok      {name}" in result.stdout
    verdict = result.stdout.strip().splitlines()[-1]
    assert verdict.startswith("doctor: READY - all 16 probes passed") and "there is no 00_start_here.ipynb here yet" in verdict


@pytest.mark.slow
def test_cli_doctor_json_is_machine_readable_with_the_same_exit_code():
    result = subprocess.run([sys.executable, "-m", "labkit", "doctor", "--json"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)  # nothing but the JSON on stdout
    assert list(report) == ["format", "ready", "verdict", "problems", "warnings", "note", "probes"]
    assert report["format"] == doctor.JSON_FORMAT and report["ready"] is True and report["problems"] == []
    assert report["verdict"].startswith("doctor: READY - all 16 probes passed")
    assert [probe["name"].split(" (")[0] for probe in report["probes"]] == list(ALL_PROBES)
    assert all(set(probe) == {"name", "status", "detail", "fix", "warning"} for probe in report["probes"])


def test_json_names_each_problem_and_warning_with_its_fix_and_exits_as_the_text_does(monkeypatch, capsys):
    probes = [doctor.Probe("python", True, "3.11"), doctor.Probe("torch", True, "2.99", warning="newer than tested"),
              doctor.Probe("tabulate", False, "missing", fix="pip install tabulate")]
    monkeypatch.setattr(doctor, "run_preflight", lambda **kwargs: doctor.DoctorReport(probes))
    assert doctor.run(argparse.Namespace(timeout=None, json=False)) == 1
    text = capsys.readouterr().out
    assert doctor.run(argparse.Namespace(timeout=None, json=True)) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ready"] is False and report["problems"] == ["tabulate"] and report["warnings"] == ["torch"]
    assert report["verdict"] == text.strip().splitlines()[-1]
    assert [(p["name"], p["status"], p["fix"]) for p in report["probes"]] == [
        ("python", "ok", ""), ("torch", "warning", ""), ("tabulate", "problem", "pip install tabulate")]

    def broken(**kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(doctor, "run_preflight", broken)
    assert doctor.run(argparse.Namespace(timeout=None, json=True)) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ready"] is False and report["verdict"].startswith("doctor: NOT READY - the doctor itself failed")


def test_the_versions_checked_are_the_ones_the_installed_distribution_declares():
    """pyproject's name is torch-labkit, not the import name: read under the other, the checks would silently vanish."""
    import tomllib
    from packaging.requirements import Requirement

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    specs, satisfies = doctor._version_tools()
    torch = next(Requirement(r) for r in pyproject["project"]["dependencies"] if r.startswith("torch>"))
    assert specs["torch"] == str(torch.specifier) and not satisfies("2.0.0", specs["torch"])


def _fake_packages(folder: Path) -> None:
    """An installation where every package the doctor probes is broken in a different way."""
    hang = "import time\ntime.sleep(600)\n"
    for name in ("torch", "torchvision", "jupyterlab", "ipywidgets"):
        (folder / f"{name}.py").write_text(hang)
    (folder / "tabulate.py").write_text("raise RuntimeError('tabulate is broken')\n")
    (folder / "matplotlib").mkdir()
    (folder / "matplotlib" / "__init__.py").write_text("raise SystemExit(0)\n")
    (folder / "packaging.py").write_text("raise ImportError('packaging is broken')\n")
    (folder / "jupyter_core.py").write_text("raise RuntimeError('jupyter_core is broken')\n")
    (folder / "jupyter_client.py").write_text("import os\nos._exit(3)\n")


def test_cli_doctor_survives_broken_packages_and_names_each(tmp_path):
    _fake_packages(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), doctor.TIMEOUT_ENV: "10"}
    # A safety net only: the doctor itself must stop each hanging import after 10 s.
    result = subprocess.run([sys.executable, "-m", "labkit", "doctor"], capture_output=True, text=True,
                            timeout=300, env=env)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "Traceback" not in out + result.stderr
    python = os.path.relpath(sys.executable)
    python = sys.executable if python.startswith("..") else python
    for name in ("torch", "torchvision", "jupyterlab", "ipywidgets"):
        assert f"PROBLEM  {name:<17}  importing {name} did not finish within 10 s: it hangs" in out
        assert f"To fix {name}: {python} -m pip install --force-reinstall {name}\n" in out
    expected = {
        "tabulate": "importing tabulate raised RuntimeError: tabulate is broken",
        "matplotlib": "importing matplotlib called sys.exit(0)",
        "packaging": "importing packaging raised ImportError: packaging is broken",
        "jupyter_core": "importing jupyter_core raised RuntimeError: jupyter_core is broken",
        "jupyter_client": "importing jupyter_client ended its interpreter (exit status 3) before it could report.",
        "widgets extension": "could not be probed: the probe raised RuntimeError: jupyter_core is broken",
        "python3 kernel": "could not be probed: the probe ended its interpreter (exit status 3)",
    }
    for name, detail in expected.items():
        assert f"PROBLEM  {name:<17}  {detail}" in out
    for name in ("tabulate", "matplotlib", "packaging", "jupyter_core", "jupyter_client"):
        assert f"To fix {name}: {python} -m pip install --force-reinstall {name}\n" in out
    assert "To fix widgets extension: fix jupyter_core first" in out
    assert "device" not in out, "no device facts without a working torch"
    assert out.strip().splitlines()[-1] == (
        "doctor: NOT READY - 11 problem(s): torch, torchvision, jupyterlab, ipywidgets, matplotlib, tabulate, "
        "packaging, jupyter_core, jupyter_client, widgets extension, python3 kernel. "
        "Run the fix command(s) above, then `python -m labkit doctor` again.")


def test_a_broken_dependency_is_named_as_the_culprit(tmp_path):
    (tmp_path / "jupyter_core.py").write_text("raise RuntimeError('jupyter_core is broken')\n")
    (tmp_path / "needs_core.py").write_text("import jupyter_core\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    code = ("from labkit.learner import doctor\n"
            "r = doctor.run_probes({'x': ('import', 'jupyter_core', 'needs_core')}, 60)['x']\n"
            "print(doctor.package_probe('needs-core', 'needs_core', r).fix)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert result.stdout.strip().endswith("-m pip install --force-reinstall jupyter_core"), result.stdout + result.stderr


def test_doctor_imports_none_of_the_packages_it_probes():
    code = ("import sys, labkit.learner.doctor\n"
            "print([m for m in ('tabulate', 'packaging', 'jupyter_core', 'jupyter_client', 'torch', 'matplotlib')"
            " if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


@pytest.mark.slow
def test_missing_package_is_named_with_its_fix():
    report = doctor.run_preflight(packages={"labkit-no-such-dist": "labkit_no_such_module"})
    assert [p.name for p in report.problems] == ["labkit-no-such-dist"]
    text = report.to_text()
    assert "not installed (no module named labkit_no_such_module)" in text
    assert "To fix labkit-no-such-dist: " in text and " -m pip install labkit-no-such-dist" in text
    assert text.splitlines()[-1].startswith("doctor: NOT READY - 1 problem(s): labkit-no-such-dist.")


def test_too_old_version_is_a_problem():
    _, satisfies = doctor._version_tools()
    found = doctor.ProbeResult({"version": "0.9.0"})
    probe = doctor.package_probe("tabulate", "tabulate", found, ">=999", satisfies)
    assert not probe.ok and "0.9.0 installed, labkit needs >=999" in probe.detail
    assert probe.fix.endswith("-m pip install 'tabulate>=999'")
    odd = doctor.package_probe("tabulate", "tabulate", doctor.ProbeResult({"version": "not a version"}), ">=1", satisfies)
    assert not odd.ok and "not a version installed, labkit needs >=1" in odd.detail


def test_missing_widgets_extension(tmp_path: Path):
    probe = doctor.probe_widgets_extension([tmp_path])
    assert not probe.ok
    assert "jupyter labextension list" in probe.fix


def test_a_malformed_timeout_setting_is_reported_not_ignored(monkeypatch):
    for raw in ("abc", "0", "-5", "nan", "inf"):
        monkeypatch.setenv(doctor.TIMEOUT_ENV, raw)
        timeout, problem = doctor.resolve_timeout()
        assert timeout == doctor.DEFAULT_TIMEOUT_S
        assert problem is not None and not problem.ok and f"{raw!r} is not a positive number of seconds" in problem.detail
    monkeypatch.setenv(doctor.TIMEOUT_ENV, "2.5")
    assert doctor.resolve_timeout() == (2.5, None)
    with pytest.raises(argparse.ArgumentTypeError, match="'0' is not a positive number of seconds"):
        doctor._positive_seconds("0")


def test_the_verdict_line_is_printed_even_when_the_doctor_itself_fails(monkeypatch, capsys):
    def broken(**kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(doctor, "run_preflight", broken)
    assert doctor.run(argparse.Namespace(timeout=None, json=False)) == 1
    assert capsys.readouterr().out.startswith("doctor: NOT READY - the doctor itself failed (RuntimeError: bug)")


@pytest.mark.slow
def test_an_unusable_device_override_is_a_named_problem_not_a_crash(monkeypatch):
    monkeypatch.setenv("LABKIT_DEVICE", "no-such-device")
    report = doctor.run_preflight(packages={"torch": "torch"})
    assert [p.name for p in report.problems] == ["device"]
    assert "unset LABKIT_DEVICE" in report.to_text()
    assert report.to_text().splitlines()[-1].startswith("doctor: NOT READY - 1 problem(s): device.")


def test_a_release_newer_than_the_tested_range_passes_with_a_warning():
    _, satisfies = doctor._version_tools()
    oldest, newest = doctor.TESTED_RANGE["torch"]
    for tested in (oldest, newest, newest + "+cu130", newest.rsplit(".", 1)[0] + ".9"):
        probe = doctor.package_probe("torch", "torch", doctor.ProbeResult({"version": tested}), f">={oldest}", satisfies)
        assert probe.ok and probe.warning == "", tested
    major, minor = (int(part) for part in newest.split(".")[:2])
    newer = f"{major}.{minor + 1}.0"
    probe = doctor.package_probe("torch", "torch", doctor.ProbeResult({"version": newer}), f">={oldest}", satisfies)
    assert probe.ok and f"torch {newer} is newer than labkit's tested range ({oldest} to {newest})" in probe.warning
    assert f"pip install torch=={newest}" in probe.warning
    report = doctor.DoctorReport([doctor.Probe("python", True, "3.11"), probe])
    text = report.to_text()
    assert "WARNING  torch" in text and f"Warning on torch: torch {newer} is newer" in text
    assert report.ok and text.splitlines()[-1].startswith("doctor: READY - all 2 probes passed, 1 with a warning (torch);")



# --- in a kernel, and on a hub: the same lines, probed without sixteen fresh interpreters ---------------------------


def _preflight_here(tmp_path: Path, code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter that has imported torch first (as a notebook kernel has), recording nothing."""
    env = {**os.environ, "LABKIT_PROGRESS": "off", **(env or {})}
    return subprocess.run([sys.executable, "-c", "import torch\nfrom labkit.learner import doctor\n" + code],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


@pytest.mark.slow  # imports torchvision and matplotlib in-process
def test_in_process_the_report_has_the_lines_and_verdict_of_the_isolated_one(tmp_path):
    result = _preflight_here(tmp_path, "print(doctor.run_preflight(mode='in-process').to_text())")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for name in ALL_PROBES:
        assert f"ok      {name}" in out
    assert "Probed in this kernel" in out
    assert out.strip().splitlines()[-1] == "doctor: READY - all 16 probes passed"  # not "open 00_start_here": we are in it


def test_in_process_a_broken_import_is_named_and_a_hanging_one_is_bounded(tmp_path):
    packages = tmp_path / "packages"
    packages.mkdir()
    (packages / "hangs.py").write_text("import time\ntime.sleep(600)\n")
    (packages / "tabulate.py").write_text("raise RuntimeError('tabulate is broken')\n")
    (packages / "exits.py").write_text("raise SystemExit(0)\n")
    (packages / "needs_core.py").write_text("import broken_core\n")
    (packages / "broken_core.py").write_text("raise ImportError('broken_core is broken')\n")
    code = ("wanted = {'hangs': 'hangs', 'tabulate': 'tabulate', 'exits': 'exits', 'needs-core': 'needs_core'}\n"
            "report = doctor.run_preflight(wanted, timeout=2, mode='in-process', record=False)\n"
            "print(report.to_text())\n")
    result = _preflight_here(tmp_path, code, {"PYTHONPATH": str(packages)})
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "Traceback" not in out + result.stderr
    assert "PROBLEM  hangs              importing hangs did not finish within 2 s: it hangs" in out
    assert "PROBLEM  tabulate           importing tabulate raised RuntimeError: tabulate is broken" in out
    assert "PROBLEM  exits              importing exits called sys.exit(0)" in out
    assert "(the error comes from broken_core)" in out and "--force-reinstall broken_core" in out
    assert "python3 kernel     python3 kernel found" in out, "a hanging import holds up nothing after it"
    assert "doctor: NOT READY - 4 problem(s): hangs, tabulate, exits, needs-core." in out


def test_on_a_hub_image_the_packages_are_looked_up_and_only_the_learners_own_probed(tmp_path):
    code = ("import sys\n"
            "report = doctor.run_preflight(record=False)\n"
            "print(report.to_text())\n"
            "print('imported:', [m for m in ('torchvision', 'jupyterlab', 'matplotlib', 'ipywidgets', 'tabulate')"
            " if m in sys.modules])\n")
    result = _preflight_here(tmp_path, code, {"JUPYTERHUB_USER": "ada", doctor.PREFLIGHT_ENV: doctor.IMAGE})
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for name in ALL_PROBES:
        assert f"ok      {name}" in out
    assert "your instructor's doctor checked once" in out
    assert "doctor: READY - all 16 probes passed" in out
    assert "imported: []" in out, "image mode reads versions, it imports none of the packages"


def test_a_missing_package_is_a_problem_in_image_mode_too():
    report = doctor.run_preflight({"labkit-no-such-dist": "labkit_no_such_module"}, mode="image", record=False)
    assert [p.name for p in report.problems] == ["labkit-no-such-dist"]
    assert "not installed (no module named labkit_no_such_module)" in report.to_text()


def test_where_the_probes_run_is_picked_from_the_kernel_and_the_hub(monkeypatch):
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.delenv(doctor.PREFLIGHT_ENV, raising=False)
    monkeypatch.setattr(doctor, "_in_kernel", lambda: False)
    assert doctor.preflight_mode() == ("isolated", None)  # a terminal, a test: every probe in its own interpreter
    monkeypatch.setattr(doctor, "_in_kernel", lambda: True)
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or object())
    assert doctor.preflight_mode() == ("in-process", None)
    monkeypatch.setenv(doctor.PREFLIGHT_ENV, doctor.IMAGE)
    assert doctor.preflight_mode() == ("in-process", None), "image needs a hub's learner"
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    assert doctor.preflight_mode() == ("image", None)
    monkeypatch.setenv(doctor.PREFLIGHT_ENV, "imgae")
    mode, problem = doctor.preflight_mode()
    assert mode == "in-process" and problem is not None and not problem.ok
    assert "'imgae' is not a preflight mode" in problem.detail and "set it to 'image'" in problem.fix


def test_a_kernel_that_has_not_imported_torch_keeps_the_isolated_probes(monkeypatch):
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setattr(doctor, "_in_kernel", lambda: True)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert doctor.preflight_mode()[0] == "isolated"


def test_an_unknown_mode_is_refused_with_the_modes_named():
    from labkit.core.errors import LabkitValueError

    with pytest.raises(LabkitValueError, match="mode must be one of 'isolated', 'in-process', 'image'"):
        doctor.run_preflight(mode="fast", record=False)  # type: ignore[arg-type]


def test_the_command_line_doctor_always_isolates_its_probes(monkeypatch, capsys):
    seen = {}

    def preflight(**kwargs):
        seen.update(kwargs)
        return doctor.DoctorReport([doctor.Probe("python", True, "3.11")])

    monkeypatch.setattr(doctor, "run_preflight", preflight)
    assert doctor.run(argparse.Namespace(timeout=None, json=False)) == 0
    assert seen["mode"] == "isolated" and seen["record"] is False


def test_after_ready_the_next_step_is_one_this_folder_allows(tmp_path):
    """A newcomer who installed with pip has no notebook yet: "open 00_start_here.ipynb" would lead nowhere."""
    assert "labkit lab` makes your workspace" in doctor.next_step(tmp_path)
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / doctor.START_HERE).write_text("{}")
    assert doctor.next_step(tmp_path).startswith("`labkit lab` starts JupyterLab on your workspace/ here")
    assert doctor.next_step(tmp_path / "workspace") == "open 00_start_here.ipynb"
    report = doctor.DoctorReport([doctor.Probe("python", True, "3.11")], next_step=doctor.next_step(tmp_path / "empty"))
    assert report.verdict().endswith("; there is no 00_start_here.ipynb here yet: `labkit lab` makes your workspace "
                                     "(workspace/ in this folder) and starts JupyterLab on it; open 00_start_here.ipynb there")
