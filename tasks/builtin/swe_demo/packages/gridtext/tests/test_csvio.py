import io

import pytest

from gridtext import Table, read_csv, to_csv, write_csv


def test_read_csv_with_header():
    t = read_csv("name,qty\napple,3\nkiwi,12\n")
    assert t.headers == ["name", "qty"]
    assert t.rows == [["apple", "3"], ["kiwi", "12"]]


def test_read_csv_without_header():
    t = read_csv("a,b\nc,d\n", header=False)
    assert t.headers == ["col1", "col2"]
    assert len(t) == 2


def test_read_csv_quoted_fields_and_delimiter():
    t = read_csv('x;y\n"a;b";"say ""hi"""\n', delimiter=";")
    assert t.rows == [["a;b", 'say "hi"']]


def test_read_csv_pads_short_rows_and_skips_blank_lines():
    t = read_csv("a,b,c\n1\n\n2,3\n")
    assert t.rows == [["1", "", ""], ["2", "3", ""]]


def test_read_csv_strict_and_long_rows():
    with pytest.raises(ValueError):
        read_csv("a,b\n1\n", strict=True)
    with pytest.raises(ValueError, match="record 2"):
        read_csv("a,b\n1,2,3\n")


def test_read_csv_empty():
    with pytest.raises(ValueError):
        read_csv("")


def test_read_csv_from_file_object():
    t = read_csv(io.StringIO("h\nv\n"))
    assert t.rows == [["v"]]


def test_to_csv_round_trip():
    t = Table(["text", "n"], [["comma, inside", 1], ['quote "q"', None], ["line\nbreak", 2.5]])
    text = to_csv(t)
    assert text.splitlines()[0] == "text,n"
    again = read_csv(text)
    assert again.rows == [["comma, inside", "1"], ['quote "q"', ""], ["line\nbreak", "2.5"]]


def test_write_csv(tmp_path):
    path = tmp_path / "out.csv"
    write_csv(Table(["a"], [["é"]]), path)
    assert path.read_bytes() == "a\né\n".encode("utf-8")
