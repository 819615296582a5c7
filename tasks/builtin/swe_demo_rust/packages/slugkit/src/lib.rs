//! URL slugs, word truncation and title case.
//!
//! ```
//! assert_eq!(slugkit::slugify("Hello, World"), "hello-world");
//! ```

/// The separator `slugify` puts between words.
pub const SEPARATOR: char = '-';

/// A URL slug of `text`: lowercase ASCII letters and digits, words joined by a single `-`.
/// Anything else (spaces, punctuation, symbols) separates words; separators never lead, trail or repeat.
pub fn slugify(text: &str) -> String {
    let mut slug = String::with_capacity(text.len());
    let mut pending = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if pending && !slug.is_empty() {
                slug.push(SEPARATOR);
            }
            pending = false;
            slug.push(c.to_ascii_lowercase());
        } else {
            pending = true;
        }
    }
    slug
}

/// The first `max_words` words of `text` (split on whitespace), joined by single spaces, with `…`
/// appended when words were dropped.
pub fn truncate_words(text: &str, max_words: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= max_words {
        return words.join(" ");
    }
    let mut kept = words[..max_words].join(" ");
    kept.push('…');
    kept
}

/// Every word of `text` with its first letter upper case and the rest lower case; the whitespace
/// between words is kept as it is.
pub fn title_case(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at_start = true;
    for c in text.chars() {
        if c.is_whitespace() {
            at_start = true;
            out.push(c);
        } else if at_start {
            at_start = false;
            out.extend(c.to_uppercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}
