import textwrap

import pytest

from labkit.core.columns import columns, fill

pytestmark = pytest.mark.torch_free  # runs no torch op: the torch-floor job leaves it out (Makefile)


def test_a_chinese_character_takes_two_columns_and_a_combining_mark_none():
    assert columns("状态") == 4 and columns("state") == 5 and columns("е\u0301") == 1


def test_english_wraps_as_textwrap_does():
    text = "create or update the learner workspace that make lab opens (blank exercises; your edits are kept)"
    for width in (30, 45, 78):
        assert fill(text, width, "  workspace   ", " " * 14) == textwrap.fill(
            text, width, initial_indent="  workspace   ", subsequent_indent=" " * 14, break_on_hyphens=False)


def test_chinese_breaks_between_characters_within_the_width_and_never_before_a_comma():
    text = "在 PyTorch 的 OpInfo 数据库上运行 forward_ad.jvp 和 verify_jvp，并统计结果"
    lines = fill(text, 40, "  fwad  ", " " * 8).splitlines()
    assert len(lines) > 1 and all(columns(line) <= 40 for line in lines)
    assert not any(line.strip().startswith("，") for line in lines)
    assert "".join(line.strip() for line in lines).replace(" ", "") == "fwad" + text.replace(" ", "")  # nothing lost
