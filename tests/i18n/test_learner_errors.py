"""labkit's longer errors in the learner's language: verify_jvp's refusals, fusion's, the FormatTracker's, the advice
after a failed trace, and argparse's own words on labkit's command line; and a scan that no new English error
message in the learner-facing packages escapes ``_()`` (``english_raises.txt`` lists those left, a list that only
shrinks)."""
from __future__ import annotations

import argparse
import ast
import gettext
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from labkit.__main__ import main
from labkit.core.errors import LabkitError
from labkit.forward_ad import verify_jvp
from labkit.fx.fusion import fold_bn_into_conv
from labkit.fx.tracing import _explain_trace_failure
from labkit.memory_format import FormatTracker

ROOT = Path(__file__).resolve().parents[2]
LEFT = Path(__file__).with_name("english_raises.txt")
#: the packages whose errors a learner meets in the labs' notebooks
LEARNER_PACKAGES = ("labkit/forward_ad", "labkit/fx", "labkit/memory_format", "labkit/capstone")
_GETTEXT = {"_", "N_", "ngettext"}
_ENGLISH = re.compile(r"[A-Za-z]{2,}[ ,:;]+[A-Za-z]{2,}")


@pytest.fixture
def speaks(monkeypatch: pytest.MonkeyPatch):
    def set_language(lang: str) -> None:
        monkeypatch.setenv("LABKIT_LANG", lang)
    return set_language


def test_verify_jvp_refuses_an_empty_input_in_chinese(speaks) -> None:
    speaks("zh")
    with pytest.raises(LabkitError, match="verify_jvp 无法验证空输入"):
        verify_jvp(torch.sin, (torch.zeros(0),), (torch.zeros(0),))


def test_verify_jvp_names_a_wrong_argument_in_russian(speaks) -> None:
    speaks("ru")
    with pytest.raises(LabkitError, match=r"^primals имеет тип float, а не torch.Tensor"):
        verify_jvp(torch.sin, 1.0, (torch.ones(1),))
    with pytest.raises(LabkitError, match=r"eps должен быть положительным конечным числом, а получено -1"):
        verify_jvp(torch.sin, (torch.ones(1),), (torch.ones(1),), eps=-1)


def test_fusion_refuses_a_mismatched_pair_in_russian(speaks) -> None:
    speaks("ru")
    with pytest.raises(LabkitError, match="Признаков у bn: 3, а выходных каналов у conv: 2"):
        fold_bn_into_conv(nn.Conv2d(1, 2, 1), nn.BatchNorm2d(3).eval())


def test_the_format_tracker_refuses_in_chinese(speaks) -> None:
    speaks("zh")
    with pytest.raises(LabkitError, match=r"FormatTracker.layout_ops\(\) 没有可显示的内容"):
        FormatTracker().layout_ops()
    tracker = FormatTracker()
    with tracker, pytest.raises(LabkitError, match="已经处于活动状态"):
        tracker.__enter__()


@pytest.mark.parametrize(("lang", "advice"), [("ru", "Символьная трассировка не может"), ("zh", "符号追踪无法跟随")])
def test_the_advice_after_a_failed_trace_is_in_the_learners_language(speaks, lang: str, advice: str) -> None:
    speaks(lang)
    text = _explain_trace_failure(RuntimeError("symbolically traced variables cannot be used as inputs to control flow"),
                                  "if x.sum() > 0:")
    assert text.startswith(advice) and "concrete_args={'flag': True}" in text and "leaf_modules=['its.name']" in text


def test_argparse_s_own_errors_speak_russian_and_argparse_is_left_as_it_was(
        speaks, capsys: pytest.CaptureFixture[str]) -> None:
    speaks("ru")
    with pytest.raises(SystemExit) as exit_:
        main(["progress", "--no-such-option"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "ошибка: нераспознанные аргументы: --no-such-option" in error and error.startswith("использование: ")
    assert argparse._ is gettext.gettext  # type: ignore[attr-defined]  # outside labkit's parse, argparse's own


def test_argparse_names_a_wrong_choice_in_chinese(speaks, capsys: pytest.CaptureFixture[str]) -> None:
    speaks("zh")
    with pytest.raises(SystemExit):
        main(["workspace", "--lang", "fr"])
    assert "错误：参数 --lang：" in capsys.readouterr().err


def english_raises(path: Path, root: Path = ROOT) -> Iterator[str]:
    """``path: literal`` (path from ``root``) for each ``raise`` whose message holds an English literal outside ``_()``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
            continue
        literal = _english_literal(node.exc.args[0])
        if literal is not None:
            yield f"{path.relative_to(root).as_posix()}: {literal[:60]}"


def _english_literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and _translated(node.func):
        return None  # translated, placeholders and all
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _translated(node.func.value):
        return None  # _("...").format(...): the placeholders' values are names of code and values
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _ENGLISH.search(node.value):
        return " ".join(node.value.split())
    return next((found for child in ast.iter_child_nodes(node) if (found := _english_literal(child)) is not None), None)


def _translated(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id in _GETTEXT) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _GETTEXT)


def found() -> set[str]:
    return {line for package in LEARNER_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
            for line in english_raises(path)}


def left() -> set[str]:
    return {line for line in LEFT.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")}


def test_no_new_english_error_escapes_gettext_in_the_learners_packages() -> None:
    new = sorted(found() - left())
    assert not new, "wrap these in _() (labkit.i18n.messages) and translate them:\n" + "\n".join(new)


def test_the_list_of_english_errors_left_holds_only_what_is_still_there() -> None:
    gone = sorted(left() - found())
    assert not gone, "translated now; remove from tests/i18n/english_raises.txt:\n" + "\n".join(gone)


def test_the_scan_finds_english_outside_gettext_only(tmp_path: Path) -> None:
    module = tmp_path / "fusion.py"
    module.write_text('raise ValueError(f"fn returned {x} twice")\nraise ValueError(_("fn returned {x}").format(x=1))\n'
                      'raise ValueError(f"{exc}\\n" + _("To fuse instead"))\nraise KeyError(name)\n', encoding="utf-8")
    assert list(english_raises(module, tmp_path)) == ["fusion.py: fn returned"]
