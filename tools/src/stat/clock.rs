//! Wall-clock time for the `-i` headers, as `2026-12-01 07:40:12Z` (UTC: no time zone
//! database needed, and the same on every machine of a fleet).

use std::time::{SystemTime, UNIX_EPOCH};

/// `secs` since the Unix epoch as `YYYY-MM-DD HH:MM:SSZ` (UTC).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The current time, formatted by [`utc`].
pub fn now_utc() -> String {
    utc(SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0))
}

/// (year, month, day) of the proleptic Gregorian calendar for a count of days since
/// 1970-01-01 (the days-to-civil algorithm over 400-year eras of 146097 days).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1st
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00Z");
        assert_eq!(utc(1_709_164_799), "2024-02-28 23:59:59Z");
        assert_eq!(utc(1_709_251_199), "2024-02-29 23:59:59Z");
        assert_eq!(utc(1_709_251_200), "2024-03-01 00:00:00Z");
        assert_eq!(utc(1_798_761_599), "2026-12-31 23:59:59Z");
        assert_eq!(utc(1_798_761_600), "2027-01-01 00:00:00Z");
        assert_eq!(utc(4_102_444_800), "2100-01-01 00:00:00Z");
    }

    fn month_len(y: i64, m: u32) -> u32 {
        let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
        [
            31,
            if leap { 29 } else { 28 },
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ][m as usize - 1]
    }

    /// Day by day over a whole 400-year era: each date is valid and follows the previous.
    #[test]
    fn every_day_follows_the_previous() {
        let mut prev = civil_from_days(-1);
        assert_eq!(prev, (1969, 12, 31));
        for z in 0..146_097 {
            let (y, m, d) = prev;
            let next = if d < month_len(y, m) {
                (y, m, d + 1)
            } else if m < 12 {
                (y, m + 1, 1)
            } else {
                (y + 1, 1, 1)
            };
            assert_eq!(civil_from_days(z), next, "day {z}");
            prev = next;
        }
        assert_eq!(prev, (2369, 12, 31));
    }
}
