//! A minimal HTTP/1.1 client for exactly one thing: `POST /call` to the loopback host.
//!
//! Why not a crate: the request is one fixed shape to `127.0.0.1`, and owning the socket
//! lets every step honour one overall deadline (connect, write, read), refuse redirects,
//! and bound the response size. One request per connection (`Connection: close`), never
//! retried here or anywhere above.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The largest response accepted. A viewport screenshot as base64 is a few MiB; anything
/// far beyond that is not a tool result.
pub const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

/// Header block limit, so a peer cannot make us buffer endless header lines.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Bytes written per `write` call, so the deadline is rechecked while a slow peer reads.
const WRITE_CHUNK: usize = 16 * 1024;

/// What the host answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code from the status line.
    pub status: u16,
    /// The decoded body.
    pub body: Vec<u8>,
}

/// POSTs `body` (JSON) to `http://127.0.0.1:{port}/call` with the bearer `token`, all of it
/// within `timeout`. The error is a short cause for "Tool connection unavailable: …".
pub fn post_call(
    port: u16,
    token: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<HttpResponse, String> {
    let deadline = Instant::now() + timeout;
    let waited = describe(timeout);
    let mut stream = connect(port, deadline, &waited)?;
    let _ = stream.set_nodelay(true);

    let head = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    // A host may answer (e.g. 401) and close before taking the whole body; its answer is
    // still read when it arrived, and only then is the write failure reported.
    let write_failure = write_request(&mut stream, &request, deadline, &waited).err();
    let answer =
        read_until_complete(&mut stream, deadline, &waited).and_then(|raw| parse_response(&raw));
    match (answer, write_failure) {
        (Ok(answer), _) => Ok(answer),
        (Err(_), Some(write_failure)) => Err(write_failure),
        (Err(read_failure), None) => Err(read_failure),
    }
}

fn connect(port: u16, deadline: Instant, waited: &str) -> Result<TcpStream, String> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&address, remaining(deadline, waited)?).map_err(|e| {
        if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) {
            format!("no connection to {address} within {waited}")
        } else {
            format!("cannot connect to {address} ({e})")
        }
    })
}

fn write_request(
    stream: &mut TcpStream,
    request: &[u8],
    deadline: Instant,
    waited: &str,
) -> Result<(), String> {
    for chunk in request.chunks(WRITE_CHUNK) {
        stream
            .set_write_timeout(Some(remaining(deadline, waited)?))
            .map_err(|e| format!("cannot use the connection ({e})"))?;
        stream.write_all(chunk).map_err(|e| match e.kind() {
            ErrorKind::TimedOut | ErrorKind::WouldBlock => {
                format!("the host did not take the request within {waited}")
            }
            _ => format!("the host closed the connection while the request was sent ({e})"),
        })?;
    }
    Ok(())
}

/// How long is left before `deadline`, or the timeout cause when nothing is.
fn remaining(deadline: Instant, waited: &str) -> Result<Duration, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(format!("no answer within {waited}"))
    } else {
        Ok(left)
    }
}

fn describe(timeout: Duration) -> String {
    if timeout.subsec_millis() == 0 {
        format!("{} s", timeout.as_secs())
    } else {
        format!("{} ms", timeout.as_millis())
    }
}

/// Reads until the response is complete (by Content-Length or chunked framing), EOF, the
/// deadline, or the size cap.
fn read_until_complete(
    stream: &mut TcpStream,
    deadline: Instant,
    waited: &str,
) -> Result<Vec<u8>, String> {
    let mut raw = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        if response_is_complete(&raw) {
            return Ok(raw);
        }
        stream
            .set_read_timeout(Some(remaining(deadline, waited)?))
            .map_err(|e| format!("cannot use the connection ({e})"))?;
        match stream.read(&mut buffer) {
            Ok(0) => return Ok(raw),
            Ok(n) => {
                if raw.len() + n > MAX_RESPONSE_BYTES {
                    return Err(format!(
                        "the host's answer is larger than {MAX_RESPONSE_BYTES} bytes"
                    ));
                }
                raw.extend_from_slice(&buffer[..n]);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {
                return Err(format!("no answer within {waited}"));
            }
            Err(e) => {
                return Err(format!(
                    "the connection failed while reading the answer ({e})"
                ))
            }
        }
    }
}

/// The parsed status line and headers, and where the body starts.
struct Head {
    status: u16,
    content_length: Option<usize>,
    chunked: bool,
    body_start: usize,
}

fn find_head_end(raw: &[u8]) -> Option<usize> {
    raw.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn parse_head(raw: &[u8]) -> Result<Option<Head>, String> {
    let Some(body_start) = find_head_end(raw) else {
        if raw.len() > MAX_HEAD_BYTES {
            return Err("the host sent an oversized HTTP header".to_string());
        }
        return Ok(None);
    };
    let text = std::str::from_utf8(&raw[..body_start - 4])
        .map_err(|_| "the host sent a non-text HTTP header".to_string())?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let status = parts
        .next()
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|_| version.starts_with("HTTP/1."))
        .ok_or_else(|| "the host did not answer with HTTP/1.x".to_string())?;
    let mut content_length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| "the host sent an invalid Content-Length".to_string())?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    Ok(Some(Head {
        status,
        content_length,
        chunked,
        body_start,
    }))
}

fn response_is_complete(raw: &[u8]) -> bool {
    match parse_head(raw) {
        Ok(Some(head)) => {
            let body = &raw[head.body_start..];
            if head.chunked {
                matches!(decode_chunked(body), Ok(Some(_)))
            } else if let Some(length) = head.content_length {
                body.len() >= length
            } else {
                false // read to EOF
            }
        }
        Ok(None) => false,
        Err(_) => true, // stop reading; parse_response reports it
    }
}

/// Decodes a chunked body; `Ok(None)` while incomplete.
fn decode_chunked(mut body: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut decoded = Vec::new();
    loop {
        let Some(line_end) = body.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_text = std::str::from_utf8(&body[..line_end])
            .map_err(|_| "the host sent an invalid chunk size".to_string())?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| "the host sent an invalid chunk size".to_string())?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(Some(decoded));
        }
        if body.len() < size.saturating_add(2) {
            return Ok(None);
        }
        decoded.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

fn parse_response(raw: &[u8]) -> Result<HttpResponse, String> {
    if raw.is_empty() {
        return Err("the host closed the connection without answering".to_string());
    }
    let head = parse_head(raw)?.ok_or_else(|| {
        "the host closed the connection before its answer was complete".to_string()
    })?;
    let body = &raw[head.body_start..];
    let body = if head.chunked {
        decode_chunked(body)?.ok_or_else(|| {
            "the host closed the connection before its answer was complete".to_string()
        })?
    } else if let Some(length) = head.content_length {
        if body.len() < length {
            return Err(
                "the host closed the connection before its answer was complete".to_string(),
            );
        }
        body[..length].to_vec()
    } else {
        body.to_vec()
    };
    Ok(HttpResponse {
        status: head.status,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    #[test]
    fn parses_content_length_and_chunked_answers() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(
            parse_response(plain),
            Ok(HttpResponse {
                status: 200,
                body: b"hello".to_vec()
            })
        );
        let chunked = b"HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert!(response_is_complete(chunked));
        assert_eq!(parse_response(chunked).unwrap().body, b"abcde".to_vec());
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello";
        assert!(!response_is_complete(short));
        assert!(parse_response(short).is_err());
        assert!(parse_response(b"").is_err());
        assert!(parse_response(b"SSH-2.0-x\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
    }

    #[test]
    fn sends_the_fixed_request_shape() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            let mut buffer = [0u8; 4096];
            while !seen.ends_with(b"{}") {
                let n = socket.read(&mut buffer).unwrap();
                assert!(n > 0);
                seen.extend_from_slice(&buffer[..n]);
            }
            socket
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
            String::from_utf8(seen).unwrap()
        });
        let answer = post_call(port, "t0k", b"{}", Duration::from_secs(5)).unwrap();
        assert_eq!(answer.body, b"ok".to_vec());
        let request = server.join().unwrap();
        assert!(request.starts_with("POST /call HTTP/1.1\r\n"), "{request}");
        for header in [
            format!("Host: 127.0.0.1:{port}\r\n"),
            "Authorization: Bearer t0k\r\n".to_string(),
            "Content-Type: application/json\r\n".to_string(),
            "Content-Length: 2\r\n".to_string(),
            "Connection: close\r\n".to_string(),
        ] {
            assert!(request.contains(&header), "{header} missing from {request}");
        }
    }

    #[test]
    fn an_early_answer_is_read_even_when_the_body_was_not_taken() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            let mut buffer = [0u8; 1024];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buffer).unwrap();
                seen.extend_from_slice(&buffer[..n]);
            }
            let body = br#"{"ok":false,"error":"Unknown or revoked session"}"#;
            let head = format!(
                "HTTP/1.1 401 Unauthorized\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            socket.write_all(head.as_bytes()).unwrap();
            socket.write_all(body).unwrap();
            socket.shutdown(std::net::Shutdown::Write).unwrap();
            // Drain what the client still sends, as a host closing politely would.
            while socket.read(&mut buffer).map(|n| n > 0).unwrap_or(false) {}
        });
        let body = vec![b' '; 100_000];
        let answer = post_call(port, "t", &body, Duration::from_secs(5)).unwrap();
        assert_eq!(answer.status, 401);
        server.join().unwrap();
    }

    #[test]
    fn a_silent_peer_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let error = post_call(port, "t", b"{}", Duration::from_millis(300)).unwrap_err();
        assert!(error.contains("no answer within 300 ms"), "{error}");
        drop(listener);
    }
}
