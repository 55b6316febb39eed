//! The grammars a local model decodes under, made from JSON Schemas by
//! llama.cpp's own converter (`json_schema_to_grammar`, the one its server
//! uses for `response_format` and tool calls): any tool's schema — ours or
//! a frontend tool's — goes through the same path.

use serde_json::{Value, json};

use crate::chat::{ChatRequest, ToolChoice, ToolSpec};
use crate::error::Error;
use crate::local::answer::{CALL_CLOSE, CALL_OPEN, Calls};

/// A GBNF grammar and whether it waits for the call tag to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grammar {
    /// GBNF text; its start rule is `root`.
    pub(crate) text: String,
    /// Applies only from this word on (the model may write text first).
    pub(crate) trigger: Option<String>,
}

/// The grammar of a request's answer, if it has one.
pub(crate) fn of(request: &ChatRequest, calls: Calls) -> Result<Option<Grammar>, Error> {
    match calls {
        Calls::Auto | Calls::Forced => {
            let tools: Vec<&ToolSpec> = match &request.tool_choice {
                Some(ToolChoice::Named(name)) => {
                    request.tools.iter().filter(|t| &t.name == name).collect()
                }
                _ => request.tools.iter().collect(),
            };
            if tools.is_empty() {
                return Err(Error::Local(format!(
                    "tool_choice names a tool the request does not offer: {:?}",
                    request.tool_choice
                )));
            }
            let text = call_grammar(&tools)?;
            Ok(Some(Grammar {
                text,
                trigger: (calls == Calls::Auto).then(|| CALL_OPEN.to_owned()),
            }))
        }
        Calls::Off => {
            let schema = match (&request.response_schema, request.json_mode) {
                (Some(schema), _) => schema.clone(),
                (None, true) => json!({"type": "object"}),
                (None, false) => return Ok(None),
            };
            Ok(Some(Grammar {
                text: schema_grammar(&schema)?,
                trigger: None,
            }))
        }
    }
}

/// Longest free string the grammar admits (where the schema allows longer).
const MAX_STRING: u64 = 100;

/// `schema` with every free string held to [`MAX_STRING`] characters:
/// whatever a schema allows, a small model looping inside a string (`";;;;`)
/// must reach its closing quote. A shorter string is still valid against
/// the schema as written.
fn bounded(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out: serde_json::Map<String, Value> = map
                .iter()
                .map(|(key, value)| (key.clone(), bounded(value)))
                .collect();
            let is_string = match map.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
                _ => false,
            };
            let free = !["enum", "const", "pattern", "format"]
                .iter()
                .any(|k| map.contains_key(*k));
            if is_string && free {
                let max = map
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .map_or(MAX_STRING, |m| m.min(MAX_STRING));
                let min = map.get("minLength").and_then(Value::as_u64).unwrap_or(0);
                // A schema asking for more than the cap keeps its own.
                out.insert("maxLength".into(), json!(max.max(min)));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(bounded).collect()),
        other => other.clone(),
    }
}

/// The grammar of JSON valid against `schema`.
pub(crate) fn schema_grammar(schema: &Value) -> Result<String, Error> {
    llama_cpp_2::json_schema_to_grammar(&bounded(schema).to_string())
        .map_err(|e| Error::Local(format!("cannot make a grammar of the schema {schema}: {e}")))
}

/// `<tool_call>{"name": one tool, "arguments": valid for that tool}</tool_call>`.
fn call_grammar(tools: &[&ToolSpec]) -> Result<String, Error> {
    let one = |tool: &ToolSpec, arguments: &Value| {
        json!({
            "type": "object",
            "properties": {"name": {"const": tool.name}, "arguments": arguments},
            "required": ["name", "arguments"],
            "additionalProperties": false,
        })
    };
    let mut alternatives = Vec::with_capacity(tools.len());
    for tool in tools {
        let exact = one(tool, &tool.parameters);
        // A schema llama.cpp cannot turn into a grammar (a regex it does
        // not know, say) still gets a call that parses: any object.
        let usable = if schema_grammar(&exact).is_ok() {
            exact
        } else {
            tracing::warn!(
                tool = tool.name,
                "the tool's schema has no grammar; its arguments are held to a JSON object only"
            );
            one(tool, &json!({"type": "object"}))
        };
        alternatives.push(usable);
    }
    let schema = if alternatives.len() == 1 {
        alternatives.remove(0)
    } else {
        json!({"anyOf": alternatives})
    };
    let json = schema_grammar(&schema)?;
    // The converter's start rule becomes `call`; ours wraps it in the tags.
    let mut text = String::with_capacity(json.len() + 64);
    text.push_str(&format!(
        "root ::= {} call {}\n",
        gbnf_literal(CALL_OPEN),
        gbnf_literal(CALL_CLOSE)
    ));
    for line in json.lines() {
        match line.strip_prefix("root ::=") {
            Some(rest) => {
                text.push_str("call ::=");
                text.push_str(rest);
            }
            None => text.push_str(line),
        }
        text.push('\n');
    }
    Ok(text)
}

fn gbnf_literal(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_strings_are_bounded_and_others_kept() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "string"},
            "b": {"type": "string", "maxLength": 10},
            "c": {"type": "string", "minLength": 500},
            "d": {"enum": ["x"]},
            "e": {"type": "string", "format": "date"}
        }});
        let out = bounded(&schema);
        assert_eq!(out["properties"]["a"]["maxLength"], 100);
        assert_eq!(out["properties"]["b"]["maxLength"], 10);
        assert_eq!(out["properties"]["c"]["maxLength"], 500);
        assert!(out["properties"]["d"].get("maxLength").is_none());
        assert!(out["properties"]["e"].get("maxLength").is_none());
    }

    #[test]
    fn a_call_grammar_wraps_the_schema_in_the_tags() {
        let tool = ToolSpec {
            name: "calendar_write".into(),
            description: "".into(),
            parameters: json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}),
        };
        let request = ChatRequest {
            tools: vec![tool],
            ..ChatRequest::default()
        };
        let grammar = of(&request, Calls::of(&request)).ok().flatten();
        let grammar = grammar.unwrap_or_else(|| panic!("no grammar"));
        assert_eq!(grammar.trigger.as_deref(), Some(CALL_OPEN));
        assert!(
            grammar
                .text
                .starts_with("root ::= \"<tool_call>\" call \"</tool_call>\"\n")
        );
        assert!(grammar.text.contains("call ::="));
        assert!(grammar.text.contains("calendar_write"));
        assert_eq!(grammar.text.matches("root ::=").count(), 1);
    }
}
