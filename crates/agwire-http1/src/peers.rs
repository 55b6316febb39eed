//! The per-peer share of the connection slots
//! ([`ServeConfig::max_connections_per_peer`]): what a client's connections
//! are counted under, the counts, and the answer to a connection past its
//! share.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::ServeConfig;
use crate::transport::Transport;
use crate::writer;

/// The answer to a connection past its address's share: complete and
/// fixed, so that refusing costs no allocation and reads nothing first.
pub(crate) const TOO_MANY_FROM_PEER: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
content-length: 51\r\n\
connection: close\r\n\
retry-after: 1\r\n\
\r\n\
{\"detail\":\"too many connections from this address\"}";

/// Refusals under way at once (each is a socket and a small task until its
/// client closes or the linger ends). Past it a connection over its share
/// is closed unanswered: a client that keeps its refused connections open
/// must not turn refusals into a file-descriptor flood.
const REFUSALS_MAX: usize = 128;
/// How long a refused client gets to take the answer and close when
/// [`ServeConfig::header_read_timeout`] is `None`; otherwise that timeout.
const REFUSAL_LINGER: Duration = Duration::from_secs(10);
/// Bytes a refused client may send (its request) that are read and dropped
/// before the socket is closed: closing with unread bytes sends a reset,
/// which can destroy the answer before the client has read it.
const REFUSAL_DRAIN_MAX: usize = 64 * 1024;
/// Least time between two warnings that an address hit its share, so that
/// a client cannot flood the log by opening connections.
const WARNING_INTERVAL: Duration = Duration::from_secs(5);

/// What one client's connections are counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PeerKey {
    /// One IPv4 address (IPv4-mapped IPv6 addresses included).
    V4(Ipv4Addr),
    /// An IPv6 /64, its last 64 bits zero: a host is commonly given a whole
    /// /64 and can take any address in it, so counting single addresses
    /// would be no limit.
    V6Net(Ipv6Addr),
}

impl From<IpAddr> for PeerKey {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self::V4(v4),
            // A dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d:
            // the same client as on an IPv4 listener. (Not `to_ipv4`, which
            // also maps the deprecated ::a.b.c.d, a real IPv6 address.)
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self::V4(v4),
                None => Self::V6Net(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
            },
        }
    }
}

impl fmt::Display for PeerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4(v4) => write!(f, "{v4}"),
            Self::V6Net(net) => write!(f, "{net}/64"),
        }
    }
}

/// The open connections of each peer with any open, against a share.
#[derive(Debug)]
pub(crate) struct PeerShares {
    share: usize,
    /// Only peers with a connection open: an entry goes when its count
    /// reaches 0, so the map holds at most one entry per open connection.
    open: Mutex<HashMap<PeerKey, usize>>,
}

impl PeerShares {
    pub(crate) fn new(share: usize) -> Arc<Self> {
        Arc::new(Self {
            share: share.max(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn share(&self) -> usize {
        self.share
    }

    /// A slot in `key`'s share, held until dropped; `None` when the share
    /// is all taken.
    pub(crate) fn admit(self: &Arc<Self>, key: PeerKey) -> Option<PeerSlot> {
        let mut open = self.lock();
        let count = open.entry(key).or_insert(0);
        // An entry is only ever left here with a count of at least 1: a
        // refusal finds the share (>= 1) taken, so the entry was there.
        if *count >= self.share {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            shares: self.clone(),
            key,
        })
    }

    /// Connections open from `key`.
    #[cfg(test)]
    fn open(&self, key: PeerKey) -> usize {
        self.lock().get(&key).copied().unwrap_or(0)
    }

    /// Peers with a connection open.
    #[cfg(test)]
    fn peers(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<PeerKey, usize>> {
        // Nothing panics while the lock is held (a count changes by one);
        // were it poisoned, the map would still be whole.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One open connection counted in its peer's share: dropping it (however
/// the connection ends, a panic included) gives the slot back, once.
#[derive(Debug)]
pub(crate) struct PeerSlot {
    shares: Arc<PeerShares>,
    key: PeerKey,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.shares.lock();
        if let Entry::Occupied(mut entry) = open.entry(self.key) {
            let count = entry.get_mut();
            *count = count.saturating_sub(1);
            if *count == 0 {
                entry.remove();
            }
        }
    }
}

/// When to warn that an address hit its share: at most once per
/// [`WARNING_INTERVAL`], with the refusals since the last warning.
#[derive(Debug, Default)]
struct RefusalLog {
    last: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    /// Counts a refusal at `now`: `Some(refusals since the last warning,
    /// this one included)` when a warning is due.
    fn refused(&mut self, now: Instant) -> Option<u64> {
        self.unlogged += 1;
        let due = self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= WARNING_INTERVAL);
        if !due {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged))
    }
}

/// Refuses connections past their peer's share: one answer task each, at
/// most [`REFUSALS_MAX`] at once, and a warning now and then.
#[derive(Debug)]
pub(crate) struct Refuser {
    under_way: Arc<Semaphore>,
    log: RefusalLog,
}

impl Default for Refuser {
    fn default() -> Self {
        Self {
            under_way: Arc::new(Semaphore::new(REFUSALS_MAX)),
            log: RefusalLog::default(),
        }
    }
}

impl Refuser {
    /// Refuses `tcp`, from `key` whose `share` is taken, in a task of
    /// `tasks` (so that the server's drain waits for it, and ends it).
    pub(crate) fn refuse(
        &mut self,
        tcp: TcpStream,
        key: PeerKey,
        share: usize,
        config: &Arc<ServeConfig>,
        draining: &CancellationToken,
        tasks: &TaskTracker,
    ) {
        if let Some(refused) = self.log.refused(Instant::now()) {
            tracing::warn!(
                peer = %key,
                share,
                refused,
                "a client address holds its share of the connections; refusing more with 503"
            );
        }
        let Ok(under_way) = self.under_way.clone().try_acquire_owned() else {
            tracing::debug!(peer = %key, "too many refusals under way; closed unanswered");
            return;
        };
        let config = config.clone();
        let draining = draining.clone();
        tasks.spawn(async move {
            refuse(tcp, &config, &draining).await;
            drop(under_way);
        });
    }
}

/// Answers a connection past its peer's share with [`TOO_MANY_FROM_PEER`]
/// and closes it so that the client reads the answer rather than a reset:
/// the write side is shut down, then what the client sends is read and
/// dropped until it closes. Every step is bounded: the write by the write
/// timeout, the rest by the header read timeout (a client's time to send a
/// head), and all of it ends when the server drains.
async fn refuse<T: Transport>(mut io: T, config: &ServeConfig, draining: &CancellationToken) {
    let linger = config.header_read_timeout.unwrap_or(REFUSAL_LINGER);
    let write_limit = Some(config.write_timeout.map_or(linger, |w| w.min(linger)));
    let answered = async {
        writer::write_all(&mut io, TOO_MANY_FROM_PEER, &mut 0, write_limit).await?;
        writer::within(write_limit, io.shutdown()).await
    };
    match answered.await {
        Ok(Ok(())) => {}
        // A client that does not take 200 bytes will not take a FIN either.
        Err(writer::End::Stalled) => {
            io.reset();
            return;
        }
        Ok(Err(_)) | Err(_) => return,
    }
    let drain = async {
        let mut scratch = [0u8; 1024];
        let mut left = REFUSAL_DRAIN_MAX;
        while left > 0 {
            match io.read(&mut scratch).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    tokio::select! {
        _ = tokio::time::timeout(linger, drain) => {}
        () = draining.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ip: &str) -> PeerKey {
        PeerKey::from(ip.parse::<IpAddr>().unwrap())
    }

    #[test]
    fn ipv4_counts_per_address() {
        assert_eq!(key("192.0.2.1"), PeerKey::V4(Ipv4Addr::new(192, 0, 2, 1)));
        assert_ne!(key("192.0.2.1"), key("192.0.2.2"));
    }

    #[test]
    fn ipv6_counts_per_64() {
        // Same /64, any interface id: one peer.
        assert_eq!(
            key("2001:db8:1:2::1"),
            key("2001:db8:1:2:ffff:ffff:ffff:ffff")
        );
        assert_eq!(key("2001:db8:1:2:a:b:c:d"), key("2001:db8:1:2::"));
        // The next /64, or a bit flipped anywhere in the first 64: another.
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db9:1:2::1"));
        assert_eq!(key("2001:db8:1:2:a:b:c:d").to_string(), "2001:db8:1:2::/64");
        assert_eq!(key("::1"), PeerKey::V6Net(Ipv6Addr::UNSPECIFIED));
    }

    #[test]
    fn ipv4_mapped_ipv6_counts_as_ipv4() {
        assert_eq!(key("::ffff:192.0.2.1"), key("192.0.2.1"));
        assert_ne!(key("::ffff:192.0.2.1"), key("::ffff:192.0.2.2"));
        assert_eq!(key("::ffff:192.0.2.1").to_string(), "192.0.2.1");
        // Two mapped addresses share a /64 but are two IPv4 clients: the
        // mapping is looked at before the prefix.
        assert_ne!(key("::ffff:10.0.0.1"), key("::ffff:10.0.0.2"));
        // The deprecated IPv4-compatible form is an IPv6 address.
        assert!(matches!(key("::192.0.2.1"), PeerKey::V6Net(_)));
    }

    #[test]
    fn a_share_admits_its_count_and_each_close_gives_one_back() {
        let shares = PeerShares::new(2);
        let a = key("192.0.2.1");
        let first = shares.admit(a).unwrap();
        let second = shares.admit(a).unwrap();
        assert!(shares.admit(a).is_none(), "a third past a share of two");
        assert_eq!(shares.open(a), 2, "a refusal is not counted");
        // Another address is not affected.
        let other = shares.admit(key("192.0.2.2")).unwrap();
        drop(first);
        assert_eq!(shares.open(a), 1);
        let third = shares.admit(a).unwrap();
        assert!(shares.admit(a).is_none());
        drop((second, third, other));
        assert_eq!(shares.open(a), 0);
        assert_eq!(shares.peers(), 0, "entries at 0 are removed");
    }

    #[test]
    fn a_share_of_zero_is_one() {
        let shares = PeerShares::new(0);
        let held = shares.admit(key("192.0.2.1")).unwrap();
        assert!(shares.admit(key("192.0.2.1")).is_none());
        drop(held);
    }

    #[test]
    fn the_map_holds_only_peers_with_open_connections() {
        let shares = PeerShares::new(3);
        for i in 0..10_000u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(i));
            let slot = shares.admit(PeerKey::from(ip)).unwrap();
            drop(slot);
        }
        assert_eq!(shares.peers(), 0);
    }

    #[test]
    fn a_connection_that_panics_gives_its_slot_back() {
        let shares = PeerShares::new(1);
        let a = key("192.0.2.1");
        let slot = shares.admit(a).unwrap();
        let panicked = std::thread::spawn(move || {
            let _slot = slot;
            panic!("the connection failed");
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!(shares.open(a), 0);
        assert!(shares.admit(a).is_some());
    }

    #[test]
    fn the_refusal_is_a_complete_response() {
        let text = std::str::from_utf8(TOO_MANY_FROM_PEER).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert_eq!(
            body,
            r#"{"detail":"too many connections from this address"}"#
        );
        assert!(head.contains(&format!("\r\ncontent-length: {}\r\n", body.len())));
        serde_json::from_str::<serde_json::Value>(body).unwrap();
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let parsed = httparse::Response::new(&mut headers)
            .parse(TOO_MANY_FROM_PEER)
            .unwrap();
        assert_eq!(parsed, httparse::Status::Complete(head.len() + 4));
    }

    #[test]
    fn the_warning_comes_at_most_once_per_interval() {
        let mut log = RefusalLog::default();
        let start = Instant::now();
        assert_eq!(log.refused(start), Some(1));
        assert_eq!(log.refused(start + Duration::from_millis(1)), None);
        assert_eq!(log.refused(start + WARNING_INTERVAL / 2), None);
        // The next warning counts the refusals it stood for.
        assert_eq!(log.refused(start + WARNING_INTERVAL), Some(3));
        assert_eq!(log.refused(start + WARNING_INTERVAL), None);
    }
}
