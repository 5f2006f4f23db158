//! Where a JSON text's strings are, for the scanners that read what a parser will not
//! (an answer inside prose, a cut-off answer, a file's items located before parsing):
//! brackets, commas and quotes inside a string do not count.

/// The string state of a scan, fed one character (or byte) at a time. Whether a quote
/// outside a string opens one is the caller's to say ([`Strings::open`]): in prose it
/// may not.
#[derive(Debug, Default, Clone, Copy)]
pub struct Strings {
    inside: bool,
    escaped: bool,
}

impl Strings {
    /// Whether `c` belongs to the string being scanned (its closing quote included),
    /// moving past it; `false` for a character outside any string, left to the caller.
    #[inline]
    pub fn take(&mut self, c: char) -> bool {
        if !self.inside {
            return false;
        }
        match (self.escaped, c) {
            (true, _) => self.escaped = false,
            (false, '\\') => self.escaped = true,
            (false, '"') => self.inside = false,
            _ => {}
        }
        true
    }

    /// A byte of UTF-8 text: quotes and backslashes are ASCII, so no byte of a
    /// multi-byte character is taken for one.
    #[inline]
    pub fn take_byte(&mut self, b: u8) -> bool {
        self.take(char::from(b))
    }

    /// The quote just seen outside a string opens one.
    pub fn open(&mut self) {
        self.inside = true;
    }

    /// Whether a string is open (after `take` of its closing quote, not).
    pub fn is_open(&self) -> bool {
        self.inside
    }
}

#[cfg(test)]
mod tests {
    use super::Strings;

    #[test]
    fn escaped_quotes_and_backslashes_stay_inside() {
        let text = r#""a \" \\" x"#;
        let mut s = Strings::default();
        let inside: String = text
            .chars()
            .map(|c| {
                if s.take(c) {
                    'i'
                } else {
                    if c == '"' {
                        s.open();
                    }
                    'o'
                }
            })
            .collect();
        // The opening quote is outside (the caller opens); through the closing one inside.
        assert_eq!(inside, "oiiiiiiiioo");
    }
}
