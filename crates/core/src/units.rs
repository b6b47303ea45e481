//! Sizes and durations as people write them on a command line.

/// A size or a duration that could not be read (the text as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("`{0}` is not a size; write bytes, or a number with K, M or G")]
    NotASize(String),
    #[error("`{0}` is too large")]
    TooLarge(String),
    #[error("`{0}` is not a duration; write a number with d, h, m or s (90d, 12h, 30m, 2s)")]
    NotADuration(String),
}

/// `4096`, `64K`, `1M`, `1MiB`, `2G`: 1024-based.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| UnitError::NotASize(text.to_string()))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| UnitError::TooLarge(text.to_string()))
}

/// `90d`, `12h`, `30m`, `2s` (and anything `humantime` reads, such as `1h 30m`).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, UnitError> {
    humantime::parse_duration(text.trim()).map_err(|_| UnitError::NotADuration(text.to_string()))
}

/// An io error's cause in words, without any path.
pub fn describe_io(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code).to_string(),
        None => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999G").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("90d"),
            Ok(std::time::Duration::from_secs(90 * 86400))
        );
        assert_eq!(parse_duration("2s"), Ok(std::time::Duration::from_secs(2)));
        assert_eq!(
            parse_duration("12h"),
            Ok(std::time::Duration::from_secs(12 * 3600))
        );
        assert!(parse_duration("soon").is_err());
    }
}

/// A size as people write it: `512 B`, `2 KiB`, `1.5 MiB`, `1 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match value.fract() == 0.0 {
        true => format!("{value:.0} {}", UNITS[unit]),
        false => format!("{value:.1} {}", UNITS[unit]),
    }
}

#[cfg(test)]
mod human_tests {
    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(super::human_bytes(512), "512 B");
        assert_eq!(super::human_bytes(2048), "2 KiB");
        assert_eq!(super::human_bytes(1536 << 10), "1.5 MiB");
        assert_eq!(super::human_bytes(1 << 30), "1 GiB");
    }
}
