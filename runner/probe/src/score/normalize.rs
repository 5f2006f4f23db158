//! Answer normalisation: NFKC, case folding, `&` as "and", punctuation dropped, leading
//! articles dropped, whitespace collapsed. The result is a list of tokens so that
//! matching works on whole words.

use unicode_normalization::UnicodeNormalization;

/// Tokens of a normalised text. Apostrophes join ("don't" -> "dont"); other punctuation
/// separates ("18/55" -> "18 55").
pub fn tokens(text: &str) -> Vec<String> {
    let folded: String = text.nfkc().flat_map(char::to_lowercase).collect();
    let mut spaced = String::with_capacity(folded.len());
    for c in folded.chars() {
        match c {
            '&' => spaced.push_str(" and "),
            '\'' | '\u{2019}' | '\u{2018}' => {}
            c if c.is_alphanumeric() => spaced.push(c),
            _ => spaced.push(' '),
        }
    }
    spaced.split_whitespace().map(str::to_string).collect()
}

/// Tokens with a leading article removed: used for whole answers and gold values.
pub fn value_tokens(text: &str) -> Vec<String> {
    let mut t = tokens(text);
    if t.len() > 1 && matches!(t[0].as_str(), "the" | "a" | "an") {
        t.remove(0);
    }
    t
}

/// The normalised text as one string.
pub fn normalize(text: &str) -> String {
    value_tokens(text).join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_case_width_ampersand_punctuation_and_articles() {
        assert_eq!(normalize("  The  SABLE & Finch. "), "sable and finch");
        assert_eq!(normalize("ＡＢＣ"), "abc");
        assert_eq!(normalize("I don’t know!"), "i dont know");
        assert_eq!(normalize("Tempo Builder 16/45"), "tempo builder 16 45");
        assert_eq!(normalize("A"), "a");
        assert_eq!(normalize(""), "");
    }
}
