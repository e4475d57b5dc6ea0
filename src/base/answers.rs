//! Answers as bytes: one as tiny_http would write it, made in one buffer so that it goes
//! out in one write (`server::http` writes it through tiny_http's writer for the
//! connection), and one written straight to a socket that then closes.

use std::time::{SystemTime, UNIX_EPOCH};

use tiny_http::{HTTPVersion, Method, Request, StatusCode};

use super::civil_from_days;

/// The whole answer to `request`, as tiny_http's `respond` writes it for a JSON body under
/// 32 KiB: the status line in the request's HTTP version, `Server`, `Date`,
/// `Content-Type`, `Content-Length`, then the body (none for `HEAD`). Made in one buffer
/// and sent with one write: tiny_http parses five headers, formats each line and writes
/// it piece by piece, a fifth of an answer's cost. A larger body, which tiny_http sends
/// chunked, also goes with its length.
pub fn response_bytes(request: &Request, status: u16, body: &[u8], now: SystemTime) -> Vec<u8> {
    let HTTPVersion(major, minor) = *request.http_version();
    let reason = StatusCode(status).default_reason_phrase();
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    // Pieces and digits, not `write!`: formatting was most of this function's cost.
    let mut out = Vec::with_capacity(160 + body.len());
    out.extend_from_slice(b"HTTP/");
    for (number, then) in [
        (major.into(), "."),
        (minor.into(), " "),
        (status.into(), " "),
    ] {
        decimal(&mut out, number);
        out.extend_from_slice(then.as_bytes());
    }
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(b"\r\nServer: tiny-http (Rust)\r\nDate: ");
    out.extend_from_slice(&http_date(since_epoch.as_secs()));
    out.extend_from_slice(b"\r\nContent-Type: application/json\r\nContent-Length: ");
    decimal(&mut out, body.len());
    out.extend_from_slice(b"\r\n\r\n");
    if *request.method() != Method::Head {
        out.extend_from_slice(body);
    }
    out
}

/// Appends `n` in decimal.
fn decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[start..]);
}

/// `secs` after the Unix epoch as an HTTP date (RFC 9110's IMF-fixdate), e.g.
/// `Thu, 03 Dec 2026 07:45:00 GMT`: what tiny_http writes in its `Date` header.
pub fn http_date(secs: u64) -> [u8; 29] {
    const WEEKDAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: &[u8; 36] = b"JanFebMarAprMayJunJulAugSepOctNovDec";
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    // 1970-01-01 was a Thursday.
    out[..3].copy_from_slice(WEEKDAYS[(days % 7) as usize]);
    let month = 3 * (month as usize - 1);
    out[8..11].copy_from_slice(&MONTHS[month..month + 3]);
    let mut put = |at: usize, width: usize, mut n: u64| {
        for digit in out[at..at + width].iter_mut().rev() {
            *digit = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(5, 2, u64::from(day));
    put(12, 4, year.max(0) as u64);
    put(17, 2, rest / 3600);
    put(20, 2, rest / 60 % 60);
    put(23, 2, rest % 60);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiny_http::{Header, Response, TestRequest};

    /// Byte for byte what tiny_http writes, for every status we answer with, HTTP/1.0 and
    /// 1.1, `HEAD`, and bodies up to tiny_http's chunked threshold.
    #[test]
    fn answers_are_the_bytes_tiny_http_writes() {
        let versions = [HTTPVersion(1, 1), HTTPVersion(1, 0)];
        for (version, method) in versions.into_iter().flat_map(|v| {
            [
                (v.clone(), Method::Post),
                (v.clone(), Method::Get),
                (v, Method::Head),
            ]
        }) {
            for status in [200, 400, 401, 403, 408, 500, 503] {
                for size in [0, 1, 194, 781, 1023, 1024, 9000, 32_767] {
                    let body = vec![b'x'; size];
                    let request: Request = TestRequest::new()
                        .with_method(method.clone())
                        .with_http_version(version.clone())
                        .into();
                    let (ours, theirs) = loop {
                        let now = SystemTime::now();
                        let ours = response_bytes(&request, status, &body, now);
                        let json =
                            Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..]);
                        let mut theirs = Vec::new();
                        Response::from_data(body.clone())
                            .with_status_code(status)
                            .with_header(json.unwrap())
                            .raw_print(
                                &mut theirs,
                                version.clone(),
                                &[],
                                method == Method::Head,
                                None,
                            )
                            .unwrap();
                        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_secs();
                        // The same second on both sides (else the dates differ): again.
                        if secs(now) == secs(SystemTime::now()) {
                            break (ours, theirs);
                        }
                    };
                    assert_eq!(
                        String::from_utf8_lossy(&ours),
                        String::from_utf8_lossy(&theirs),
                        "{version} {method} {status}, {size} bytes"
                    );
                }
            }
        }
    }

    #[test]
    fn http_dates_are_imf_fixdates() {
        for (secs, date) in [
            (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
            (1_796_196_300, "Wed, 02 Dec 2026 07:25:00 GMT"),
            (4_102_444_799, "Thu, 31 Dec 2099 23:59:59 GMT"),
        ] {
            assert_eq!(String::from_utf8_lossy(&http_date(secs)), date);
        }
    }
}
