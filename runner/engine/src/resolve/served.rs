//! A served model: which server, under which name, with which tokenizer, and what the
//! run records and says about it.

use super::{Asked, ResolveError};
use crate::panel::Panel;
use crate::served::client::{RetryPolicy, Traffic};
use crate::served::prompt::LocalPrompts;
use crate::served::wire::redact;
use crate::served::{ServedBackend, ServedOptions};
use crate::Loaded;
use std::sync::Arc;

/// A served model's settings (`--endpoint`, `--api-key-env`, `--tokenizer`, ...).
pub struct ServedSettings {
    /// The server's API root; without it a panel entry's `endpoint` serves.
    pub endpoint: Option<String>,
    pub api_key: Option<ApiKey>,
    /// Render prompts with this panel model's (or folder's) chat template and tokenizer
    /// and send them to the completions endpoint.
    pub tokenizer: Option<String>,
    pub concurrency: usize,
    pub server_deterministic: bool,
    pub policy: RetryPolicy,
    /// The counters the backend keeps; the caller may watch them from the start, the
    /// first connection's retries included.
    pub traffic: Arc<Traffic>,
}

/// No server unless the panel names one; the defaults of the command line's flags.
impl Default for ServedSettings {
    fn default() -> ServedSettings {
        ServedSettings {
            endpoint: None,
            api_key: None,
            tokenizer: None,
            concurrency: crate::served::DEFAULT_CONCURRENCY,
            server_deterministic: false,
            policy: RetryPolicy::default(),
            traffic: Arc::default(),
        }
    }
}

/// The API key: the environment variable named for it, and its value where it is set
/// (read by the caller; needed only when the model is served).
pub struct ApiKey {
    pub var: String,
    pub value: Option<String>,
}

/// Where a served model is asked for, and as what.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    /// The API root, e.g. `http://host:8000/v1` (unchecked until connecting).
    pub endpoint: String,
    /// The model's name on the server.
    pub model: String,
    /// The tokenizer of completions mode; chat mode without one.
    pub tokenizer: Option<String>,
    /// The run's label: a panel name as the panel has it, else the served name's last
    /// part, safe as a folder name.
    pub label: String,
}

/// See [`super::server`].
pub(super) fn server(
    model: &str,
    settings: &ServedSettings,
    panel: &Panel,
) -> Result<Option<Server>, ResolveError> {
    let entry = panel.models.get(model);
    let (endpoint, served_name, tokenizer) = match (&settings.endpoint, entry) {
        (Some(e), _) => (e.clone(), model.to_string(), settings.tokenizer.clone()),
        (None, Some(entry)) if entry.endpoint.is_some() => (
            entry.endpoint.clone().unwrap_or_default(),
            entry.repo.clone(),
            Some(
                settings
                    .tokenizer
                    .clone()
                    .unwrap_or_else(|| model.to_string()),
            ),
        ),
        _ => {
            if settings.tokenizer.is_some() || settings.api_key.is_some() {
                return Err(ResolveError::Settings(
                    "--tokenizer and --api-key-env apply to served models: give --endpoint".into(),
                ));
            }
            return Ok(None);
        }
    };
    // A panel name labels the run as the panel does; a served name may be a path or
    // an org/name pair.
    let label = if entry.is_some() {
        model.to_string()
    } else {
        crate::folder_name::component(served_name.rsplit('/').next().unwrap_or(&served_name))
    };
    Ok(Some(Server {
        endpoint,
        model: served_name,
        tokenizer,
        label,
    }))
}

/// `server`'s model, connected: the backend as the run records it, and its counters.
pub(super) fn connect(
    server: &Server,
    asked: &Asked,
    settings: &ServedSettings,
    panel: &Panel,
) -> Result<(Loaded, Arc<Traffic>), ResolveError> {
    check_endpoint(&server.endpoint)?;
    if settings.concurrency == 0 {
        return Err(ResolveError::Settings(
            "--concurrency must be at least 1".into(),
        ));
    }
    let api_key = match &settings.api_key {
        Some(ApiKey { value: Some(v), .. }) => Some(v.clone()),
        Some(ApiKey { var, value: None }) => {
            return Err(ResolveError::Settings(format!(
                "--api-key-env {var}: the environment variable is not set"
            )))
        }
        None => None,
    };
    let prompts = server
        .tokenizer
        .as_deref()
        .map(|t| LocalPrompts::load(t, panel))
        .transpose()
        .map_err(ResolveError::Tokenizer)?;
    let backend = ServedBackend::connect_with(
        ServedOptions {
            endpoint: server.endpoint.clone(),
            model: server.model.clone(),
            api_key,
            prompts,
            concurrency: settings.concurrency,
            server_deterministic: settings.server_deterministic,
            policy: settings.policy,
        },
        settings.traffic.clone(),
    )
    .map_err(|source| ResolveError::Connect {
        endpoint: redact(&server.endpoint),
        source,
    })?;
    let identity = backend.identity(&server.label, asked.sampling, asked.max_new_tokens);
    let traffic = backend.traffic();
    let warning = (!settings.server_deterministic).then(|| {
        "the server is not declared deterministic (--server-deterministic): samples may depend \
         on its batching, so a resumed or repeated run may not reproduce them"
            .to_string()
    });
    let loaded = Loaded {
        context: backend.context(),
        backend: Box::new(backend),
        label: server.label.clone(),
        identity,
        warnings: warning.into_iter().collect(),
    };
    Ok((loaded, traffic))
}

/// Refuses an endpoint no request could reach, at once rather than after the whole
/// retry window: it must be an http(s) URL with a host (the server's API root, such as
/// `http://localhost:8000/v1`).
pub(super) fn check_endpoint(endpoint: &str) -> Result<(), ResolveError> {
    let shown = redact(endpoint);
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"));
    let Some(rest) = rest else {
        return Err(ResolveError::Settings(format!(
            "--endpoint {shown}: not an http:// or https:// URL; give the server's API root, \
             such as http://localhost:8000/v1"
        )));
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') || endpoint.chars().any(char::is_whitespace) {
        return Err(ResolveError::Settings(format!(
            "--endpoint {shown}: no host in the URL; give the server's API root, such as \
             http://localhost:8000/v1"
        )));
    }
    // What the HTTP client itself cannot parse (`http://[::1`, a port over 65535) would
    // fail every request the same way: say so now, not after --retry-for.
    if let Err(e) = ureq::get(endpoint).request_url() {
        return Err(ResolveError::Settings(format!(
            "--endpoint {shown}: not a valid URL ({}); give the server's API root, such as \
             http://localhost:8000/v1",
            redact(&e.to_string())
        )));
    }
    Ok(())
}
