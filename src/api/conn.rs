//! The connection hyper serves: a TCP stream whose writes are watched for the bare error
//! responses hyper answers by itself, before any route sees the request (400 for a request it
//! cannot parse, 414 for a target over 64 KiB, 431 for a head over its read buffer); each is
//! replaced by the problem+json every other error of the API is.

use super::error::ApiError;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub(super) struct Watched {
    inner: TcpStream,
    /// A replacement being written: its bytes, how many are out, and how many of hyper's bytes
    /// it stands for.
    replacing: Option<(Vec<u8>, usize, usize)>,
}

impl Watched {
    pub(super) fn new(inner: TcpStream) -> Watched {
        Watched { inner, replacing: None }
    }
}

/// The error hyper's own response in `buf` stands for: a response head of status 400, 414 or
/// 431 without a content type (every response of the API's routes has one).
fn hypers_own(buf: &[u8]) -> Option<ApiError> {
    let rest = buf.strip_prefix(b"HTTP/1.1 ")?;
    let error = match rest.get(..4)? {
        b"400 " => ApiError::UnparsableRequest,
        b"414 " => ApiError::UriTooLong(super::MAX_URI_BYTES),
        b"431 " => ApiError::HeadTooLarge,
        _ => return None,
    };
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = buf[..end].to_ascii_lowercase();
    (!head.windows(13).any(|w| w == b"content-type:")).then_some(error)
}

/// `e` as a whole HTTP/1.1 response that closes the connection.
fn response(e: &ApiError) -> Vec<u8> {
    let status = e.status();
    let body = e.problem_json();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = &mut *self;
        if me.replacing.is_none()
            && let Some(e) = hypers_own(buf)
        {
            me.replacing = Some((response(&e), 0, buf.len()));
        }
        // A write left pending is called again with the same bytes: the replacement goes on.
        let Some((bytes, out, stands_for)) = &mut me.replacing else {
            return Pin::new(&mut me.inner).poll_write(cx, buf);
        };
        while *out < bytes.len() {
            match ready!(Pin::new(&mut me.inner).poll_write(cx, &bytes[*out..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => *out += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        let n = *stands_for;
        me.replacing = None;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
