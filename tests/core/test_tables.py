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
