//! Prompts to token ids and back: the model's chat template and tokenizer. They load
//! in a moment without the weights, so a run checks its prompts against the model's
//! context before spending minutes loading a model that cannot take them.

use crate::candle::chat_template::{self, ChatTemplate};
use crate::candle::load::gguf_tokenizer;
use crate::candle::load::hub::ModelFiles;
use crate::{EngineError, Prompt};
use std::path::Path;
use tokenizers::Tokenizer;

pub struct PromptEncoder {
    tokenizer: Tokenizer,
    template: ChatTemplate,
    /// Tokens the tokenizer's own source says end a turn (a GGUF file's metadata);
    /// empty for a folder, whose generation_config.json says them.
    end_tokens: Vec<u32>,
}

impl PromptEncoder {
    pub fn load(files: &ModelFiles) -> Result<Self, EngineError> {
        if let Some(gguf) = files.gguf() {
            return Self::from_gguf(gguf, files.chat_template.as_deref());
        }
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
            end_tokens: Vec::new(),
        })
    }

    /// The tokenizer and chat template of a GGUF file's metadata. A template chosen with
    /// `--chat-template` comes first, then the file's; a file without one (a base model)
    /// gets plain prompts, after its BOS where the file says to add one.
    fn from_gguf(path: &Path, chosen: Option<&Path>) -> Result<Self, EngineError> {
        let chat = gguf_tokenizer::chat_from_gguf_file(path)?;
        let text = |id: Option<u32>| id.and_then(|i| chat.tokenizer.id_to_token(i));
        let template = match chosen {
            Some(file) => {
                let source = crate::candle::chat_template::read_file(file)?;
                ChatTemplate::new(source, text(chat.bos), text(chat.eos.first().copied()))
            }
            None => match chat.template() {
                Some(t) => t,
                None => {
                    let bos = chat.bos.filter(|_| chat.add_bos);
                    ChatTemplate::plain(text(bos).unwrap_or_default())
                }
            },
        };
        Ok(PromptEncoder {
            tokenizer: chat.tokenizer,
            template,
            end_tokens: chat.eos,
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

    /// See [`PromptEncoder::end_tokens`]'s field.
    pub fn end_tokens(&self) -> &[u32] {
        &self.end_tokens
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
