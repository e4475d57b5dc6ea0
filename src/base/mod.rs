//! The small helpers the server and the default host share: private files (`files`),
//! random ids, hex and 32-byte secrets, locks that survive a panic, and what tiny_http
//! does not offer: socket calls (`sockets`, `listening`) and one-write answers (`answers`); and
//! text escaped for a terminal (`terminal_text`). It depends on nothing else of ours
//! (but `protocol`'s node-id rule), so `host` needs `server` only for the server's API.

pub mod answers;
pub mod files;
pub mod listening;
pub mod sockets;
pub mod terminal_text;

use std::io;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes in a session token or the canvas view's key (64 hex characters).
pub const SECRET_BYTES: usize = 32;

/// Locks `mutex`, taking the data even if a thread panicked while holding it: every
/// mutex here guards plain data that a panic cannot leave half-written.
pub fn lock_or_recover<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `bytes` random bytes from the OS CSPRNG, in lowercase hex.
pub fn random_hex(bytes: usize) -> io::Result<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::getrandom(&mut buf)
        .map_err(|e| io::Error::other(format!("no random bytes: {e}")))?;
    Ok(to_hex(&buf))
}

/// 128 random bits as hex. The bits come from the OS, 4 KiB at a time (one
/// `getrandom` per 256 ids instead of one per canvas call); each is used once.
pub fn random_id() -> String {
    const ID_BYTES: usize = 16;
    static POOL: Mutex<(Vec<u8>, usize)> = Mutex::new((Vec::new(), 0));
    let mut pool = lock_or_recover(&POOL);
    let (bytes, used) = &mut *pool;
    if *used + ID_BYTES > bytes.len() {
        bytes.resize(4096, 0);
        if getrandom::getrandom(bytes).is_err() {
            bytes.clear();
        }
        *used = 0;
    }
    match bytes.get(*used..*used + ID_BYTES) {
        Some(id) => {
            let id = to_hex(id);
            *used += ID_BYTES;
            id
        }
        None => {
            // No OS randomness: fall back to time and a counter, still unique in-process.
            static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            format!("{:016x}{n:016x}", unix_millis())
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        hex.push(char::from(DIGITS[usize::from(b >> 4)]));
        hex.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    hex
}

/// Decodes a secret of exactly 64 lowercase hex characters.
pub fn decode_secret(text: &str) -> Option<[u8; SECRET_BYTES]> {
    let hex = text.as_bytes();
    if hex.len() != SECRET_BYTES * 2 {
        return None;
    }
    let mut out = [0u8; SECRET_BYTES];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = (hex_digit(hex[2 * i])? << 4) | hex_digit(hex[2 * i + 1])?;
    }
    Some(out)
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Compares two secrets in time independent of their contents.
pub fn constant_time_eq(a: &[u8; SECRET_BYTES], b: &[u8; SECRET_BYTES]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        diff |= x ^ y;
    }
    // black_box keeps the optimiser from turning the loop into an early-exit compare.
    std::hint::black_box(diff) == 0
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
