//! Prompts to token ids and back: the model's chat template and tokenizer. They load
//! in a moment without the weights, so a run checks its prompts against the model's
//! context before spending minutes loading a model that cannot take them.

use crate::candle::chat_template::{self, ChatTemplate};
use crate::candle::load::hub::ModelFiles;
use crate::{EngineError, Prompt};
use tokenizers::Tokenizer;

pub struct PromptEncoder {
    tokenizer: Tokenizer,
    template: ChatTemplate,
}

impl PromptEncoder {
    pub fn load(files: &ModelFiles) -> Result<Self, EngineError> {
        let tokenizer = Tokenizer::from_file(&files.tokenizer)
            .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
        let template = chat_template::for_model(
            &tokenizer,
            &files.tokenizer_config,
            files.chat_template.as_deref(),
        )?;
        Ok(PromptEncoder {
            tokenizer,
            template,
        })
    }

    /// The token ids of a prompt. Rendered chat text already carries the special
    /// tokens the model expects (BOS included), so none are added here.
    pub fn encode(&self, prompt: &Prompt) -> Result<Vec<u32>, EngineError> {
        let text = match prompt {
            Prompt::Chat(messages) => self.template.render(messages)?,
            Prompt::Raw(text) => text.clone(),
        };
        let enc = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String, EngineError> {
        self.tokenizer
            .decode(ids, true)
            .map_err(|e| EngineError::Tokenizer(e.to_string()))
    }

    pub fn template(&self) -> &ChatTemplate {
        &self.template
    }

    /// Token ids the tokenizer knows, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    /// The token with the highest id, special tokens included.
    pub fn highest_id(&self) -> Option<(String, u32)> {
        self.tokenizer
            .get_vocab(true)
            .into_iter()
            .max_by_key(|(_, id)| *id)
    }
}
