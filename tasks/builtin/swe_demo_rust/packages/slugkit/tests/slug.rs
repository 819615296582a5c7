use slugkit::slugify;

#[test]
fn lowercases_and_joins_words() {
    assert_eq!(slugify("Hello World"), "hello-world");
}

#[test]
fn drops_punctuation() {
    assert_eq!(slugify("Rust: fast, safe"), "rust-fast-safe");
}

#[test]
fn keeps_digits() {
    assert_eq!(slugify("Top 10 crates"), "top-10-crates");
}

#[test]
fn empty_text_is_an_empty_slug() {
    assert_eq!(slugify(""), "");
}
