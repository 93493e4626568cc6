//! The few JSON writers the one-line report needs.

use std::fmt::Write as _;

pub fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

pub fn json_num(x: f64) -> String {
    if x.is_finite() {
        let s = format!("{x:.3}");
        // Keep it short: 12.500 -> 12.5, 3.000 -> 3
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s.is_empty() || s == "-" {
            "0".into()
        } else {
            s.to_string()
        }
    } else {
        "null".into()
    }
}

pub fn json_opt(x: Option<f64>) -> String {
    x.map(json_num).unwrap_or_else(|| "null".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_numbers() {
        assert_eq!(json_num(12.5), "12.5");
        assert_eq!(json_num(3.0), "3");
        assert_eq!(json_num(0.0), "0");
        assert_eq!(json_num(f64::NAN), "null");
    }
}
