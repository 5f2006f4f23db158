//! Names made safe as one folder name: a run's folder under `outputs/<model>/` and a
//! served model's label, which must agree with it.

/// A name safe as one path component: letters, digits, `.`, `-` and `_`; anything else
/// becomes `_`.
pub fn component(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    match cleaned.trim_matches('.') {
        "" => "_".to_string(),
        s => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape_the_output_folder() {
        assert_eq!(component("../../etc"), "_.._etc");
        assert_eq!(component("qwen2.5-7b"), "qwen2.5-7b");
        assert_eq!(component("a/b c"), "a_b_c");
        assert_eq!(component(".."), "_");
    }
}
