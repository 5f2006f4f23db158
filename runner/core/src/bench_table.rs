//! Markdown tables from benchmark results, generic over their fields: a harness emits
//! JSON objects and every field becomes a column, so a figure added to a result shows up
//! without touching this file. The field name carries the unit (`decode_tok_per_s`,
//! `kv_cache_mib`), which the header spells out: `decode (tok/s)`, `kv cache (MiB)`.

use serde_json::{Map, Value};

/// Significant digits kept of a column's largest number; smaller numbers in the column
/// keep the same decimals, so a column reads as aligned figures.
const SIGNIFICANT: i32 = 4;
/// Digits a number keeps at least, where the column's decimals would round it to nothing.
const MIN_SIGNIFICANT: i32 = 2;
const MAX_DECIMALS: i32 = 6;

/// The rows as one Markdown table, preceded by a caption line for text fields that hold
/// the same value in every row (an engine description would otherwise fill every row).
/// Columns come in the order fields first appear, nested objects flattened in place
/// (`step_ms.forward`). A row without a field, or with `null`, leaves its cell empty.
/// Numeric columns are right-aligned, in the Markdown and in the padded text.
pub fn markdown(rows: &[Value]) -> String {
    let flat: Vec<Map<String, Value>> = rows.iter().map(flatten).collect();
    let mut keys: Vec<&str> = Vec::new();
    for row in &flat {
        for key in row.keys() {
            if !keys.contains(&key.as_str()) {
                keys.push(key);
            }
        }
    }
    let mut caption = Vec::new();
    let mut columns = Vec::new();
    for key in keys {
        let values: Vec<Option<&Value>> = flat
            .iter()
            .map(|r| r.get(key).filter(|v| !v.is_null()))
            .collect();
        let constant_text = match values.first() {
            Some(Some(Value::String(first))) => values
                .iter()
                .all(|v| matches!(v, Some(Value::String(s)) if s == first)),
            _ => false,
        };
        if constant_text {
            if let Some(Some(Value::String(s))) = values.first() {
                caption.push(format!("{}: {s}", header(key)));
            }
        } else {
            columns.push(Column::new(key, &values));
        }
    }
    let mut out = String::new();
    if !caption.is_empty() {
        out.push_str(&caption.join("; "));
        out.push_str("\n\n");
    }
    if columns.is_empty() {
        return out;
    }
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    out.push_str(&line(
        columns.iter().map(|c| c.pad(&c.header, false)).collect(),
    ));
    out.push_str(&line(columns.iter().map(Column::rule).collect()));
    for r in 0..flat.len() {
        out.push_str(&line(
            columns
                .iter()
                .map(|c| c.pad(&c.cells[r], c.numeric))
                .collect(),
        ));
    }
    out
}

/// One line of JSON per result, as the harnesses printed before the tables.
pub fn json_lines(rows: &[Value]) -> String {
    rows.iter().map(|r| format!("{r}\n")).collect()
}

struct Column {
    header: String,
    cells: Vec<String>,
    numeric: bool,
    width: usize,
}

impl Column {
    fn new(key: &str, values: &[Option<&Value>]) -> Column {
        let numeric = values.iter().flatten().all(|v| v.is_number());
        let largest = values
            .iter()
            .flatten()
            .filter_map(|v| v.as_f64())
            .map(f64::abs)
            .fold(0.0, f64::max);
        let decimals = decimals_for(largest, SIGNIFICANT);
        let cells: Vec<String> = values
            .iter()
            .map(|v| match v {
                None => String::new(),
                Some(Value::Number(n)) if n.is_f64() => {
                    let x = n.as_f64().unwrap_or(f64::NAN);
                    let own = decimals_for(x.abs(), MIN_SIGNIFICANT);
                    format!("{x:.*}", decimals.max(own) as usize)
                }
                Some(Value::String(s)) => s.replace('|', "\\|"),
                Some(other) => other.to_string().replace('|', "\\|"),
            })
            .collect();
        let header = header(key);
        let width = cells
            .iter()
            .chain(std::iter::once(&header))
            .map(|c| c.chars().count())
            .max()
            .unwrap_or(0)
            .max(3);
        Column {
            header,
            cells,
            numeric,
            width,
        }
    }

    fn pad(&self, text: &str, right: bool) -> String {
        if right {
            format!("{text:>w$}", w = self.width)
        } else {
            format!("{text:<w$}", w = self.width)
        }
    }

    fn rule(&self) -> String {
        if self.numeric {
            format!("{}:", "-".repeat(self.width - 1))
        } else {
            "-".repeat(self.width)
        }
    }
}

/// Decimals that show `digits` significant digits of `x` (none for 0 or huge numbers).
fn decimals_for(x: f64, digits: i32) -> i32 {
    if !(x.is_finite() && x > 0.0) {
        return 0;
    }
    (digits - 1 - x.log10().floor() as i32).clamp(0, MAX_DECIMALS)
}

/// Nested objects become `parent.child` fields at the parent's place.
fn flatten(row: &Value) -> Map<String, Value> {
    fn walk(prefix: &str, value: &Value, out: &mut Map<String, Value>) {
        match value {
            Value::Object(fields) => {
                for (k, v) in fields {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other.clone());
            }
        }
    }
    let mut out = Map::new();
    match row {
        Value::Object(_) => walk("", row, &mut out),
        other => {
            out.insert("value".to_string(), other.clone());
        }
    }
    out
}

/// A unit as a field name spells it, and as a header shows it.
fn unit(word: &str) -> Option<&'static str> {
    Some(match word {
        "s" => "s",
        "ms" => "ms",
        "us" => "µs",
        "kib" => "KiB",
        "mib" => "MiB",
        "gib" => "GiB",
        "mb" => "MB",
        "bytes" => "B",
        "pct" => "%",
        _ => return None,
    })
}

/// The header of a field: words of the name, its unit in parentheses. `X_W_per_D` is
/// `X (W/D)` (`decode_tok_per_s`: `decode (tok/s)`, `samples_per_s`: `samples/s`); a
/// trailing unit word is the unit (`prefill_s`: `prefill (s)`); a nested field takes its
/// parent's unit (`step_ms.forward`: `step forward (ms)`).
pub fn header(key: &str) -> String {
    let mut label: Vec<String> = Vec::new();
    let mut found: Option<String> = None;
    for part in key.split('.') {
        let (words, part_unit) = split_unit(part);
        label.extend(words);
        if part_unit.is_some() {
            found = part_unit;
        }
    }
    let label = label.join(" ");
    match (label.is_empty(), found) {
        (_, None) => label,
        (true, Some(u)) => u,
        (false, Some(u)) => format!("{label} ({u})"),
    }
}

/// The words of one name segment and the unit it ends with, if any.
fn split_unit(part: &str) -> (Vec<String>, Option<String>) {
    let words: Vec<&str> = part.split('_').filter(|w| !w.is_empty()).collect();
    let spelled = |w: &str| unit(w).map_or_else(|| w.to_string(), str::to_string);
    if let Some(per) = words.iter().rposition(|w| *w == "per") {
        if per >= 1 && per + 2 == words.len() {
            let numerator = spelled(words[per - 1]);
            let unit = format!("{numerator}/{}", spelled(words[per + 1]));
            let label = words[..per - 1].iter().map(|w| w.to_string()).collect();
            return (label, Some(unit));
        }
    }
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => match unit(last) {
            Some(u) => (
                rest.iter().map(|w| w.to_string()).collect(),
                Some(u.to_string()),
            ),
            None => (words.iter().map(|w| w.to_string()).collect(), None),
        },
        _ => (words.iter().map(|w| w.to_string()).collect(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(table: &str) -> Vec<&str> {
        table.lines().filter(|l| l.starts_with('|')).collect()
    }

    fn cells(line: &str) -> Vec<&str> {
        line.trim_matches('|').split('|').map(str::trim).collect()
    }

    #[test]
    fn headers_spell_out_the_units_in_the_names() {
        assert_eq!(header("decode_tok_per_s"), "decode (tok/s)");
        assert_eq!(header("samples_per_s"), "samples/s");
        assert_eq!(header("transfer_bytes_per_step"), "transfer (B/step)");
        assert_eq!(header("reference_ms_per_step"), "reference (ms/step)");
        assert_eq!(header("prefill_s"), "prefill (s)");
        assert_eq!(header("kv_cache_mib"), "kv cache (MiB)");
        assert_eq!(header("blocks_kib_per_step"), "blocks (KiB/step)");
        assert_eq!(header("step_ms.forward"), "step forward (ms)");
        assert_eq!(header("batch"), "batch");
        assert_eq!(header("bytes"), "bytes");
        assert_eq!(header("prompt_tokens"), "prompt tokens");
        assert_eq!(header("utilization"), "utilization");
    }

    #[test]
    fn columns_follow_the_fields_first_appearance_with_nested_ones_in_place() {
        let rows = [
            json!({"batch": 1, "step_ms": {"forward": 2.0, "sampler": 0.5}, "decode_s": 1.0}),
            json!({"batch": 8, "decode_s": 2.0, "utilization": 0.95}),
        ];
        let table = markdown(&rows);
        let head = cells(lines(&table)[0]);
        assert_eq!(
            head,
            [
                "batch",
                "step forward (ms)",
                "step sampler (ms)",
                "decode (s)",
                "utilization"
            ]
        );
    }

    #[test]
    fn missing_and_null_fields_leave_empty_cells() {
        let rows = [
            json!({"batch": 1, "peak_rss_mib": null, "speedup": 2.5}),
            json!({"batch": 2, "peak_rss_mib": 10.0}),
        ];
        let table = markdown(&rows);
        let body = lines(&table);
        assert_eq!(cells(body[2]), ["1", "", "2.500"]);
        assert_eq!(cells(body[3]), ["2", "10.00", ""]);
    }

    #[test]
    fn numbers_are_right_aligned_and_text_left_aligned() {
        let rows = [
            json!({"scheduler": "static", "samples_per_s": 3.5}),
            json!({"scheduler": "continuous", "samples_per_s": 1234.4}),
        ];
        let table = markdown(&rows);
        let body = lines(&table);
        assert_eq!(cells(body[1]), ["----------", "--------:"]);
        // Every line of the table has the same width, numbers end at the column's edge.
        assert!(body.iter().all(|l| l.len() == body[0].len()), "{table}");
        assert!(body[2].ends_with("|       3.5 |"), "{table}");
        assert!(body[3].ends_with("|      1234 |"), "{table}");
        assert!(body[2].starts_with("| static     |"), "{table}");
    }

    #[test]
    fn a_column_keeps_four_significant_digits_of_its_largest_number() {
        let rows = [
            json!({"decode_tok_per_s": 1234.567, "decode_s": 0.123456}),
            json!({"decode_tok_per_s": 12.3456, "decode_s": 0.5}),
            json!({"decode_tok_per_s": 0.0012, "decode_s": 0.0}),
        ];
        let table = markdown(&rows);
        let col = |i: usize| -> Vec<String> {
            lines(&table)[2..]
                .iter()
                .map(|l| cells(l)[i].to_string())
                .collect()
        };
        // 0.0012 would round to 0 at the column's 0 decimals: it keeps 2 digits instead.
        assert_eq!(col(0), ["1235", "12", "0.0012"]);
        assert_eq!(col(1), ["0.1235", "0.5000", "0.0000"]);
    }

    #[test]
    fn integers_print_exactly_and_constant_text_becomes_the_caption() {
        let rows = [
            json!({"engine": "candle cpu f32", "vocab": 152064, "sampling": "greedy"}),
            json!({"engine": "candle cpu f32", "vocab": 32000, "sampling": "protocol"}),
        ];
        let table = markdown(&rows);
        assert!(table.starts_with("engine: candle cpu f32\n\n"), "{table}");
        let body = lines(&table);
        assert_eq!(cells(body[0]), ["vocab", "sampling"]);
        assert_eq!(cells(body[2]), ["152064", "greedy"]);
        assert_eq!(cells(body[3]), ["32000", "protocol"]);
    }

    #[test]
    fn json_lines_are_one_object_per_line() {
        let rows = [json!({"batch": 1}), json!({"batch": 2})];
        assert_eq!(json_lines(&rows), "{\"batch\":1}\n{\"batch\":2}\n");
    }
}
