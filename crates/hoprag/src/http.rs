//! JSON over HTTP with retries: the one transport the OpenAI-compatible clients share.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Delay before the first retry; doubled on each further retry.
    pub initial_backoff_ms: u64,
    pub max_backoff_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_retries: 5, initial_backoff_ms: 500, max_backoff_ms: 30_000 }
    }
}

impl RetryPolicy {
    fn backoff(&self, attempt: u32) -> Duration {
        let ms = self.initial_backoff_ms.saturating_mul(1u64 << attempt.min(20));
        Duration::from_millis(ms.min(self.max_backoff_ms))
    }
}

/// Outcome of a POST, with how many retries it took.
pub struct Response {
    pub body: Value,
    pub retries: u32,
}

/// POSTs `body` as JSON and parses a JSON answer. Retries on connection errors, time-outs,
/// 429 and 5xx with exponential back-off, waiting at least what a `Retry-After` header
/// asks (in seconds, capped at the policy's longest back-off); other statuses fail at
/// once with the server's message.
pub fn post_json(
    client: &reqwest::blocking::Client,
    url: &str,
    api_key: Option<&str>,
    body: &Value,
    policy: &RetryPolicy,
) -> Result<Response> {
    let mut attempt = 0;
    loop {
        let mut req = client.post(url).json(body);
        if let Some(key) = api_key {
            req = req.bearer_auth(key);
        }
        let mut retry_after = None;
        let failure = match req.send() {
            Ok(resp) => {
                let status = resp.status();
                retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(|secs| Duration::from_millis(secs.saturating_mul(1000).min(policy.max_backoff_ms)));
                let text = resp.text().unwrap_or_default();
                if status.is_success() {
                    return serde_json::from_str(&text).map(|body| Response { body, retries: attempt }).map_err(|e| {
                        Error::Http {
                            url: url.to_string(),
                            message: format!("answer is not JSON ({e}): {}", snippet(&text)),
                        }
                    });
                }
                let message = format!("status {status}: {}", snippet(&text));
                if status.as_u16() != 429 && !status.is_server_error() {
                    return Err(Error::Http { url: url.to_string(), message });
                }
                message
            }
            Err(e) => format!("request failed: {e}"),
        };
        if attempt >= policy.max_retries {
            return Err(Error::Http {
                url: url.to_string(),
                message: format!("{failure} (gave up after {} retries)", policy.max_retries),
            });
        }
        log::warn!("{url}: {failure}; retrying");
        std::thread::sleep(policy.backoff(attempt).max(retry_after.unwrap_or_default()));
        attempt += 1;
    }
}

fn snippet(text: &str) -> String {
    let t: String = text.chars().take(300).collect();
    if t.len() < text.len() {
        format!("{t}…")
    } else {
        t
    }
}

/// Joins a base URL (with or without `/v1`, with or without a trailing slash) and an
/// endpoint path such as `embeddings`.
pub fn endpoint(base_url: &str, path: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/{path}")
    } else {
        format!("{base}/v1/{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_accepts_both_base_styles() {
        assert_eq!(endpoint("http://h:8000", "embeddings"), "http://h:8000/v1/embeddings");
        assert_eq!(endpoint("http://h:8000/v1/", "embeddings"), "http://h:8000/v1/embeddings");
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let p = RetryPolicy { max_retries: 9, initial_backoff_ms: 100, max_backoff_ms: 1000 };
        assert_eq!(p.backoff(0), Duration::from_millis(100));
        assert_eq!(p.backoff(2), Duration::from_millis(400));
        assert_eq!(p.backoff(8), Duration::from_millis(1000));
    }
}
