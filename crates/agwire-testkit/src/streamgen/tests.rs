use super::schema::{FAMILIES, KNOWN_ROLES, KNOWN_TYPES};
use crate::peers::{read_json, spec_dir};
use serde_json::Value;

/// The model's lists of event types and message roles are the official
/// ones: the 1.1 schema's `EventType` enum, and the `role` constants of
/// its message definitions.
#[test]
fn the_known_types_and_roles_are_the_schemas() {
    let Some(dir) = spec_dir() else { return };
    let schema = read_json(&dir.join("1.1/schema.json"));
    let defs = schema["$defs"].as_object().expect("$defs");
    let types: Vec<&str> = defs["EventType"]["enum"]
        .as_array()
        .expect("EventType enum")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(types, KNOWN_TYPES);
    let mut roles: Vec<&str> = defs
        .iter()
        .filter(|(name, _)| name.ends_with("Message"))
        .filter_map(|(_, def)| def["properties"]["role"]["const"].as_str())
        .collect();
    let mut known = KNOWN_ROLES.to_vec();
    roles.sort_unstable();
    known.sort_unstable();
    assert_eq!(roles, known);
}

/// The model's chunk families name only official event types (the table
/// is data taken from the references, so a typo there is caught here
/// rather than agreed with).
#[test]
fn the_chunk_families_name_official_event_types() {
    for family in &FAMILIES {
        for name in [family.chunk, family.start, family.content, family.end] {
            assert!(KNOWN_TYPES.contains(&name), "{name} ({:?})", family.kind);
        }
    }
}
