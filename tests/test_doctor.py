import subprocess
import sys
from pathlib import Path

from labkit import doctor


def test_doctor_is_ready_here():
    report = doctor.run_checks()
    assert report.ok, report.to_text()
    text = report.to_text()
    for name in ("python", "torch", "torchvision", "jupyterlab", "ipywidgets", "matplotlib", "tabulate",
                 "widgets extension", "device", "threads", "MKLDNN", "cuDNN"):
        assert name in text
    assert text.splitlines()[-1].startswith("doctor: READY")


def _missing(name):
    def fake_import(module):
        if module == name:
            raise ModuleNotFoundError(f"No module named '{name}'")
        return __import__(module)

    return fake_import


def test_missing_package_is_named_with_its_fix():
    report = doctor.run_checks(import_module=_missing("tabulate"))
    assert not report.ok
    assert [c.name for c in report.problems] == ["tabulate"]
    text = report.to_text()
    assert "To fix tabulate: python -m pip install 'tabulate>=0.9'" in text
    assert text.splitlines()[-1].startswith("doctor: NOT READY - 1 problem(s): tabulate.")


def test_too_old_version_is_a_problem(monkeypatch):
    check = doctor.check_package("tabulate", "tabulate", ">=999")
    assert not check.ok and "labkit needs >=999" in check.detail


def test_missing_widgets_extension(tmp_path: Path):
    check = doctor.check_widgets_extension([tmp_path])
    assert not check.ok
    assert "jupyter labextension list" in check.fix


def test_cli_exits_nonzero_when_a_package_cannot_be_imported():
    # A real process in which importing tabulate fails, as on a machine without it.
    code = (
        "import sys; sys.modules['tabulate'] = None\n"
        "from labkit import doctor\n"
        "report = doctor.run_checks(packages={'tabulate': 'tabulate'})\n"
        "print(report.to_text()); sys.exit(0 if report.ok else 1)\n"
    )
    # labkit.tables needs tabulate itself, so the fake removal happens after labkit imports it.
    code = "import labkit.tables\n" + code
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "MISSING" in result.stdout and "python -m pip install 'tabulate>=0.9'" in result.stdout


def test_cli_doctor_exits_zero_here():
    result = subprocess.run([sys.executable, "-m", "labkit", "doctor"], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("doctor: READY")


def test_an_unusable_device_override_is_a_named_problem_not_a_crash(monkeypatch):
    monkeypatch.setenv("LABKIT_DEVICE", "no-such-device")
    report = doctor.run_checks()
    assert [c.name for c in report.problems] == ["device"]
    assert "unset LABKIT_DEVICE" in report.to_text()
    assert report.to_text().splitlines()[-1].startswith("doctor: NOT READY - 1 problem(s): device.")
