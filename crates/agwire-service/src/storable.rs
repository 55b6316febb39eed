//! What the stores can hold, judged before anything is written: text
//! without the NUL character.
//!
//! PostgreSQL's `text` refuses a NUL byte (SQLSTATE 22021) and `jsonb` the
//! escape `\u0000` (22P05); SQLite stores either. Refusing NUL in every
//! request gives one answer on both stores (a named 422), and keeps a bad
//! value out of the batches PostgreSQL writes many users' calls in. (Rust
//! strings are valid UTF-8 and `serde_json` refuses lone surrogates, so NUL
//! is the one character left that a store cannot hold.)

use serde_json::Value;

/// The sentence a client reads when `at` (a JSON pointer, or a name) holds
/// a NUL.
pub fn nul_detail(at: &str) -> String {
    format!("{at} must not contain the NUL character (U+0000)")
}

/// Where a JSON text holds a NUL character, as a JSON pointer to the value
/// (a key's NUL names the object holding it, `… (a key)`), or `None` when
/// it holds none. Text that is not JSON is judged by its bytes: `None`
/// unless it has a `\u0000` escape or a NUL byte (its own parser refuses it
/// anyway).
///
/// Fast on the common path: the bytes are scanned for an escape first (a
/// JSON string cannot hold a raw NUL byte), and only a text that has one
/// is parsed to name where.
pub fn nul_in_json(json: &[u8]) -> Option<String> {
    if !has_nul_escape(json) && !json.contains(&0) {
        return None;
    }
    match serde_json::from_slice::<Value>(json) {
        Ok(value) => nul_in_value(&value, &mut String::new()),
        Err(_) => Some("the body".to_owned()),
    }
}

/// Whether `json` has a `\u0000` escape (not an escaped backslash followed
/// by `u0000`: that is six characters of text).
fn has_nul_escape(json: &[u8]) -> bool {
    let escape = br"\u0000";
    let mut from = 0;
    while let Some(at) = json
        .get(from..)
        .and_then(|rest| rest.windows(escape.len()).position(|w| w == escape))
    {
        let start = from + at;
        // The backslashes before this one: an even number means this one
        // starts an escape.
        let before = json[..start]
            .iter()
            .rev()
            .take_while(|b| **b == b'\\')
            .count();
        if before % 2 == 0 {
            return true;
        }
        from = start + 1;
    }
    false
}

/// Where `value` holds a NUL (see [`nul_in_json`]); `at` is its pointer.
pub fn nul_in_value(value: &Value, at: &mut String) -> Option<String> {
    let found = |at: &str| {
        Some(if at.is_empty() {
            "/".to_owned()
        } else {
            at.to_owned()
        })
    };
    match value {
        Value::String(text) if text.contains('\0') => found(at),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = at.len();
                at.push('/');
                at.push_str(&i.to_string());
                if let Some(where_) = nul_in_value(item, at) {
                    return Some(where_);
                }
                at.truncate(len);
            }
            None
        }
        Value::Object(members) => {
            for (key, member) in members {
                if key.contains('\0') {
                    return found(at).map(|object| format!("{object} (a key)"));
                }
                let len = at.len();
                at.push('/');
                // RFC 6901: `~` and `/` are escaped in a pointer.
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                if let Some(where_) = nul_in_value(member, at) {
                    return Some(where_);
                }
                at.truncate(len);
            }
            None
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_is_found_where_it_is_and_nowhere_else() {
        assert_eq!(nul_in_json(br#"{"a":"x"}"#), None);
        assert_eq!(
            nul_in_json(br#"{"runId":"r\u0000"}"#).as_deref(),
            Some("/runId")
        );
        assert_eq!(
            nul_in_json(br#"{"messages":[{"id":"1"},{"content":"\u0000"}]}"#).as_deref(),
            Some("/messages/1/content")
        );
        assert_eq!(
            nul_in_json(br#"{"a/b~":{"k\u0000":1}}"#).as_deref(),
            Some("/a~1b~0 (a key)")
        );
        assert_eq!(nul_in_json(br#""\u0000""#).as_deref(), Some("/"));
        // An escaped backslash, then the text `u0000`: no NUL.
        assert_eq!(nul_in_json(br#"{"a":"\\u0000"}"#), None);
        // Three backslashes: an escaped one, then a real escape.
        assert_eq!(nul_in_json(br#"{"a":"\\\u0000"}"#).as_deref(), Some("/a"));
        // A NUL escape in an unparseable text still counts.
        assert_eq!(
            nul_in_json(b"{\"a\":\"\\u0000").as_deref(),
            Some("the body")
        );
    }
}
