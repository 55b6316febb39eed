//! What a web page on another site can make the user's browser do, refused:
//! the two attacks a service on the user's own machine meets first.
//!
//! - **DNS rebinding**: a page at `http://rebind.attacker.example:8080`
//!   whose name then resolves to `127.0.0.1` reads whatever this service
//!   answers, as its own origin. Its requests carry that name in `Host`, so
//!   without authentication (where nothing else stands in the way) only
//!   the names the service is reached by are served: loopback names, IP
//!   addresses (an address cannot be rebound), the `public_url`'s host and
//!   `http.allowed_hosts` — what Vite's `server.allowedHosts` does by
//!   default. With an allow-list configured, it applies in every mode.
//! - **Cross-site requests**: a page can POST to any address without
//!   reading the answer (`text/plain`, a form, `mode: "no-cors"`). A
//!   state-changing request whose `Sec-Fetch-Site` or `Origin` says another
//!   origin sent it is refused unless that origin is trusted (the CORS
//!   allow-list, the `public_url`'s origin), in every mode — the rule of
//!   Go's `http.CrossOriginProtection`. Requests without either header
//!   come from no browser and pass (curl, SDKs).
//!
//! Both answer 403 `{"detail"}` before the request reaches a handler.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;

/// The rules, built once from the settings.
#[derive(Debug, Clone)]
pub(crate) struct Browsers(Arc<Rules>);

#[derive(Debug)]
struct Rules {
    /// `None`: every `Host` is served (authentication on, no allow-list).
    hosts: Option<Vec<HostPattern>>,
    /// Origins whose pages may change state, beyond the service's own.
    origins: Trusted,
}

/// One entry of the host allow-list.
#[derive(Debug, PartialEq, Eq)]
enum HostPattern {
    /// Any host (`*`).
    Any,
    /// This name.
    Exact(String),
    /// This domain and its subdomains (`.example.com`).
    Domain(String),
}

#[derive(Debug)]
enum Trusted {
    /// CORS allows every origin (`*`).
    Any,
    /// These origins (normalized).
    List(Vec<Origin>),
}

/// An origin, normalized: scheme, lowercase host, port (the scheme's
/// default when absent).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    /// `scheme://host[:port]` (anything after the authority ignored, so a
    /// `public_url` with a path reads as its origin).
    fn parse(text: &str) -> Option<Self> {
        let (scheme, rest) = text.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        let default = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        let (host, port) = split_authority(authority)?;
        Some(Self {
            scheme,
            host,
            port: port.unwrap_or(default),
        })
    }
}

/// A `host[:port]` authority as (lowercase host without brackets or a
/// trailing dot, port).
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() || authority.contains('@') {
        return None;
    }
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    Some((host, port))
}

impl Browsers {
    /// The rules for a service with (`authenticated`) or without tokens.
    pub(crate) fn new(
        authenticated: bool,
        allowed_hosts: &[String],
        cors_allowed_origins: &[String],
        public_url: Option<&str>,
    ) -> Self {
        let public = public_url.and_then(Origin::parse);
        let hosts = (!authenticated || !allowed_hosts.is_empty()).then(|| {
            let mut patterns: Vec<HostPattern> = allowed_hosts
                .iter()
                .map(|entry| {
                    let entry = entry.trim().trim_end_matches('.').to_ascii_lowercase();
                    if entry == "*" {
                        HostPattern::Any
                    } else if let Some(domain) = entry.strip_prefix('.') {
                        HostPattern::Domain(domain.to_owned())
                    } else {
                        HostPattern::Exact(entry)
                    }
                })
                .collect();
            if let Some(public) = &public {
                patterns.push(HostPattern::Exact(public.host.clone()));
            }
            patterns
        });
        let origins = if cors_allowed_origins.iter().any(|o| o == "*") {
            Trusted::Any
        } else {
            Trusted::List(
                cors_allowed_origins
                    .iter()
                    .filter_map(|o| Origin::parse(o))
                    .chain(public)
                    .collect(),
            )
        };
        Self(Arc::new(Rules { hosts, origins }))
    }

    /// Whether a request naming `host` (a `Host` value) is served.
    fn host_allowed(&self, host: &str) -> bool {
        let Some(patterns) = &self.0.hosts else {
            return true;
        };
        let Some((name, _)) = split_authority(host) else {
            return false;
        };
        // Loopback names and every address: nothing a page can rebind.
        if name == "localhost" || name.ends_with(".localhost") || name.parse::<IpAddr>().is_ok() {
            return true;
        }
        patterns.iter().any(|pattern| match pattern {
            HostPattern::Any => true,
            HostPattern::Exact(exact) => *exact == name,
            HostPattern::Domain(domain) => {
                name == *domain
                    || name
                        .strip_suffix(domain.as_str())
                        .is_some_and(|sub| sub.ends_with('.'))
            }
        })
    }

    /// Why a request must be refused as sent by another site's page, if it
    /// must.
    fn cross_site(&self, method: &Method, headers: &HeaderMap) -> Option<String> {
        if matches!(
            *method,
            Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
        ) {
            return None;
        }
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let origin = text("origin");
        match text("sec-fetch-site") {
            // The browser itself says who sent it.
            Some("same-origin" | "none") => return None,
            Some(_) => {}
            // Not a browser (or one too old to say): without an Origin
            // either, nothing suggests a page sent it.
            None => {
                let origin = origin?;
                if let (Some(from), Some(host)) = (Origin::parse(origin), text("host"))
                    && let Some((name, port)) = split_authority(host)
                    && from.host == name
                    && port.unwrap_or(from.port) == from.port
                {
                    return None;
                }
            }
        }
        let trusted = match &self.0.origins {
            Trusted::Any => true,
            Trusted::List(list) => origin
                .and_then(Origin::parse)
                .is_some_and(|from| list.contains(&from)),
        };
        if trusted {
            return None;
        }
        Some(match origin {
            Some(origin) => format!(
                "cross-origin request refused: origin '{origin}' is not allowed to change anything here (add it to http.cors_allowed_origins)"
            ),
            None => "cross-origin request refused: another site's page sent it".to_owned(),
        })
    }

    /// The router layer: `Host` first, then the origin of state-changing
    /// requests.
    pub(crate) async fn guard(self, request: Request, next: Next) -> Response {
        // An absolute-form target names the host too; both must pass.
        let named = [
            request
                .headers()
                .get(header::HOST)
                .and_then(|v| v.to_str().ok()),
            request.uri().authority().map(|a| a.as_str()),
        ];
        for host in named.into_iter().flatten() {
            if !self.host_allowed(host) {
                let shown: String = host.chars().take(255).collect();
                return ApiError::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "host '{shown}' is not allowed: add it to http.allowed_hosts (or set public_url) to serve requests made to it"
                    ),
                )
                .into_response();
            }
        }
        if let Some(why) = self.cross_site(request.method(), request.headers()) {
            return ApiError::new(StatusCode::FORBIDDEN, why).into_response();
        }
        next.run(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn without_auth_only_names_the_service_is_reached_by_are_served() {
        let rules = Browsers::new(
            false,
            &[".corp.example".into()],
            &[],
            Some("https://chat.example.com/app"),
        );
        for ok in [
            "localhost:8080",
            "LOCALHOST",
            "app.localhost:3000",
            "127.0.0.1:8080",
            "[::1]:8080",
            "10.0.0.7",
            "chat.example.com",
            "chat.example.com.:443",
            "corp.example",
            "a.b.corp.example:8080",
        ] {
            assert!(rules.host_allowed(ok), "{ok}");
        }
        for refused in [
            "rebind.attacker.example:8080",
            "evilcorp.example",
            "localhost.attacker.example",
            "127.0.0.1.attacker.example",
            "",
            "user@localhost",
            "[::1",
            "localhost:99999",
        ] {
            assert!(!rules.host_allowed(refused), "{refused}");
        }
        // With tokens the name does not matter, unless a list is set.
        assert!(Browsers::new(true, &[], &[], None).host_allowed("anything.example"));
        let listed = Browsers::new(true, &["api.example".into()], &[], None);
        assert!(listed.host_allowed("api.example"));
        assert!(!listed.host_allowed("other.example"));
        assert!(Browsers::new(false, &["*".into()], &[], None).host_allowed("x.example"));
    }

    #[test]
    fn state_changes_from_other_origins_are_refused_unless_trusted() {
        let rules = Browsers::new(false, &[], &["https://app.example".into()], None);
        let post = Method::POST;
        let refused = |h: &[(&'static str, &str)]| rules.cross_site(&post, &headers(h)).is_some();
        // curl, SDKs: no browser headers.
        assert!(!refused(&[("host", "127.0.0.1:8080")]));
        // The web app it serves.
        assert!(!refused(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin")
        ]));
        assert!(!refused(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080")
        ]));
        assert!(!refused(&[
            ("host", "example.com"),
            ("origin", "http://example.com:80")
        ]));
        // Another site's page.
        assert!(refused(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site")
        ]));
        assert!(refused(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "https://evil.example")
        ]));
        assert!(refused(&[("host", "127.0.0.1:8080"), ("origin", "null")]));
        assert!(refused(&[
            ("host", "127.0.0.1:8080"),
            ("sec-fetch-site", "cross-site")
        ]));
        // Same host, other port: another origin.
        assert!(refused(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:5173")
        ]));
        // The trusted origin.
        assert!(!refused(&[
            ("host", "api.example"),
            ("origin", "https://app.example"),
            ("sec-fetch-site", "same-site")
        ]));
        // Reads are not judged here (the same-origin policy keeps their
        // answers from the page).
        assert!(
            rules
                .cross_site(
                    &Method::GET,
                    &headers(&[("origin", "https://evil.example")])
                )
                .is_none()
        );
        let any = Browsers::new(true, &[], &["*".into()], None);
        assert!(
            any.cross_site(&post, &headers(&[("origin", "https://evil.example")]))
                .is_none()
        );
    }
}
