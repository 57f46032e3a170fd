//! The two transports: streamable HTTP at `/mcp` of the HTTP server, and stdio.

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServiceExt;

use super::{LocalAccess, McpServer};
use crate::dataset::Inspect;
use crate::middleware;
use crate::Server;

/// `/mcp`: the streamable HTTP transport, behind the server's token check (every HTTP
/// request, and so every tool call, carries its own token; the tools read its scope).
///
/// Stateless (no MCP sessions, a JSON answer to each POST): any server of a deployment on
/// one store can answer any request, as for the other routes. Its body limit is
/// `serve.max_body_bytes`. The `Host` header is checked against loopback names (and the
/// host of `serve.addr`) unless the server requires tokens, against DNS rebinding: a
/// page in a browser cannot add the bearer token.
pub fn router<S: Clone + Send + Sync + 'static>(inspect: Arc<Inspect>) -> Router<S> {
    let state = inspect.app.clone();
    let settings = &state.settings;
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(settings.max_body_bytes);
    if state.tokens.required() {
        config = config.disable_allowed_hosts();
    } else if let Some(host) = addr_host(&settings.addr) {
        config.allowed_hosts.push(host);
    }
    let service = StreamableHttpService::new(
        move || Ok(McpServer::new(inspect.clone(), None)),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(state, middleware::require_token))
}

/// The host of a `HOST:PORT` address, unless it is a wildcard one.
fn addr_host(addr: &str) -> Option<String> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host).trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty() && host != "0.0.0.0" && host != "::").then(|| host.to_string())
}

impl Server {
    /// Serves the MCP tools on stdin and stdout (`hoprag mcp`) until the client closes
    /// them, limited to what `access` allows. Nothing else may write to stdout meanwhile.
    pub async fn serve_mcp_stdio(&self, access: LocalAccess) -> hoprag::error::Result<()> {
        let inspect = Arc::new(Inspect {
            app: self.state.clone(),
            dataset: self.dataset.clone(),
            eval_busy: self.eval_busy.clone(),
        });
        let running = McpServer::new(inspect, Some(access))
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| hoprag::Error::Other(format!("MCP over stdio: {e}")))?;
        running.waiting().await.map_err(|e| hoprag::Error::Other(format!("MCP over stdio: {e}")))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_host_of_an_address() {
        assert_eq!(super::addr_host("example.org:8080").as_deref(), Some("example.org"));
        assert_eq!(super::addr_host("[::1]:80").as_deref(), Some("::1"));
        assert_eq!(super::addr_host("0.0.0.0:8080"), None);
    }
}
