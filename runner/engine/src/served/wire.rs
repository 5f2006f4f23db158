//! What the runner reads from a server's headers and how it shows a server's address:
//! `Retry-After` as a bounded wait, and URLs with their user and password left out.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `text` with the user and password of every URL in it left out
/// (`http://user:secret@host/v1` shows as `http://host/v1`). Every endpoint that is
/// stored (manifest, journal) or shown (errors, warnings, progress) goes through here;
/// the requests themselves still carry the credentials.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the path, query, fragment or anything that ends a URL
        // in running text.
        let end = tail
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => out.push_str(&authority[at + 1..]),
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// How long a `Retry-After` header asks to wait: delay-seconds (a decimal or
/// exponent form is read too) or an HTTP date. `None` for what cannot be read (a
/// negative or non-finite number, garbage); a wait too long to represent reads as
/// `Duration::MAX`, and a date in the past as zero. The caller bounds the wait.
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        return Some(v.parse::<u64>().map_or(Duration::MAX, Duration::from_secs));
    }
    if let Ok(secs) = v.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return None;
        }
        return Some(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX));
    }
    let at = http_date(v)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// An HTTP date in its preferred form (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`)
/// or RFC 850's (`Sunday, 06-Nov-94 08:49:37 GMT`).
fn http_date(v: &str) -> Option<SystemTime> {
    let (_, rest) = v.split_once(", ")?;
    let parts: Vec<&str> = rest.split([' ', '-']).collect();
    let [day, month, year, time, "GMT"] = parts[..] else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let day: i64 = day.parse().ok()?;
    let mut year: i64 = year.parse().ok()?;
    if year < 100 {
        year += if year < 70 { 2000 } else { 1900 };
    }
    let hms: Vec<i64> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms[..] else { return None };
    if !(1..=31).contains(&day) || !(1970..=9999).contains(&year) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable {
    pub message: String,
    /// Asking again cannot help (the server would give the same answer): a malformed
    /// body, as opposed to one cut off by a dropped connection.
    pub permanent: bool,
}

impl Unreadable {
    pub fn retry(message: impl Into<String>) -> Unreadable {
        Unreadable {
            message: message.into(),
            permanent: false,
        }
    }

    pub fn permanent(message: impl Into<String>) -> Unreadable {
        Unreadable {
            message: message.into(),
            permanent: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_left_out_of_every_url_and_nothing_else_changes() {
        assert_eq!(
            redact("http://user:secret@host:8000/v1"),
            "http://host:8000/v1"
        );
        assert_eq!(
            redact("https://tok@h/v1/models?x=1"),
            "https://h/v1/models?x=1"
        );
        assert_eq!(redact("http://a:b@c@host"), "http://host");
        assert_eq!(
            redact("connecting to http://u:p@h/v1: http://u:p@h/v1/models: refused"),
            "connecting to http://h/v1: http://h/v1/models: refused"
        );
        assert_eq!(
            redact("--endpoint http://u:p@h/v1 --quiet"),
            "--endpoint http://h/v1 --quiet"
        );
        for plain in [
            "http://host:8000/v1",
            "no url at all",
            "",
            "mail a@b.c",
            "x://",
        ] {
            assert_eq!(redact(plain), plain);
        }
        // An @ after the authority is not a credential.
        assert_eq!(redact("http://h/v1/@me"), "http://h/v1/@me");
    }

    #[test]
    fn retry_after_reads_seconds_and_dates_and_never_panics() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        let s = |v: &str| retry_after(v, now);
        assert_eq!(s("120"), Some(Duration::from_secs(120)));
        assert_eq!(s(" 0 "), Some(Duration::ZERO));
        assert_eq!(s("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(s("1e20"), Some(Duration::MAX));
        assert_eq!(s("99999999999999999999999999"), Some(Duration::MAX));
        for bad in [
            "-1",
            "-0.5",
            "NaN",
            "inf",
            "-inf",
            "",
            "soon",
            "1e400",
            "Sun, 06 Nov",
        ] {
            assert_eq!(s(bad), None, "{bad}");
        }
        assert_eq!(s("Sun, 06 Nov 1994 08:49:37 GMT"), Some(Duration::ZERO));
        assert_eq!(
            s("Sun, 06 Nov 1994 08:50:07 GMT"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            s("Sunday, 06-Nov-94 08:51:37 GMT"),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            s("Sat, 05 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO),
            "past"
        );
        assert_eq!(
            s("Fri, 31 Dec 9999 23:59:59 GMT"),
            Some(Duration::from_secs(253_402_300_799 - 784_111_777))
        );
        assert_eq!(s("Sun, 06 Nov 1994 25:00:00 GMT"), None);
        assert_eq!(s("Sun, 06 Foo 1994 08:49:37 GMT"), None);
        assert_eq!(s("Sun, 06 Nov 1994 08:49:37 CET"), None);
    }
}
