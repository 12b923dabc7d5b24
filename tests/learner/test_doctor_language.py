"""The preflight in the learner's language: every probe line, fix and note, and one rule for the verdict in zh and ru.

The rule: the verdict's keyword ``READY`` / ``NOT READY`` stays as notebook 00 quotes it (inline code, which the
translations keep as English) and as scripts match it, with the language's own word beside it.
"""
from __future__ import annotations

import pytest

from labkit.learner import doctor
from labkit.learner.doctor import DoctorReport, Probe

GLOSS = {"zh": ("READY（就绪）", "NOT READY（未就绪）"), "ru": ("READY (готово)", "NOT READY (не готово)")}
NO_KERNEL = {"en": "no python3 kernel", "zh": "没有 python3 内核", "ru": "нет ядра python3"}
WIDGETS_MISSING = {"en": "not found; widgets would show as text", "zh": "交互控件会显示成文本",
                   "ru": "виджеты будут показаны как текст"}


def broken_report() -> DoctorReport:
    return DoctorReport([doctor.probe_python(), doctor.probe_kernel([]), doctor.probe_widgets_extension([])])


@pytest.mark.parametrize("lang", ["zh", "ru"])
def test_the_verdict_keeps_its_keyword_with_the_languages_word_beside_it(lang: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_LANG", lang)
    ready, not_ready = GLOSS[lang]
    assert DoctorReport([doctor.probe_python()]).verdict().startswith(f"doctor: {ready}")
    assert broken_report().verdict().startswith(f"doctor: {not_ready}")


@pytest.mark.parametrize("lang", ["en", "zh", "ru"])
def test_each_probe_line_and_fix_reads_in_the_learners_language(lang: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_LANG", lang)
    text = broken_report().to_text()
    assert NO_KERNEL[lang] in text and WIDGETS_MISSING[lang] in text
    assert "-m ipykernel install --sys-prefix --name python3" in text  # commands stay as typed
    note = doctor.run_preflight(packages={}, timeout=60, record=False, mode="in-process").note
    assert ("Probed in this kernel" in note) == (lang == "en") and "`python -m labkit doctor`" in note


def test_a_bad_setting_is_reported_in_the_learners_language(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_LANG", "zh")
    monkeypatch.setenv(doctor.TIMEOUT_ENV, "soon")
    _, problem = doctor.resolve_timeout()
    assert isinstance(problem, Probe) and problem.detail.startswith("'soon' 不是正的秒数")
