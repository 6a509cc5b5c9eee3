//! Byte sizes as users write them (`4096`, `64KiB`, `1GB`) and unit conversions.

/// Parses a byte count: a plain integer, or a number with a unit
/// (`B`, `KB`/`MB`/`GB`/`TB` = powers of 1000, `KiB`/`MiB`/`GiB`/`TiB` = powers of 1024).
/// Units are case-insensitive. The result must be a whole number of bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("invalid size {text:?}: a size cannot be negative"));
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "tb" | "t" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "invalid size {text:?}: unknown unit {unit:?}; expected B, KB, MB, GB, TB, KiB, MiB, GiB or TiB"
            ));
        }
    };
    if num.is_empty() {
        return Err(format!("invalid size {text:?}: expected a number such as 4096 or 64KiB"));
    }
    let too_large = || format!("invalid size {text:?}: too large (at most {} bytes)", u64::MAX);
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(mult).ok_or_else(too_large);
    }
    // Digits alone that are not a u64 are past its range (the float below would round
    // 2^64 down to u64::MAX and accept it).
    if num.bytes().all(|b| b.is_ascii_digit()) {
        return Err(too_large());
    }
    let x: f64 = num.parse().map_err(|_| format!("invalid size {text:?}: {num:?} is not a number"))?;
    let bytes = x * mult as f64;
    // `u64::MAX as f64` is 2^64 itself: a product that reaches it is out of range.
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(too_large());
    }
    if bytes.fract() != 0.0 {
        return Err(format!("invalid size {text:?}: not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// GiB/s expressed in the GB/s the topology format uses (1 GiB/s = 1.073741824 GB/s).
pub fn gib_per_s(x: f64) -> f64 {
    x * 1.073_741_824
}

/// A byte count for people: `32 B`, `32 KiB`, `2 MiB`, `1.5 GiB` (binary units; at most two
/// decimals).
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    let s = format!("{v:.2}");
    format!("{} {}", s.trim_end_matches('0').trim_end_matches('.'), UNITS[u])
}

/// Seconds for people: whole seconds from 10 s on, else at most two decimals (`60`, `2.5`,
/// `0.25`): a limit of 59.99999949 s reads `60`.
/// A number for a message: as written (`25`, `0.5`) where that is short, in exponent form past
/// it (`1e-300`, `1e308`: Rust's `Display` writes every digit, three hundred of them).
pub fn short(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-3..1e12).contains(&x.abs()) { format!("{x}") } else { format!("{x:e}") }
}

/// "1 round", "2 rounds": a count and its noun, plural where it is not one.
pub fn counted(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

pub fn format_seconds(s: f64) -> String {
    if s >= 10.0 {
        return format!("{s:.0}");
    }
    let t = format!("{s:.2}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Deserializes a byte count from a JSON number or a size string as `parse_size` reads it
/// (`"1MiB"`), with an error that names the value.
pub fn deserialize_size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct Size;
    impl serde::de::Visitor<'_> for Size {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a byte count: a non-negative integer or a size such as \"64KiB\" or \"1GiB\"")
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom(format!("{v} is negative: expected a byte count")))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<u64, E> {
            if v.fract() == 0.0 && v >= 0.0 && v < u64::MAX as f64 {
                Ok(v as u64)
            } else if v >= u64::MAX as f64 {
                // Said as `parse_size` says it of a size string.
                Err(E::custom(format!("{} is too large (at most {} bytes)", short(v), u64::MAX)))
            } else if v < 0.0 {
                Err(E::custom(format!("{} is negative: expected a byte count", short(v))))
            } else {
                Err(E::custom(format!("{v} is not a whole number of bytes")))
            }
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<u64, E> {
            parse_size(v).map_err(|e| E::custom(format!("{v:?}: {e}")))
        }
    }
    d.deserialize_any(Size)
}

#[cfg(test)]
mod tests {

    #[test]
    fn seconds_read_as_people_write_them() {
        assert_eq!(super::format_seconds(59.999_999_49), "60");
        assert_eq!(super::format_seconds(2.5), "2.5");
        assert_eq!(super::format_seconds(0.25), "0.25");
        assert_eq!(super::format_seconds(3.0), "3");
    }

    use super::parse_size;

    /// A JSON byte count past u64 says the largest, as a size string does; a negative or a
    /// fraction says so.
    #[test]
    fn a_json_size_out_of_range_says_the_range() {
        let said = |text: &str| {
            let mut de = serde_json::Deserializer::from_str(text);
            let e = super::deserialize_size(&mut de).unwrap_err().to_string();
            e.split(" at line ").next().unwrap().to_string()
        };
        assert_eq!(said("1e30"), "1e30 is too large (at most 18446744073709551615 bytes)");
        assert_eq!(said("99999999999999999999"), "1e20 is too large (at most 18446744073709551615 bytes)");
        assert_eq!(said("-2.0"), "-2 is negative: expected a byte count");
        assert_eq!(said("-2"), "-2 is negative: expected a byte count");
        assert_eq!(said("2.5"), "2.5 is not a whole number of bytes");
        assert!(parse_size("99999999999999999999").unwrap_err().contains("at most 18446744073709551615 bytes"));
    }

    #[test]
    fn sizes() {
        let cases = [
            ("4096", 4096),
            ("64KiB", 65536),
            ("64MiB", 64 << 20),
            ("1GiB", 1 << 30),
            ("1GB", 1_000_000_000),
            ("32 B", 32),
            ("1.5KiB", 1536),
            ("2mib", 2 << 20),
        ];
        for (s, want) in cases {
            assert_eq!(parse_size(s), Ok(want), "{s}");
        }
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        // Issue 64: 2^64 as a string was clamped to u64::MAX and accepted.
        for bad in ["", "KiB", "12XB", "0.3B", "1e3", "-5", "99999999999999999999", "18446744073709551616"] {
            assert!(parse_size(bad).is_err(), "{bad} should be rejected");
        }
        assert!(parse_size(" -5KiB").unwrap_err().contains("cannot be negative"));
        for huge in ["18446744073709551616", "18446744073709551616.0", "16777216TiB"] {
            assert!(parse_size(huge).unwrap_err().contains("too large"), "{huge}");
        }
    }

    #[test]
    fn sizes_format_in_binary_units() {
        assert_eq!(super::format_size(32), "32 B");
        assert_eq!(super::format_size(32 << 10), "32 KiB");
        assert_eq!(super::format_size(3 << 19), "1.5 MiB");
        assert_eq!(super::format_size(512 << 20), "512 MiB");
        assert_eq!(super::format_size(1 << 30), "1 GiB");
    }
}
