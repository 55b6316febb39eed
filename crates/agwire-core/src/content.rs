//! Message content: plain text or a list of content parts.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::decode::{Cx, DResult, Decode, Fail, NonNullJson, Obj, Path, expected, tag};
use crate::{Warning, WarningKind};

/// The content of a user or tool message, and of a `TOOL_CALL_RESULT`: a string or
/// an ordered list of parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Multimodal parts, in order.
    Parts(Vec<ContentPart>),
}

impl Content {
    /// The text of this content: the string itself, or the text parts joined
    /// with newlines (media parts carry no text).
    pub fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => {
                let texts: Vec<&str> = parts
                    .iter()
                    .filter_map(|part| match part {
                        ContentPart::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect();
                texts.join("\n")
            }
        }
    }

    /// Whether any part is an image, audio, video or document.
    pub fn has_media(&self) -> bool {
        matches!(self, Content::Parts(parts) if parts.iter().any(|p| !matches!(p, ContentPart::Text(_))))
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Content::Text(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Content::Text(text.to_owned())
    }
}

impl From<Vec<ContentPart>> for Content {
    fn from(parts: Vec<ContentPart>) -> Self {
        Content::Parts(parts)
    }
}

/// One part of multimodal content.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentPart {
    /// Text.
    Text(TextPart),
    /// An image.
    Image(MediaPart),
    /// Audio.
    Audio(MediaPart),
    /// Video.
    Video(MediaPart),
    /// A document (PDF, text file, anything else).
    Document(MediaPart),
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart::Text(TextPart {
            text: text.into(),
            id: None,
            metadata: None,
        })
    }

    /// The `type` discriminator of this part.
    pub fn kind(&self) -> &'static str {
        match self {
            ContentPart::Text(_) => "text",
            ContentPart::Image(_) => "image",
            ContentPart::Audio(_) => "audio",
            ContentPart::Video(_) => "video",
            ContentPart::Document(_) => "document",
        }
    }
}

/// A text part.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TextPart {
    /// Optional part id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The text.
    pub text: String,
    /// Any JSON except a bare `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// An image, audio, video or document part.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MediaPart {
    /// Optional part id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Where the bytes are.
    pub source: PartSource,
    /// Any JSON except a bare `null` (not constrained to an object).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// Where a media part's bytes are.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum PartSource {
    /// Inline base64 data.
    Data {
        /// Base64 payload.
        value: String,
        /// Required MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A URL.
    Url {
        /// The URL.
        value: String,
        /// Optional MIME type.
        #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// An opaque provider file handle (1.x); never fetched or parsed.
    File {
        /// The handle.
        value: String,
        /// Lower-case vendor id.
        #[serde(skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        /// Optional MIME type.
        #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

impl Decode for Content {
    const EXPECTED: &'static str = "string or array";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        match value {
            Value::String(s) => Ok(Content::Text(s)),
            Value::Array(mut items) => {
                if cx.lenient() && items.iter().any(is_legacy_binary) {
                    items = upgrade_legacy_binary(&items, cx);
                }
                Vec::<ContentPart>::decode(Value::Array(items), cx, path).map(Content::Parts)
            }
            other => Err(cx.error(path, expected("string or array", &other))),
        }
    }
}

impl Decode for ContentPart {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let Value::Object(map) = value else {
            return Err(cx.error(path, expected("object", &value)));
        };
        let build: fn(MediaPart) -> ContentPart = match tag(&map, "type") {
            Some("text") => {
                let mut o = Obj::from_map(map, cx, path);
                o.take("type");
                let part = TextPart {
                    id: o.opt(cx, "id")?,
                    text: o.req(cx, "text")?,
                    metadata: o.opt::<NonNullJson>(cx, "metadata")?.map(|m| m.0),
                };
                o.finish(cx)?;
                return Ok(ContentPart::Text(part));
            }
            Some("image") => ContentPart::Image,
            Some("audio") => ContentPart::Audio,
            Some("video") => ContentPart::Video,
            Some("document") => ContentPart::Document,
            _ => return Err(Fail::Drop { tag: "type" }),
        };
        let mut o = Obj::from_map(map, cx, path);
        o.take("type");
        let part = MediaPart {
            id: o.opt(cx, "id")?,
            source: o.req(cx, "source")?,
            metadata: o
                .opt_legacy_null::<NonNullJson>(cx, "metadata")?
                .map(|m| m.0),
        };
        o.finish(cx)?;
        Ok(build(part))
    }
}

impl Decode for PartSource {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let Value::Object(map) = value else {
            return Err(cx.error(path, expected("object", &value)));
        };
        let kind = match tag(&map, "type") {
            Some("data") => 0,
            Some("url") => 1,
            Some("file") => 2,
            _ => return Err(Fail::Drop { tag: "type" }),
        };
        let mut o = Obj::from_map(map, cx, path);
        o.take("type");
        let source = match kind {
            0 => PartSource::Data {
                value: o.req(cx, "value")?,
                mime_type: o.req(cx, "mimeType")?,
            },
            1 => PartSource::Url {
                value: o.req(cx, "value")?,
                mime_type: o.opt(cx, "mimeType")?,
            },
            _ => PartSource::File {
                value: o.req(cx, "value")?,
                provider: o.opt(cx, "provider")?,
                mime_type: o.opt(cx, "mimeType")?,
            },
        };
        o.finish(cx)?;
        Ok(source)
    }
}

/// A 0.x `{"type": "binary", "mimeType": …}` part.
fn is_legacy_binary(value: &Value) -> bool {
    value.as_object().is_some_and(|m| {
        tag(m, "type") == Some("binary") && m.get("mimeType").is_some_and(Value::is_string)
    })
}

fn media_kind(mime_type: &str) -> &'static str {
    if mime_type.starts_with("image/") {
        "image"
    } else if mime_type.starts_with("audio/") {
        "audio"
    } else if mime_type.starts_with("video/") {
        "video"
    } else {
        "document"
    }
}

fn non_empty_str<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Upgrades 0.x binary parts to media parts: `data` becomes a data source, else
/// `url` a url source; `filename` moves to `metadata`. A part that only carries an
/// id cannot be upgraded and is left for the union rule to remove. A binary part
/// that duplicates a modern part already in the list is dropped, so a producer
/// that sends both spellings does not get the attachment twice.
fn upgrade_legacy_binary(items: &[Value], cx: &mut Cx) -> Vec<Value> {
    cx.warnings.push(Warning::new(
        WarningKind::LegacyTranslated,
        format!(
            "Converting deprecated binary input content to the modern media content parts on {}.",
            cx.context
        ),
    ));
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        if !is_legacy_binary(item) {
            out.push(item.clone());
            continue;
        }
        let Some(map) = item.as_object() else {
            continue;
        };
        let mime = map
            .get("mimeType")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let source = if let Some(data) = non_empty_str(map, "data") {
            json!({"type": "data", "value": data, "mimeType": mime})
        } else if let Some(url) = non_empty_str(map, "url") {
            json!({"type": "url", "value": url, "mimeType": mime})
        } else {
            cx.warnings.push(Warning::new(
                WarningKind::LegacyTranslated,
                format!(
                    "A binary content part carries only an id ('{}') and cannot be converted to a modern media part.",
                    map.get("id").and_then(Value::as_str).unwrap_or_default()
                ),
            ));
            out.push(item.clone());
            continue;
        };
        let filename = non_empty_str(map, "filename");
        let mut part = Map::new();
        part.insert("type".into(), Value::from(media_kind(mime)));
        part.insert("source".into(), source);
        if let Some(name) = filename {
            part.insert("metadata".into(), json!({ "filename": name }));
        }
        let part = Value::Object(part);
        if items.iter().any(|other| duplicates(other, &part, filename)) {
            continue;
        }
        out.push(part);
    }
    out
}

fn duplicates(other: &Value, converted: &Value, filename: Option<&str>) -> bool {
    let (Some(other), Some(conv)) = (other.as_object(), converted.as_object()) else {
        return false;
    };
    if other.get("type") != conv.get("type") {
        return false;
    }
    let (Some(os), Some(cs)) = (
        other.get("source").and_then(Value::as_object),
        conv.get("source").and_then(Value::as_object),
    ) else {
        return false;
    };
    let same_source = ["type", "value", "mimeType"]
        .iter()
        .all(|k| os.get(*k).is_some() && os.get(*k) == cs.get(*k));
    same_source
        && filename.is_none_or(|name| {
            other
                .get("metadata")
                .and_then(|m| m.get("filename"))
                .and_then(Value::as_str)
                == Some(name)
        })
}
