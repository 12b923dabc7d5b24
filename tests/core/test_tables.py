from labkit.core.tables import Table, render_html, render_text


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
