//! The `--max-memory SIZE` limit: how many bytes one thing the CLI reads or decodes (an
//! archive, a raw array, a decoded array) may take; by default the library's decode limit
//! (`DecodeLimits::default()`), so reading and decoding refuse at the same size.

/// Parse a size: plain bytes (`1048576`), or a number (fractions allowed) with a unit. As in
/// GNU tools, `K`, `M`, `G`, `T` and `KiB` … `TiB` are powers of 1024 and `KB` … `TB` powers
/// of 1000; case does not matter and a fractional result is rounded down.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("'{text}' is not a size (e.g. 512M, 4G, 1.5GiB, 1048576)"))?;
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(format!("unknown unit '{unit}' in '{text}' (use K, M, G, T, KiB … TiB or KB … TB)")),
    };
    let bytes = value * multiplier as f64;
    // 2^64 is exactly representable; anything at or above it does not fit a u64.
    if !(1.0..18_446_744_073_709_551_616.0).contains(&bytes) {
        return Err(format!("size '{text}' must be at least 1 byte and below 16 EiB"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_gnu_tools() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("4g"), Ok(4 << 30));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("2 MB"), Ok(2_000_000));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("100b"), Ok(100));
        for bad in ["", "0", "0.1", "-1G", "G", "4X", "1.2.3M", "99999999999T", "NaN", "inf"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
