//! One scrape request: its head parsed (bounded in size and time), its answer built; the
//! serving thread ([`super::http`]) does the non-blocking reads and writes.
//!
//! Only what a scraper needs of HTTP/1.1: `GET` or `HEAD` of `/metrics` (any query string)
//! gets the exposition text; anything else gets a short error status. Every answer says
//! `Connection: close`. A request head may be at most [`MAX_HEAD`] bytes and must arrive
//! within [`READ_LIMIT`]; the answer must be taken within [`WRITE_LIMIT`]. A client that
//! breaks these limits loses its connection; until then it holds one connection slot, never a
//! thread.

use std::sync::Arc;
use std::time::Duration;

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
    /// `POST /dump`: a flight-recorder dump (`Builder::metrics_dump`).
    Dump,
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
    let path = target.split('?').next().unwrap_or(target);
    if method == "POST" && path == "/dump" {
        return Request::Dump;
    }
    let head = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Request::MethodNotAllowed,
    };
    if path == "/metrics" {
        Request::Metrics { head }
    } else {
        Request::NotFound
    }
}

/// Where the head ends (after its blank line), if it has; the blank line starts at `from`
/// or later.
pub(crate) fn head_end(buf: &[u8], from: usize) -> Option<usize> {
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

/// A request read (or the reason it could not be), before its answer is built.
pub(crate) enum Pending {
    /// A complete head, parsed.
    Parsed(Request),
    /// More than [`MAX_HEAD`] bytes without a blank line.
    TooLarge,
}

impl Pending {
    /// The answer; `text` gives the exposition text when the request wants it, `dump`
    /// starts a dump (`None`: not served).
    pub(crate) fn resolve(
        self,
        text: impl FnOnce() -> Arc<str>,
        dump: impl FnOnce() -> Option<Result<String, String>>,
    ) -> Answer {
        let request = match self {
            Pending::Parsed(r) => r,
            Pending::TooLarge => {
                return Answer::short("431 Request Header Fields Too Large", "", b"")
            }
        };
        match request {
            Request::Metrics { head } => {
                let body = text();
                let head_bytes = head_of(
                    "200 OK",
                    "text/plain; version=0.0.4; charset=utf-8",
                    body.len(),
                    "",
                );
                Answer {
                    head: head_bytes,
                    body: (!head).then_some(body),
                }
            }
            // The dump is written in the background: the answer names its file at once, and
            // the file appears there, whole, when it is done.
            Request::Dump => match dump() {
                Some(Ok(file)) => Answer::short("202 Accepted", "", format!("{file}\n").as_bytes()),
                Some(Err(why)) => {
                    Answer::short("503 Service Unavailable", "", format!("{why}\n").as_bytes())
                }
                None => Answer::short("404 Not Found", "", b"dumps are not served here\n"),
            },
            Request::NotFound => Answer::short("404 Not Found", "", b"try /metrics\n"),
            Request::MethodNotAllowed => Answer::short(
                "405 Method Not Allowed",
                "Allow: GET, HEAD\r\n",
                b"GET or HEAD /metrics\n",
            ),
            Request::Bad => Answer::short("400 Bad Request", "", b"bad request\n"),
        }
    }
}

/// The whole answer to one connection: a head (with any short body) and the shared metrics
/// text, if it is sent.
pub(crate) struct Answer {
    head: Vec<u8>,
    body: Option<Arc<str>>,
}

impl Answer {
    /// A short plain-text answer.
    fn short(status: &str, extra: &str, body: &[u8]) -> Answer {
        let mut head = head_of(status, "text/plain; charset=utf-8", body.len(), extra);
        head.extend_from_slice(body);
        Answer { head, body: None }
    }

    /// What is left to send after `written` bytes; `None` when all is out.
    pub(crate) fn rest(&self, written: usize) -> Option<&[u8]> {
        let body = self.body.as_deref().map_or(&b""[..], str::as_bytes);
        let rest = if written < self.head.len() {
            &self.head[written..]
        } else {
            &body[(written - self.head.len()).min(body.len())..]
        };
        (!rest.is_empty()).then_some(rest)
    }
}

/// The answer to a connection beyond the endpoint's limit.
pub(crate) const UNAVAILABLE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 21\r\nRetry-After: 1\r\n\
    Connection: close\r\n\r\ntoo many connections\n";

fn head_of(status: &str, kind: &str, length: usize, extra: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {length}\r\n{extra}\
         Connection: close\r\n\r\n"
    )
    .into_bytes()
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
