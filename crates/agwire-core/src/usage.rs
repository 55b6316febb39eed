//! Token accounting.

use serde::Serialize;
use serde_json::Value;

use crate::decode::{Count, Cx, DResult, Decode, Obj, Path};

/// Token usage for one (provider, model) pair.
///
/// Input and output are totals; reasoning, cached and cache-write counts are parts
/// of them. Absent is not zero.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Provider id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Input tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// `input_tokens + output_tokens`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// The reasoning part of the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// The cached part of the input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// The part of the input written to a cache (1.x).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_input_tokens: Option<u64>,
}

impl Decode for TokenUsage {
    const EXPECTED: &'static str = "object";

    fn decode(value: Value, cx: &mut Cx, path: &Path<'_>) -> DResult<Self> {
        let mut o = Obj::new(value, cx, path)?;
        let mut count = |o: &mut Obj<'_>, key| -> DResult<Option<u64>> {
            Ok(o.opt::<Count>(cx, key)?.map(|c| c.0))
        };
        let usage = TokenUsage {
            provider: None,
            model: None,
            input_tokens: count(&mut o, "inputTokens")?,
            output_tokens: count(&mut o, "outputTokens")?,
            total_tokens: count(&mut o, "totalTokens")?,
            reasoning_tokens: count(&mut o, "reasoningTokens")?,
            cached_input_tokens: count(&mut o, "cachedInputTokens")?,
            cache_write_input_tokens: count(&mut o, "cacheWriteInputTokens")?,
        };
        let usage = TokenUsage {
            provider: o.opt(cx, "provider")?,
            model: o.opt(cx, "model")?,
            ..usage
        };
        o.finish(cx)?;
        Ok(usage)
    }
}
