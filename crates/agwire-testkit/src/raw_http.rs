//! HTTP/1.1 spoken byte by byte over real TCP: what the connection tests of
//! agwire-http1 and agwire-server send and read. Every read is bounded, so a
//! server that hangs fails the test in seconds instead of holding it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sets its flag when dropped: put one in a response body, and the flag
/// says the body is gone.
#[derive(Debug)]
pub struct DropFlag(pub Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Sends `request` on a new connection, then reads until the server closes.
pub async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket.write_all(request).await.unwrap();
    read_to_end(&mut socket).await
}

/// Reads until the server closes the connection (or resets it); panics if
/// it has not within 20 seconds.
pub async fn read_to_end(socket: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(20), socket.read(&mut buf))
            .await
            .expect("the server closed in time")
        {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// Reads until `needle` has arrived (or the peer closed); returns all of it.
/// Panics if a read waits more than 10 seconds.
pub async fn read_until(socket: &mut TcpStream, needle: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains(needle) {
        let n = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buf))
            .await
            .expect("answer in time")
            .unwrap();
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// Whether `flag` is set within ten seconds, polled (what is waited for
/// takes milliseconds; the bound only ends a test that fails).
pub async fn comes_true(flag: &AtomicBool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if flag.load(Ordering::SeqCst) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// The status codes of the HTTP/1.1 answers in `text`, in order.
pub fn statuses(text: &str) -> Vec<&str> {
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12))
        .collect()
}
