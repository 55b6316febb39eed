//! Random choices and random material: ids, text, JSON values, metadata, usage.

use rand::Rng;
use rand::seq::IndexedRandom;
use serde_json::{Map, Value, json};

use super::generator::Gen;
use super::vocabulary::FRAGMENTS;

impl Gen {
    pub(super) fn p(&mut self, probability: f64) -> bool {
        self.rng.random_bool(probability)
    }

    pub(super) fn range(&mut self, lo: usize, hi: usize) -> usize {
        if hi <= lo {
            lo
        } else {
            self.rng.random_range(lo..hi)
        }
    }

    pub(super) fn pick<T: Clone>(&mut self, xs: &[T]) -> Option<T> {
        xs.choose(&mut self.rng).cloned()
    }

    pub(super) fn pick_str(&mut self, xs: &[&'static str]) -> &'static str {
        xs.choose(&mut self.rng).copied().unwrap_or("x")
    }

    pub(super) fn feature(&mut self, name: &'static str) {
        self.features.insert(name);
    }

    pub(super) fn fresh(&mut self, prefix: &str) -> String {
        loop {
            self.counter += 1;
            let mut id = match self.id_style {
                0 => format!("{prefix}-{}", self.counter),
                1 => {
                    let a: u32 = self.rng.random();
                    let b: u16 = self.rng.random();
                    let c: u64 = self.rng.random();
                    format!(
                        "{a:08x}-{b:04x}-4{:03x}-a{:03x}-{:012x}",
                        c & 0xfff,
                        (c >> 12) & 0xfff,
                        c >> 16
                    )
                }
                _ => format!("{prefix}_{:x}", self.rng.random::<u32>()),
            };
            if self.rng.random_bool(0.02) {
                id.push_str("-ü✓");
                self.features.insert("unicode_id");
            }
            if self.used.insert(id.clone()) {
                return id;
            }
        }
    }

    /// Like `fresh`, but occasionally the empty string (a legal opaque id).
    pub(super) fn fresh_or_empty(&mut self, prefix: &str) -> String {
        if !self.used.contains("") && self.p(0.02) {
            self.used.insert(String::new());
            self.feature("empty_id");
            return String::new();
        }
        self.fresh(prefix)
    }

    pub(super) fn text(&mut self) -> String {
        let n = self.range(0, 5);
        let mut s = String::new();
        for _ in 0..n {
            s.push_str(self.pick_str(FRAGMENTS));
        }
        if s.is_empty() {
            self.feature("empty_delta");
        } else if s.chars().any(|c| c as u32 > 0xFFFF) {
            self.feature("astral_text");
        }
        s
    }

    pub(super) fn json_value(&mut self, depth: usize) -> Value {
        let r = self.range(0, if depth == 0 { 7 } else { 9 });
        match r {
            0 => Value::Null,
            1 => Value::Bool(self.p(0.5)),
            2 => {
                let n: i64 = *[0i64, 1, -1, 42, 9_007_199_254_740_991, -17, 1_000_000]
                    .choose(&mut self.rng)
                    .unwrap_or(&0);
                json!(n)
            }
            3 => json!(
                *[0.5f64, -2.25, 3.125, 1e-3]
                    .choose(&mut self.rng)
                    .unwrap_or(&0.5)
            ),
            4..=6 => Value::String(self.text()),
            7 => {
                let n = self.range(0, 4);
                Value::Array((0..n).map(|_| self.json_value(depth - 1)).collect())
            }
            _ => {
                let n = self.range(0, 4);
                let mut m = Map::new();
                for _ in 0..n {
                    let k =
                        self.pick_str(&["a", "b", "items", "", "a/b", "ti~lde", "ключ", "count"]);
                    let v = self.json_value(depth - 1);
                    m.insert(k.to_owned(), v);
                }
                Value::Object(m)
            }
        }
    }

    pub(super) fn object(&mut self) -> Value {
        let mut m = Map::new();
        let n = self.range(1, 4);
        for _ in 0..n {
            let k = self.pick_str(&[
                "status", "progress", "items", "title", "ö", "a/b", "x~y", "nested",
            ]);
            let v = self.json_value(2);
            m.insert(k.to_owned(), v);
        }
        Value::Object(m)
    }

    pub(super) fn metadata(&mut self) -> Value {
        let mut m = Map::new();
        let n = self.range(1, 3);
        for _ in 0..n {
            let k = self.pick_str(&[
                "finishReason",
                "model",
                "ag-ui",
                "trace",
                "score",
                "nullable",
            ]);
            let v = if k == "nullable" {
                Value::Null
            } else {
                self.json_value(1)
            };
            m.insert(k.to_owned(), v);
        }
        Value::Object(m)
    }

    pub(super) fn usage(&mut self) -> Value {
        let input = self.range(0, 5000) as u64;
        let output = self.range(0, 2000) as u64;
        let mut u = json!({"provider": self.pick_str(&["openai", "anthropic", "google"]), "model": "m-1",
            "inputTokens": input, "outputTokens": output, "totalTokens": input + output});
        if self.p(0.4) {
            u["reasoningTokens"] = json!(output / 2);
        }
        if self.p(0.3) {
            u["cachedInputTokens"] = json!(input / 3);
            u["cacheWriteInputTokens"] = json!(0);
        }
        self.feature("usage");
        Value::Array(vec![u])
    }
}
