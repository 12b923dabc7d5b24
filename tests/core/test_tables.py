import random

import numpy as np
import pytest

from labkit.core.tables import Table, _plain_html, render_html, render_text


def test_text_table_has_headers_and_rounded_floats():
    text = render_text([["conv", 0.123456789]], ["op", "seconds"])
    assert text.splitlines()[0].split() == ["op", "seconds"]
    assert "0.1235" in text


def test_html_escapes_cells():
    html = render_html([["<script>", 1]], ["name", "n"])
    assert "<table>" in html and "&lt;script&gt;" in html and "<script>" not in html


def test_table_renders_title_in_text_and_html():
    table = Table(["a", "b"], [[1, 2], [3, 4]], title="Numbers")
    assert str(table).startswith("Numbers\n")
    assert "<strong>Numbers</strong>" in table._repr_html_()
    assert table.column("b") == [2, 4]


def test_plain_repr_is_the_text_table():
    table = Table(["a"], [[1]])
    assert repr(table) == table.to_text()


def test_shows_as_table_mixin_renders_everything_from_table():
    from dataclasses import dataclass

    from labkit.core.tables import ShowsAsTable

    @dataclass(repr=False)
    class Result(ShowsAsTable):
        value: int

        def table(self):
            return Table(["value"], [[self.value]])

    result = Result(7)
    assert str(result) == repr(result) == result.to_text() == Table(["value"], [[7]]).to_text()
    assert "<td" in result._repr_html_()


def test_a_chinese_table_head_is_measured_as_wide_and_the_columns_line_up():
    """练习 is two characters but four columns: counted as two, the rows under a translated head would not line up."""
    import wcwidth

    text = Table(["练习", "状态", "下一步"], [["一", "已解出", "—"], ["二", "not started", "hint('1.2')"]]).to_text()
    head, rule, *rows = text.splitlines()
    starts = [index + 1 for index in range(len(rule) - 1) if rule[index:index + 2] == " -"]  # where columns 2, 3 start
    for line, cells in zip([head, *rows], [("状态", "下一步"), ("已解出", "—"), ("not started", "hint('1.2')")]):
        assert [wcwidth.wcswidth(line[:line.index(cell)]) for cell in cells] == starts, text


def test_the_doctors_own_table_measures_wide_characters_too():
    """labkit doctor renders without tabulate (it may be what is broken): the same layout, from the standard library."""
    from labkit.learner.doctor import _plain_table

    text = _plain_table(["状态", "检测项", "详情"], [["正常", "python", "3.11"], ["问题", "torch", "未安装"]])
    assert text.splitlines() == ["状态  检测项  详情", "----  ------  ------", "正常  python  3.11",
                                 "问题  torch   未安装"]


# Tables of whole numbers and plain text skip tabulate (labkit.core.tables._plain_html): the same HTML, byte for byte.
def _tabulate_html(rows, headers):
    from tabulate import tabulate

    return str(tabulate(rows, headers=headers, floatfmt=".4g", tablefmt="html"))


PLAIN_TABLES = [
    ([[0, "(0, 0, 0, 0)", 0], [1, "(0, 1, 0, 0)", 1], [12, "(1, 2, 3, 0)", 2]], ["offset", "element (n, c, h, w)", "channel c"]),
    ([["<script>", -3], ["a & b", 123456789012345678901], ['say "hi"', 0], ["it's", 7]], ["name", "n"]),
    ([["shape", "(2, 3, 2, 2)"], ["memory order", "NHWC (outermost to innermost)"]], ["property", "value"]),
    ([[1]], ["a very long header"]),
]
NOT_PLAIN_TABLES = [
    ([["12", 1]], ["numbers written as text", "n"]),
    ([["1,000", 1]], ["a number with a separator", "n"]),
    ([["nan", 1], ["inf", 2]], ["not a number", "n"]),
    ([["True", 1]], ["a bool written as text", "n"]),
    ([[True, 1]], ["a bool", "n"]),
    ([[1.5, 1]], ["a float", "n"]),
    ([[None, 1]], ["missing", "n"]),
    ([["", 1]], ["empty", "n"]),
    ([[" padded", 1]], ["spaces", "n"]),
    ([["中文", 1]], ["wide", "n"]),
    ([["two\nlines", 1]], ["lines", "n"]),
    ([[np.int64(3), 1]], ["numpy", "n"]),
    ([[1, "x"], [2]], ["ragged", "rows"]),
    ([[1, "x"]], ["宽", "head"]),
    ([], ["no", "rows"]),
]


@pytest.mark.parametrize(("rows", "headers"), PLAIN_TABLES)
def test_a_table_of_whole_numbers_and_text_is_tabulates_html_without_tabulate(rows, headers):
    assert _plain_html(rows, headers) is not None  # the quick way was taken
    assert render_html(rows, headers) == _tabulate_html(rows, headers)


@pytest.mark.parametrize(("rows", "headers"), NOT_PLAIN_TABLES)
def test_any_other_table_goes_to_tabulate(rows, headers):
    assert _plain_html(rows, headers) is None
    assert render_html(rows, headers) == _tabulate_html(rows, headers)


def test_random_tables_render_as_tabulate_renders_them():
    generator = random.Random(0)
    texts = ["a", "x&y", "(0, 1)", "<b>", "12", "-4", "1e5", "0x1F", "1_000", "NaN", "infinity", "a b", "ë", "行"]
    quick = 0
    for _ in range(400):
        kinds = [generator.choice(["int", "text", "mixed"]) for _ in range(generator.randint(1, 4))]
        rows = [[generator.choice([0, -7, 10**12]) if kind == "int" or (kind == "mixed" and generator.random() < 0.5)
                 else generator.choice(texts) for kind in kinds] for _ in range(generator.randint(1, 5))]
        headers = [generator.choice(["h", "offset", "a&b", "1", "x y"]) for _ in kinds]
        quick += _plain_html(rows, headers) is not None
        assert render_html(rows, headers) == _tabulate_html(rows, headers), (rows, headers)
    assert quick > 50  # both ways were compared
