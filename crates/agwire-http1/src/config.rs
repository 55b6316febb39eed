//! [`ServeConfig`]: the limits and timeouts of every connection.

use std::time::Duration;

/// Most headers a request may be configured to carry: `http::HeaderMap`
/// cannot hold many more (its capacity ends near 24,500), and no client
/// sends a thousandth of it.
pub const MAX_HEADERS_CEILING: usize = 8192;
/// Smallest request head limit: a request line and a `Host` header fit.
pub const MIN_HEAD_BYTES: usize = 256;

/// Limits and timeouts of each connection [`serve_with`](crate::serve_with)
/// accepts.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeConfig {
    /// Time a client has to send a request's head, counted from when the
    /// connection starts waiting for it: after connecting, and between
    /// requests on a kept-alive connection (so it is the idle timeout too).
    /// Also the longest pause inside a request body, and how long a handler
    /// that answered may go on reading its request's body. `None`: no
    /// deadline.
    pub header_read_timeout: Option<Duration>,
    /// Longest a write may wait for the client to take bytes: a client that
    /// stops reading (its TCP window stays shut, which keep-alive probes
    /// cannot tell from a live peer) would otherwise hold its connection,
    /// its response and the kernel's send buffer for as long as it likes.
    /// Past it the connection is reset and the response body dropped.
    /// Any progress restarts it. `None`: no deadline.
    pub write_timeout: Option<Duration>,
    /// Largest request head (request line and headers): 431 above it, or
    /// 414 when the request line alone does not fit. It also bounds what a
    /// connection reads ahead while waiting for a head, so it is the memory
    /// a connection can be made to hold (plus [`HEAD_SLACK`](crate::HEAD_SLACK)).
    /// At least [`MIN_HEAD_BYTES`].
    pub max_head_bytes: usize,
    /// Most headers in one request: 431 above it. At most
    /// [`MAX_HEADERS_CEILING`].
    pub max_headers: usize,
    /// Most connections open at once; past it the listener is not read, so
    /// new clients wait in the kernel's accept queue until one closes.
    /// `None`: no limit but the process's file descriptors.
    pub max_connections: Option<usize>,
    /// Most connections open at once from one client address: an IPv4
    /// address, or an IPv6 /64 (one host commonly holds a whole /64, so a
    /// single IPv6 address would be no limit); an IPv4-mapped IPv6 address
    /// counts as its IPv4 one. A connection past its address's share is
    /// answered at once with `503` and `retry-after: 1`, and closed: without
    /// it one client could hold every [`max_connections`](Self::max_connections)
    /// slot and lock everyone else out. At least 1. `None`, the default: no
    /// share — behind a reverse proxy every connection comes from the
    /// proxy's address, so a library default would refuse real clients.
    pub max_connections_per_peer: Option<usize>,
    /// TCP keep-alive probes after this long without traffic, to notice
    /// peers that vanished without closing (`None`: the system's default,
    /// usually off).
    pub tcp_keepalive: Option<Duration>,
    /// Once the shutdown begins, how long open connections get to finish
    /// their responses before `serve_with` returns anyway (`None`: as long
    /// as they take).
    pub drain_timeout: Option<Duration>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            header_read_timeout: Some(Duration::from_secs(30)),
            write_timeout: Some(Duration::from_secs(60)),
            max_head_bytes: 64 * 1024,
            max_headers: 100,
            max_connections: Some(10_000),
            max_connections_per_peer: None,
            tcp_keepalive: None,
            drain_timeout: None,
        }
    }
}

impl ServeConfig {
    /// [`ServeConfig::header_read_timeout`].
    #[must_use]
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// [`ServeConfig::write_timeout`].
    #[must_use]
    pub fn write_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// [`ServeConfig::max_head_bytes`].
    #[must_use]
    pub fn max_head_bytes(mut self, bytes: usize) -> Self {
        self.max_head_bytes = bytes;
        self
    }

    /// [`ServeConfig::max_headers`].
    #[must_use]
    pub fn max_headers(mut self, count: usize) -> Self {
        self.max_headers = count;
        self
    }

    /// [`ServeConfig::max_connections`].
    #[must_use]
    pub fn max_connections(mut self, count: Option<usize>) -> Self {
        self.max_connections = count;
        self
    }

    /// [`ServeConfig::max_connections_per_peer`].
    #[must_use]
    pub fn max_connections_per_peer(mut self, count: Option<usize>) -> Self {
        self.max_connections_per_peer = count;
        self
    }

    /// [`ServeConfig::tcp_keepalive`].
    #[must_use]
    pub fn tcp_keepalive(mut self, idle: Option<Duration>) -> Self {
        self.tcp_keepalive = idle;
        self
    }

    /// [`ServeConfig::drain_timeout`].
    #[must_use]
    pub fn drain_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// The head limit in force (fields are public, so it is clamped here).
    pub(crate) fn head_limit(&self) -> usize {
        self.max_head_bytes.max(MIN_HEAD_BYTES)
    }

    /// The per-peer share in force.
    pub(crate) fn peer_share(&self) -> Option<usize> {
        self.max_connections_per_peer.map(|n| n.max(1))
    }

    /// The header count in force.
    pub(crate) fn header_limit(&self) -> usize {
        self.max_headers.clamp(1, MAX_HEADERS_CEILING)
    }
}
