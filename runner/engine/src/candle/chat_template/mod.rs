//! A model's own Jinja chat template, rendered the way transformers renders it.
//!
//! transformers compiles templates with `trim_blocks` and `lstrip_blocks`, passes
//! `messages`, `tools=None`, `documents=None`, `add_generation_prompt` and the special
//! tokens, and offers `raise_exception`. Python string methods (`.strip()`, `.title()`,
//! ...) come from minijinja-contrib's pycompat layer.

use crate::{EngineError, Message, Role};
use minijinja::syntax::SyntaxConfig;
use minijinja::{context, Environment, Error, ErrorKind};
use serde::Deserialize;
use std::path::Path;

/// Work one rendering may do, in minijinja's units (about an instruction each). The
/// panel's templates take a few thousand for a conversation; a loop that does not end,
/// or `range(100000)` nested, runs out in a fraction of a second instead of hanging.
pub const FUEL: u64 = 2_000_000;

/// Bytes one rendering may write: 16 MiB of prompt is millions of tokens, past any
/// model's context, so a template that writes more is broken or hostile, not long.
pub const MAX_OUTPUT: usize = 16 << 20;

/// The largest chat template read (from `--chat-template`, tokenizer_config.json,
/// chat_template.jinja or a GGUF file's metadata): the panel's are 2-6 KB and the
/// longest known (tool-calling ones) tens of KB. A bigger source is not a template,
/// and compiling one costs about 30 times its size in memory.
pub const MAX_TEMPLATE_BYTES: usize = 1 << 20;

/// Refuses a template source over [`MAX_TEMPLATE_BYTES`], naming where it came from.
pub fn check_size(source: &str, whence: &str) -> Result<(), EngineError> {
    if source.len() > MAX_TEMPLATE_BYTES {
        return Err(EngineError::Template(format!(
            "{whence}: the template is {} bytes, over the bound of {} MiB for a chat template",
            source.len(),
            MAX_TEMPLATE_BYTES >> 20
        )));
    }
    Ok(())
}

/// A template file's text, at most [`MAX_TEMPLATE_BYTES`] of it (a device such as
/// `/dev/zero` is refused after that many bytes, not read until memory runs out).
pub fn read_file(file: &Path) -> Result<String, EngineError> {
    use crate::bounded::{read_text, BoundedReadError};
    read_text(file, MAX_TEMPLATE_BYTES as u64, "a chat template").map_err(|e| match e {
        BoundedReadError::Io { path, source } => EngineError::Io { path, source },
        other => EngineError::Template(other.to_string()),
    })
}

/// The rendering's output, refusing to grow past [`MAX_OUTPUT`].
struct Bounded {
    text: Vec<u8>,
    over: bool,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.text.len() + buf.len() > MAX_OUTPUT {
            self.over = true;
            return Err(std::io::Error::other("chat template output over the bound"));
        }
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The embedded templates of the panel's models, used by the fixture models so that
/// they render prompts exactly like the real ones.
pub mod known {
    pub const QWEN2_5: &str = include_str!("templates/qwen2_5.jinja");
    pub const LLAMA3_1: &str = include_str!("templates/llama3_1.jinja");
    pub const GEMMA3: &str = include_str!("templates/gemma3.jinja");
    pub const PHI3_5: &str = include_str!("templates/phi3_5.jinja");
}

#[derive(Debug, Clone)]
pub struct ChatTemplate {
    /// The Jinja source; empty for a base model's plain text.
    source: String,
    /// A base model (no chat template anywhere): its prompt runs as plain text after
    /// what the tokenizer adds in front of a text (its BOS), as lm-eval runs base
    /// models, and the messages are joined by a blank line.
    plain: Option<String>,
    bos_token: Option<String>,
    eos_token: Option<String>,
}

/// How a base model's messages are joined into one text.
pub const PLAIN_SEPARATOR: &str = "\n\n";

/// The fields of tokenizer_config.json that matter here. Special tokens appear either as
/// plain strings or as added-token objects with a `content` field.
#[derive(Deserialize)]
struct TokenizerConfig {
    chat_template: Option<TemplateField>,
    bos_token: Option<TokenField>,
    eos_token: Option<TokenField>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TemplateField {
    One(String),
    Named(Vec<NamedTemplate>),
}

#[derive(Deserialize)]
struct NamedTemplate {
    name: String,
    template: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TokenField {
    Text(String),
    Added { content: String },
}

impl TokenField {
    fn into_text(self) -> String {
        match self {
            TokenField::Text(s) | TokenField::Added { content: s } => s,
        }
    }
}

impl ChatTemplate {
    pub fn new(
        source: impl Into<String>,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Self {
        ChatTemplate {
            source: source.into(),
            plain: None,
            bos_token,
            eos_token,
        }
    }

    /// Plain text after `prefix` (what the model's tokenizer adds in front of a text):
    /// how a base model without a chat template is prompted.
    pub fn plain(prefix: String) -> Self {
        ChatTemplate {
            source: String::new(),
            plain: Some(prefix),
            bos_token: None,
            eos_token: None,
        }
    }

    /// Whether prompts run as plain text (a base model without a chat template).
    pub fn is_plain(&self) -> bool {
        self.plain.is_some()
    }

    /// The template in `file` (`--chat-template`), with the special tokens of the
    /// tokenizer_config.json at `tokenizer_config`.
    pub fn from_file(file: &Path, tokenizer_config: &Path) -> Result<Self, EngineError> {
        let source = read_file(file)?;
        let config = read_config(tokenizer_config)?;
        let t = ChatTemplate {
            source,
            plain: None,
            bos_token: config.bos_token.map(TokenField::into_text),
            eos_token: config.eos_token.map(TokenField::into_text),
        };
        // A template that does not compile is refused now, naming its file, not at the
        // first prompt.
        let env = Environment::new();
        env.template_from_str(&t.source).map_err(|e| {
            EngineError::Template(format!("{}: {}", file.display(), template_error(e)))
        })?;
        Ok(t)
    }

    /// Reads the template from tokenizer_config.json, or from a chat_template.jinja
    /// beside it (where newer checkpoints keep it). A base model has neither: `None`.
    pub fn from_tokenizer_config(path: &Path) -> Result<Option<Self>, EngineError> {
        let config = read_config(path)?;
        let source = match config.chat_template {
            Some(TemplateField::One(s)) => s,
            Some(TemplateField::Named(list)) => list
                .into_iter()
                .find(|t| t.name == "default")
                .map(|t| t.template)
                .ok_or_else(|| {
                    EngineError::Template(format!(
                        "{} has no default chat template",
                        path.display()
                    ))
                })?,
            None => {
                let beside = path.with_file_name("chat_template.jinja");
                match read_file(&beside) {
                    Ok(s) => s,
                    Err(EngineError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        return Ok(None)
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        check_size(&source, &path.display().to_string())?;
        Ok(Some(ChatTemplate {
            source,
            plain: None,
            bos_token: config.bos_token.map(TokenField::into_text),
            eos_token: config.eos_token.map(TokenField::into_text),
        }))
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The prompt text for `messages`, ending with the assistant's turn header (or, for
    /// a base model, the messages' texts after the tokenizer's BOS).
    pub fn render(&self, messages: &[Message]) -> Result<String, EngineError> {
        if let Some(prefix) = &self.plain {
            let texts: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
            return Ok(format!("{prefix}{}", texts.join(PLAIN_SEPARATOR)));
        }
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(template_error)?;
        env.set_syntax(syntax);
        env.set_fuel(Some(FUEL));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<String, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        let template = env
            .template_from_str(&self.source)
            .map_err(template_error)?;
        let messages: Vec<_> = messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                context! { role => role, content => m.content.clone() }
            })
            .collect();
        let mut out = Bounded {
            text: Vec::new(),
            over: false,
        };
        let rendered = template.render_captured_to(
            context! {
                messages => messages,
                tools => (),
                documents => (),
                add_generation_prompt => true,
                bos_token => self.bos_token.clone(),
                eos_token => self.eos_token.clone(),
            },
            &mut out,
        );
        if out.over {
            return Err(EngineError::Template(format!(
                "the chat template wrote more than {} MiB for one prompt, far past any \
                 model's context: it is broken or hostile, and was stopped",
                MAX_OUTPUT >> 20
            )));
        }
        match rendered {
            Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(EngineError::Template(format!(
                "the chat template did more than {FUEL} steps of work for one prompt (a loop \
                 that does not end, or loops nested too deep): it is broken or hostile, and \
                 was stopped"
            ))),
            Err(e) => Err(template_error(e)),
            // The writer is handed only the template's str output.
            Ok(_) => String::from_utf8(out.text)
                .map_err(|e| EngineError::Template(format!("output is not UTF-8: {e}"))),
        }
    }
}

/// A model's template: `chosen` (`--chat-template`) if given, else its own from
/// `tokenizer_config`, else (a base model) plain text after what `tokenizer` puts in
/// front of a text.
pub fn for_model(
    tokenizer: &tokenizers::Tokenizer,
    tokenizer_config: &Path,
    chosen: Option<&Path>,
) -> Result<ChatTemplate, EngineError> {
    if let Some(file) = chosen {
        return ChatTemplate::from_file(file, tokenizer_config);
    }
    if let Some(t) = ChatTemplate::from_tokenizer_config(tokenizer_config)? {
        return Ok(t);
    }
    let marked = tokenizer
        .encode("x", true)
        .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
    let lead = marked
        .get_special_tokens_mask()
        .iter()
        .take_while(|&&special| special == 1)
        .count();
    let prefix = tokenizer
        .decode(&marked.get_ids()[..lead], false)
        .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
    Ok(ChatTemplate::plain(prefix))
}

fn read_config(path: &Path) -> Result<TokenizerConfig, EngineError> {
    let text = std::fs::read_to_string(path).map_err(|source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| EngineError::BadFile {
        what: "tokenizer config",
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The error with its causes and at most [`EXCERPT`] bytes of the source around where
/// it is (minijinja's alternate form prints the whole line: a one-line template of 20 MB
/// went to stderr whole).
fn template_error(e: Error) -> EngineError {
    let mut m = e.to_string();
    m.truncate(floor(&m, EXCERPT * 4));
    if let (Some(source), Some(range)) = (e.template_source(), e.range()) {
        let start = floor(source, range.start.saturating_sub(EXCERPT / 2));
        let end = floor(
            source,
            start
                .saturating_add(EXCERPT)
                .max(range.end.min(start + EXCERPT)),
        );
        let column = source[..floor(source, range.start)]
            .rsplit('\n')
            .next()
            .map_or(0, |l| l.chars().count() + 1);
        let excerpt = source[start..end].replace('\n', "\\n");
        m.push_str(&format!(", column {column}, near {excerpt:?}"));
    }
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        let text = c.to_string();
        m.push_str(": ");
        m.push_str(&text[..floor(&text, EXCERPT * 4)]);
        cause = c.source();
    }
    EngineError::Template(m)
}

const EXCERPT: usize = 120;

/// The largest char boundary of `s` at or below `at`.
fn floor(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(system: Option<&str>, user: &str) -> Vec<Message> {
        let mut v = Vec::new();
        if let Some(s) = system {
            v.push(Message {
                role: Role::System,
                content: s.into(),
            });
        }
        v.push(Message {
            role: Role::User,
            content: user.into(),
        });
        v
    }

    #[test]
    fn raise_exception_surfaces_as_an_error() {
        let t = ChatTemplate::new(known::GEMMA3, Some("<bos>".into()), None);
        let bad = vec![Message {
            role: Role::Assistant,
            content: "hi".into(),
        }];
        let err = t.render(&bad).unwrap_err().to_string();
        assert!(err.contains("alternate"), "{err}");
    }

    #[test]
    fn user_content_is_trimmed_by_llama_but_not_by_qwen() {
        let llama = ChatTemplate::new(known::LLAMA3_1, Some("<|begin_of_text|>".into()), None);
        let qwen = ChatTemplate::new(known::QWEN2_5, None, None);
        assert!(llama
            .render(&msgs(None, "  hi  "))
            .unwrap()
            .contains("\n\nhi<|eot_id|>"));
        assert!(qwen
            .render(&msgs(None, "  hi  "))
            .unwrap()
            .contains("\n  hi  <|im_end|>"));
    }

    #[test]
    fn a_template_that_loops_without_end_runs_out_of_fuel() {
        let t = ChatTemplate::new(
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            None,
            None,
        );
        let err = t.render(&msgs(None, "hi")).unwrap_err().to_string();
        assert!(err.contains("steps of work"), "{err}");
    }

    #[test]
    fn a_template_that_writes_without_end_is_stopped_at_the_bound() {
        let t = ChatTemplate::new(
            "{% for i in range(100000) %}{% for j in range(100000) %}{{ messages[0].content }}{% endfor %}{% endfor %}",
            None,
            None,
        );
        let user = "x".repeat(4096);
        let err = t.render(&msgs(None, &user)).unwrap_err().to_string();
        assert!(err.contains("MiB for one prompt"), "{err}");
    }

    #[test]
    fn the_panels_templates_render_a_long_conversation_within_the_bounds() {
        let mut turns = msgs(Some("be brief"), "q");
        for i in 0..50 {
            turns.push(Message {
                role: if i % 2 == 0 {
                    Role::Assistant
                } else {
                    Role::User
                },
                content: "x".repeat(2000),
            });
        }
        for source in [known::QWEN2_5, known::LLAMA3_1, known::PHI3_5] {
            let t = ChatTemplate::new(source, Some("<bos>".into()), Some("<eos>".into()));
            assert!(t.render(&turns).is_ok(), "{source:.40}");
        }
    }
}
