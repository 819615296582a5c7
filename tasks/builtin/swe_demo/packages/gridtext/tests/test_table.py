import pytest

from gridtext import Table


@pytest.fixture
def fruit():
    return Table(["name", "qty"], [["apple", 3], ["kiwi", 12], ["fig", None]])


def test_grid_render(fruit):
    assert fruit.render() == "\n".join(
        [
            "+-------+-----+",
            "| name  | qty |",
            "+=======+=====+",
            "| apple |   3 |",
            "| kiwi  |  12 |",
            "| fig   |     |",
            "+-------+-----+",
        ]
    )


def test_plain_render(fruit):
    assert fruit.render("plain") == "name   qty\n-----  ---\napple    3\nkiwi    12\nfig"


def test_markdown_render(fruit):
    assert fruit.render("markdown") == "\n".join(
        [
            "| name  | qty |",
            "| :---- | --: |",
            "| apple |   3 |",
            "| kiwi  |  12 |",
            "| fig   |     |",
        ]
    )


def test_markdown_escapes_pipes():
    t = Table(["expr"], [["a|b"]])
    assert t.render("markdown").splitlines()[-1] == "| a\\|b |"


def test_explicit_alignment():
    t = Table(["k", "v"], [["a", "x"], ["bbb", "yy"]], align={"k": "right", "v": "center"})
    assert t.render("plain").splitlines()[2:] == ["  a  x", "bbb  yy"]


def test_unknown_alignment_column():
    with pytest.raises(KeyError):
        Table(["a"], align={"b": "left"})


def test_max_width_truncates_cells(fruit):
    t = Table(["description"], [["a rather long description"]], max_width=10)
    lines = t.render("plain").splitlines()
    assert lines[0] == "descripti…"
    assert lines[2] == "a rather …"


def test_column_widths(fruit):
    assert fruit.column_widths() == [5, 3]


def test_row_length_is_checked(fruit):
    with pytest.raises(ValueError):
        fruit.add_row(["only one"])


def test_headers_are_validated():
    with pytest.raises(ValueError):
        Table([])
    with pytest.raises(ValueError):
        Table(["a", "a"])
    with pytest.raises(ValueError):
        Table(["a"], max_width=0)


def test_column_and_len(fruit):
    assert fruit.column("qty") == [3, 12, None]
    assert len(fruit) == 3
    with pytest.raises(KeyError):
        fruit.column("price")


def test_sort_by_puts_none_last(fruit):
    fruit.sort_by("qty", reverse=True)
    assert fruit.column("name") == ["kiwi", "apple", "fig"]
    fruit.sort_by("name")
    assert fruit.column("name") == ["apple", "fig", "kiwi"]


def test_multiline_cells_are_flattened():
    t = Table(["note"], [["two\nlines"]])
    assert "two lines" in t.render()


def test_custom_formatter():
    t = Table(["n"], [[1], [2]], formatter=lambda v: f"<{v}>")
    assert t.render("plain").splitlines()[2:] == ["<1>", "<2>"]


def test_str_is_grid(fruit):
    assert str(fruit) == fruit.render("grid")


def test_unknown_style(fruit):
    with pytest.raises(ValueError):
        fruit.render("html")
