//! Shared helpers: where the official AG-UI data lives.
#![allow(
    dead_code,
    unreachable_pub,
    unused_imports,
    clippy::expect_used,
    clippy::print_stderr
)]

use std::path::PathBuf;

pub use agwire_testkit::peers::{interop_dir, read_json, spec_dir};

/// Validates documents against one `$defs` anchor of the official 1.1 schema.
pub struct Schema {
    registry: jsonschema::Registry<'static>,
}

pub const SCHEMA_ID: &str = "https://ag-ui.com/spec/1.1/schema.json";

impl Schema {
    pub fn load(dir: &std::path::Path) -> Self {
        let root = read_json(&dir.join("1.1/schema.json"));
        let registry = jsonschema::Registry::new()
            .add(SCHEMA_ID, root)
            .expect("schema resource")
            .prepare()
            .expect("schema registry");
        Self { registry }
    }

    /// A validator for `schema.json#<anchor>` (`""` for the root).
    pub fn validator(&self, anchor: &str) -> jsonschema::Validator {
        let reference = if anchor.is_empty() {
            serde_json::json!({ "$ref": SCHEMA_ID })
        } else {
            serde_json::json!({ "$ref": format!("{SCHEMA_ID}#{anchor}") })
        };
        jsonschema::options()
            .with_registry(&self.registry)
            .build(&reference)
            .unwrap_or_else(|e| panic!("validator for {anchor}: {e}"))
    }
}

/// Every `*.json` under `dir`, sorted, excluding `*.expect.json`.
pub fn documents(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.ends_with(".json") && !name.ends_with(".expect.json") {
            out.push(path);
        }
    }
    out.sort();
    out
}
