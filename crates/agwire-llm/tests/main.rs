//! The integration tests of `agwire-llm`, one binary: the OpenAI-compatible
//! provider against a fake that speaks its wire, and `hf:` downloads.

mod fetch;
mod openai;
