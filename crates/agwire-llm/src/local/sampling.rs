//! How a sequence's next token is chosen: its own sampling chain (greedy,
//! or temperature with a seed) and its own grammar, so calls decoded in one
//! batch never share sampler state.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

use crate::error::Error;
use crate::local::grammar::Grammar;

/// The sampling chain and the grammar of one call.
///
/// The grammar is checked against the token the chain chose first, and
/// applied to the whole vocabulary only when it refuses it (what llama.cpp's
/// own `common_sampler` does): masking ~50,000 candidates at every step
/// would cost more than the model's forward pass on a small model.
pub(crate) struct Sampling {
    chain: LlamaSampler,
    grammar: Option<LlamaSampler>,
}

impl Sampling {
    /// `temperature: None` is greedy.
    pub(crate) fn new(
        model: &LlamaModel,
        grammar: Option<&Grammar>,
        temperature: Option<f32>,
        seed: u32,
    ) -> Result<Self, Error> {
        let grammar = match grammar {
            Some(grammar) => Some(
                match &grammar.trigger {
                    Some(word) => LlamaSampler::grammar_lazy(
                        model,
                        &grammar.text,
                        "root",
                        [word.as_bytes()],
                        &[],
                    ),
                    None => LlamaSampler::grammar(model, &grammar.text, "root"),
                }
                .map_err(|e| Error::Local(format!("grammar: {e}")))?,
            ),
            None => None,
        };
        let mut chain = Vec::with_capacity(5);
        match temperature {
            None => chain.push(LlamaSampler::greedy()),
            Some(t) => {
                // A mild repeat penalty: small models otherwise fall into
                // loops (`;;;;`) that eat the token budget.
                chain.push(LlamaSampler::penalties(model.n_vocab(), 64, 1.1, 0.0, 0.0));
                chain.push(LlamaSampler::top_k(40));
                chain.push(LlamaSampler::top_p(0.95, 1));
                chain.push(LlamaSampler::temp(t));
                chain.push(LlamaSampler::dist(seed));
            }
        }
        Ok(Self {
            chain: LlamaSampler::chain_simple(chain),
            grammar,
        })
    }

    /// The next token from the logits at `index` of the last batch.
    pub(crate) fn next(
        &mut self,
        context: &LlamaContext<'_>,
        index: i32,
    ) -> Result<LlamaToken, Error> {
        let none = || Error::Local("the sampler chose no token".into());
        let mut candidates = context.token_data_array_ith(index);
        candidates.apply_sampler(&mut self.chain);
        let mut token = candidates.selected_token().ok_or_else(none)?;
        if let Some(grammar) = &mut self.grammar {
            let mut alone =
                LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 1.0, 0.0)], false);
            alone.apply_sampler(grammar);
            let refused = alone
                .data
                .first()
                .is_none_or(|d| d.logit() == f32::NEG_INFINITY);
            if refused {
                let mut candidates = context.token_data_array_ith(index);
                candidates.apply_sampler(grammar);
                candidates.apply_sampler(&mut self.chain);
                token = candidates.selected_token().ok_or_else(none)?;
            }
            grammar.accept(token);
        }
        self.chain.accept(token);
        Ok(token)
    }
}
