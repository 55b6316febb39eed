//! Protocol versions and what a producer announces to its peer.

use std::cmp::Ordering;
use std::fmt;

/// The protocol version this crate implements.
pub const PROTOCOL_VERSION: &str = "1.1";

/// A protocol version in the published `MAJOR.MINOR` grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtocolVersion {
    /// Major component.
    pub major: u32,
    /// Minor component.
    pub minor: u32,
}

impl ProtocolVersion {
    /// 1.0: the first versioned protocol.
    pub const V1_0: ProtocolVersion = ProtocolVersion { major: 1, minor: 0 };
    /// 1.1: adds `encryptedValueType`.
    pub const V1_1: ProtocolVersion = ProtocolVersion { major: 1, minor: 1 };
    /// The version this crate implements.
    pub const CURRENT: ProtocolVersion = Self::V1_1;

    /// Parses exactly `^\d+\.\d+$`; `"1"`, `"1.0.0"`, `"1.x"`, `"v1.0"` are not
    /// versions in this grammar.
    pub fn parse(s: &str) -> Option<Self> {
        let (major, minor) = s.split_once('.')?;
        let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        if !digits(major) || !digits(minor) {
            return None;
        }
        Some(Self {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }

    /// The version a producer announces in `RUN_STARTED.protocolVersion` to a
    /// consumer whose input declared `requested`: the lower of ours and theirs.
    ///
    /// An absent declaration comes from a peer older than the field, which is
    /// answered as 1.0, the oldest version that has one. A declaration in some
    /// other dotted-numeric form (`"1.0.0"`, `"0.0.57"`) is compared per
    /// component and clamped to that floor; one that is not numeric at all is
    /// read as newer than anything we know, so we announce our own.
    pub fn negotiate(requested: Option<&str>) -> Self {
        let Some(requested) = requested else {
            return Self::V1_0;
        };
        if let Some(v) = Self::parse(requested) {
            return v.clamp(Self::V1_0, Self::CURRENT);
        }
        match compare_versions(requested, "1.0") {
            Some(Ordering::Less) => Self::V1_0,
            Some(_) => match compare_versions(requested, PROTOCOL_VERSION) {
                Some(Ordering::Less) => Self::V1_0,
                _ => Self::CURRENT,
            },
            None => Self::CURRENT,
        }
    }

    /// Whether a peer at this version knows `encryptedValueType`.
    pub fn has_encrypted_value_type(self) -> bool {
        self >= Self::V1_1
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Compares dotted numeric versions component by component (`1.10 > 1.9`); a
/// missing component counts as 0. `None` when either is not dotted-numeric.
pub fn compare_versions(a: &str, b: &str) -> Option<Ordering> {
    let parse = |s: &str| -> Option<Vec<u64>> {
        s.split('.')
            .map(|p| {
                if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                    None
                } else {
                    p.parse().ok()
                }
            })
            .collect()
    };
    let (a, b) = (parse(a)?, parse(b)?);
    let len = a.len().max(b.len());
    for i in 0..len {
        let (x, y) = (
            a.get(i).copied().unwrap_or(0),
            b.get(i).copied().unwrap_or(0),
        );
        match x.cmp(&y) {
            Ordering::Equal => {}
            other => return Some(other),
        }
    }
    Some(Ordering::Equal)
}

/// What a consumer makes of the version a producer declared in `RUN_STARTED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeclaredVersion {
    /// Absent, or not newer than ours: nothing to say.
    Compatible,
    /// Newer than ours: material we do not know will be stripped.
    Newer,
    /// Outside the `MAJOR.MINOR` grammar.
    Uninterpretable,
}

/// Judges a producer's declared version against `ours`, as the reference client does.
pub fn judge_declared(declared: Option<&str>, ours: ProtocolVersion) -> DeclaredVersion {
    let Some(declared) = declared else {
        return DeclaredVersion::Compatible;
    };
    match ProtocolVersion::parse(declared) {
        None => DeclaredVersion::Uninterpretable,
        Some(v) if v > ours => DeclaredVersion::Newer,
        Some(_) => DeclaredVersion::Compatible,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar_is_exactly_major_minor() {
        assert_eq!(ProtocolVersion::parse("1.1"), Some(ProtocolVersion::V1_1));
        assert_eq!(
            ProtocolVersion::parse("1.10"),
            Some(ProtocolVersion {
                major: 1,
                minor: 10
            })
        );
        for bad in ["1", "1.0.0", "1.x", "draft", "v1.0", "", ".1", "1."] {
            assert_eq!(ProtocolVersion::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn numeric_comparison_per_component() {
        assert_eq!(compare_versions("1.10", "1.9"), Some(Ordering::Greater));
        assert_eq!(compare_versions("1.0.0", "1.0"), Some(Ordering::Equal));
        assert_eq!(compare_versions("0.0.57", "1.0"), Some(Ordering::Less));
        assert_eq!(compare_versions("draft", "1.0"), None);
    }

    #[test]
    fn announce_the_lower_of_ours_and_theirs() {
        assert_eq!(ProtocolVersion::negotiate(None), ProtocolVersion::V1_0);
        assert_eq!(
            ProtocolVersion::negotiate(Some("1.0")),
            ProtocolVersion::V1_0
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some("1.1")),
            ProtocolVersion::V1_1
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some("1.9")),
            ProtocolVersion::V1_1
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some("2.0")),
            ProtocolVersion::V1_1
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some("0.0.57")),
            ProtocolVersion::V1_0
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some("1.0.0")),
            ProtocolVersion::V1_0
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some("draft")),
            ProtocolVersion::V1_1
        );
    }

    #[test]
    fn judging_declarations() {
        let ours = ProtocolVersion::V1_1;
        assert_eq!(judge_declared(None, ours), DeclaredVersion::Compatible);
        assert_eq!(
            judge_declared(Some("1.0"), ours),
            DeclaredVersion::Compatible
        );
        assert_eq!(judge_declared(Some("1.2"), ours), DeclaredVersion::Newer);
        assert_eq!(judge_declared(Some("1.10"), ours), DeclaredVersion::Newer);
        assert_eq!(
            judge_declared(Some("1.0.0"), ours),
            DeclaredVersion::Uninterpretable
        );
    }
}
