//! [`Transport`]: what a connection runs over.

use tokio::io::{AsyncRead, AsyncWrite};

/// A byte stream a connection can serve: a TCP socket, a TLS stream over
/// one, or an in-memory pipe in tests.
///
/// Everything a connection needs is `AsyncRead + AsyncWrite`; the one
/// extra is [`Transport::reset`], for a client that stopped reading.
pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Makes the coming close a reset that drops whatever is still queued
    /// for the peer. Called for a client that stopped reading: it would not
    /// take a FIN either, and the kernel would go on holding its bytes.
    /// The default does nothing (the stream is shut down and dropped).
    fn reset(&mut self) {}
}

impl Transport for tokio::net::TcpStream {
    fn reset(&mut self) {
        // SO_LINGER 0: close() sends RST and frees the send queue.
        let _ = self.set_zero_linger();
    }
}

#[cfg(unix)]
impl Transport for tokio::net::UnixStream {}

impl Transport for tokio::io::DuplexStream {}
