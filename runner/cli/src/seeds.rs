//! `--seeds`: as separate values (`--seeds 42 43 44`), comma-separated (`42,43,44`) or
//! one quoted, space-separated value (`"42 43 44"`), mixed as one likes; the help shows
//! the default the first way.

use std::fmt;
use std::str::FromStr;

/// One `--seeds` value: one seed or several, split at commas and spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seeds(pub Vec<u64>);

impl FromStr for Seeds {
    type Err = String;

    fn from_str(s: &str) -> Result<Seeds, String> {
        let seeds = s
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .map(|t| {
                t.parse::<u64>().map_err(|_| {
                    format!(
                        "{t:?} is not a seed (a whole number from 0); give seeds as \
                         --seeds 42 43 44, --seeds 42,43,44 or --seeds \"42 43 44\""
                    )
                })
            })
            .collect::<Result<Vec<u64>, String>>()?;
        Ok(Seeds(seeds))
    }
}

impl fmt::Display for Seeds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&words.join(" "))
    }
}

/// The seeds of every `--seeds` value, in order.
pub fn flat(values: &[Seeds]) -> Vec<u64> {
    values.iter().flat_map(|s| s.0.iter().copied()).collect()
}

/// The protocol's seeds as `--seeds`' default: one value per seed, so the help reads
/// `[default: 42 43 44]`, as the seeds may be given.
pub fn protocol() -> Vec<Seeds> {
    runner_core::protocol::SEEDS
        .iter()
        .map(|&s| Seeds(vec![s]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_commas_and_both_read_alike() {
        for text in ["42 43 44", "42,43,44", " 42, 43 ,44 "] {
            assert_eq!(text.parse::<Seeds>().unwrap().0, [42, 43, 44], "{text:?}");
        }
        let err = "42 x".parse::<Seeds>().unwrap_err();
        assert!(err.contains("\"x\" is not a seed"), "{err}");
        assert_eq!(flat(&protocol()), runner_core::protocol::SEEDS);
    }
}
