use slugkit::{title_case, truncate_words};

#[test]
fn short_text_is_kept() {
    assert_eq!(truncate_words("one two", 5), "one two");
}

#[test]
fn whitespace_is_normalised() {
    assert_eq!(truncate_words("  one \t two ", 5), "one two");
}

#[test]
fn title_cases_words() {
    assert_eq!(title_case("hello world"), "Hello World");
}

#[test]
fn title_case_keeps_whitespace() {
    assert_eq!(title_case("a  b\tc"), "A  B\tC");
}
