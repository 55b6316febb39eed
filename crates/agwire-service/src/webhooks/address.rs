//! Which addresses a webhook may reach: public ones, unless
//! `allow_private`. Checked on the addresses a name resolves to, for every
//! connection (a resolver of our own in the client), so a name that
//! resolved to a public address at startup cannot be pointed at the
//! service's own network later (DNS rebinding); and on IP literals, which
//! are never resolved.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The URL's host when it is an IP literal.
pub(super) fn literal(url: &reqwest::Url) -> Option<IpAddr> {
    // (An IPv6 host is written in brackets.)
    let host = url.host_str()?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// Whether `ip` is a public unicast address: not loopback, private,
/// link-local (cloud metadata lives there), shared (CGNAT), unspecified,
/// broadcast, multicast or documentation; an IPv4-mapped IPv6 address is
/// judged as its IPv4 one.
pub(super) fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public_v4(v4),
            None => public_v6(v6),
        },
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    let shared = a == 100 && (64..128).contains(&b);
    let reserved = a == 0 || a >= 240;
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || shared
        || reserved)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let documentation = ip.segments()[0] == 0x2001 && ip.segments()[1] == 0x0db8;
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_unique_local()
        || ip.is_unicast_link_local()
        || documentation)
}

/// A resolver that drops the addresses a webhook may not reach, and fails
/// when none is left.
#[derive(Debug, Clone, Copy)]
pub(super) struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> =
                found.iter().copied().filter(|a| public(a.ip())).collect();
            if allowed.is_empty() {
                return Err(format!(
                    "{host} resolves only to loopback, private or link-local addresses ({}); set webhooks.allow_private = true to allow them",
                    found
                        .iter()
                        .map(|a| a.ip().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
                .into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_unicast_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.2.1",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!public(private.parse().unwrap()), "{private}");
        }
        for open in [
            "93.184.215.14",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(public(open.parse().unwrap()), "{open}");
        }
    }
}
