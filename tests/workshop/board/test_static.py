"""The page's script writes text only, and the page needs nothing inline (tests/ui/test_board_page_ui.py runs it in Chromium)."""
from __future__ import annotations

import re
from pathlib import Path

import labkit.workshop.board

BOARD = Path(labkit.workshop.board.__file__).parent
HTML_SINKS = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "srcdoc")


def test_the_scripts_never_write_html():
    for name in ("board.js", "queue.js"):
        script = (BOARD / "static" / name).read_text()
        assert [sink for sink in HTML_SINKS if sink in script] == [], name
        assert "textContent" in script


def test_the_template_has_no_inline_script_style_or_handler():
    template = (BOARD / "templates" / "board.html").read_text()
    assert re.findall(r"<script\b[^>]*>", template) == ['<script src="{{ static_url(\'board.js\') }}" defer>',
                                                         '<script src="{{ static_url(\'queue.js\') }}" defer>']
    assert not re.search(r"<style|\sstyle=|\son[a-z]+=|\{%\s*raw|\{\{!", template)
