//! One scrape connection: read a request head (bounded in size and time), answer it, close.
//!
//! Only what a scraper needs of HTTP/1.1: `GET` or `HEAD` of `/metrics` (any query string)
//! gets the exposition text; anything else gets a short error status. Every answer says
//! `Connection: close`. A request head may be at most [`MAX_HEAD`] bytes and must arrive
//! within [`READ_LIMIT`]; the answer must be taken within [`WRITE_LIMIT`]. A client that
//! breaks these limits loses its connection; it never holds more than one worker for longer.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// Largest request head accepted (request line and headers).
pub(crate) const MAX_HEAD: usize = 8192;
/// Time a client has to send its request head.
pub(crate) const READ_LIMIT: Duration = Duration::from_secs(5);
/// Time a client has to take the whole answer.
pub(crate) const WRITE_LIMIT: Duration = Duration::from_secs(10);

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// The metrics (`HEAD`: without the body).
    Metrics { head: bool },
    /// Another path.
    NotFound,
    /// Another method.
    MethodNotAllowed,
    /// Not an HTTP/1.x request line.
    Bad,
}

/// Parses a request head (everything before the blank line).
pub(crate) fn parse(head: &[u8]) -> Request {
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let Ok(line) = std::str::from_utf8(&head[..line_end]) else {
        return Request::Bad;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Request::Bad;
    };
    let token = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic());
    if !token(method) || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return Request::Bad;
    }
    let head = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Request::MethodNotAllowed,
    };
    let path = target.split('?').next().unwrap_or(target);
    if path == "/metrics" {
        Request::Metrics { head }
    } else {
        Request::NotFound
    }
}

/// Where the head ends (after its blank line), if it has; the blank line starts at `from`
/// or later.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find_map(|i| {
        if buf[i..].starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if buf[i..].starts_with(b"\n\n") {
            Some(i + 2)
        } else {
            None
        }
    })
}

/// How reading a head ended.
enum Head {
    /// The head, `len` bytes of the buffer.
    Complete(usize),
    /// More than [`MAX_HEAD`] bytes without a blank line.
    TooLarge,
    /// The client closed, timed out or failed: nothing to answer.
    Gone,
}

fn read_head(stream: &mut TcpStream, buf: &mut [u8; MAX_HEAD]) -> Head {
    let deadline = Instant::now() + READ_LIMIT;
    let (mut len, mut scanned) = (0, 0);
    loop {
        if let Some(end) = head_end(&buf[..len], scanned) {
            return Head::Complete(end);
        }
        // A blank line split across reads starts at most 3 bytes before the end.
        scanned = len.saturating_sub(3);
        if len == buf.len() {
            return Head::TooLarge;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Head::Gone;
        }
        match stream.read(&mut buf[len..]) {
            Ok(0) => return Head::Gone,
            Ok(n) => len += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Head::Gone,
        }
    }
}

/// Writes all of `parts` before `deadline`; false when the client did not take them.
fn write_all_by(stream: &mut TcpStream, parts: &[&[u8]], deadline: Instant) -> bool {
    for part in parts {
        let mut rest = *part;
        while !rest.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || stream.set_write_timeout(Some(left)).is_err() {
                return false;
            }
            match stream.write(rest) {
                Ok(0) => return false,
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
    true
}

/// Serves one connection; `text` gives the exposition text when the request wants it.
pub(crate) fn serve(mut stream: TcpStream, text: impl FnOnce() -> std::sync::Arc<str>) {
    let mut buf = [0u8; MAX_HEAD];
    let request = match read_head(&mut stream, &mut buf) {
        Head::Complete(len) => parse(&buf[..len]),
        Head::TooLarge => {
            answer(&mut stream, "431 Request Header Fields Too Large", "", b"");
            return;
        }
        Head::Gone => return,
    };
    match request {
        Request::Metrics { head } => {
            let body = text();
            let body_bytes = if head { &b""[..] } else { body.as_bytes() };
            respond(
                &mut stream,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                body.len(),
                "",
                body_bytes,
            );
        }
        Request::NotFound => answer(&mut stream, "404 Not Found", "", b"try /metrics\n"),
        Request::MethodNotAllowed => answer(
            &mut stream,
            "405 Method Not Allowed",
            "Allow: GET, HEAD\r\n",
            b"GET or HEAD /metrics\n",
        ),
        Request::Bad => answer(&mut stream, "400 Bad Request", "", b"bad request\n"),
    }
}

/// A short plain-text answer.
fn answer(stream: &mut TcpStream, status: &str, extra: &str, body: &[u8]) {
    let kind = "text/plain; charset=utf-8";
    respond(stream, status, kind, body.len(), extra, body);
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    kind: &str,
    length: usize,
    extra: &str,
    body: &[u8],
) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {length}\r\n{extra}\
         Connection: close\r\n\r\n"
    );
    let deadline = Instant::now() + WRITE_LIMIT;
    if write_all_by(stream, &[head.as_bytes(), body], deadline) {
        let _ = stream.shutdown(Shutdown::Write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_scrapers_send() {
        let prom = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n";
        assert_eq!(parse(prom), Request::Metrics { head: false });
        assert_eq!(
            parse(b"HEAD /metrics?x=1 HTTP/1.0\n\n"),
            Request::Metrics { head: true }
        );
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n"), Request::NotFound);
        assert_eq!(parse(b"GET /metricsx HTTP/1.1\r\n\r\n"), Request::NotFound);
        assert_eq!(
            parse(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Request::MethodNotAllowed
        );
    }

    #[test]
    fn garbage_is_a_bad_request() {
        for head in [
            &b"\r\n\r\n"[..],
            b"GET /metrics\r\n\r\n",
            b"GET /metrics HTTP/2.0\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"G\xffT /metrics HTTP/1.1\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"GET /metrics HTTP/1.1 extra\r\n\r\n",
        ] {
            assert_eq!(parse(head), Request::Bad, "{head:?}");
        }
    }

    #[test]
    fn finds_the_end_of_a_head() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody", 14), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
    }
}
