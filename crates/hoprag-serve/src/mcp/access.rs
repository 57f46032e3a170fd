//! Who calls a tool, and what they may touch. Over HTTP, the bearer token of the very
//! request that carries the call (checked by the same middleware as every route, which
//! hands its [`Scope`] on); over stdio, what `hoprag mcp` was started with: the
//! namespaces named on its command line (all, when none is), and writes only with
//! `--allow-write`. Either way the server's own check follows ([`AppState::served`]),
//! so no call reaches a namespace the token does not open.

use std::sync::Arc;

use axum::http::StatusCode;
use rmcp::service::RequestContext;
use rmcp::RoleServer;

use crate::api::ApiError;
use crate::auth::{Access, Scope};
use crate::state::{no_namespace, parse_namespace, AppState};
use hoprag::store::Namespace;

/// What a local (stdio) server was started to allow.
#[derive(Debug, Clone)]
pub struct LocalAccess {
    /// The only namespaces served, when named; the first is the one a call that names
    /// none works on.
    pub namespaces: Vec<Namespace>,
    /// Whether the write tools may write.
    pub write: bool,
}

/// The caller of one tool call.
pub struct Caller {
    pub scope: Arc<Scope>,
    /// The local server's limits (none over HTTP: the token's scope is the limit).
    local: Option<LocalAccess>,
}

impl Caller {
    /// The caller of the call `context` carries: over HTTP, the scope the token check put
    /// on the request; over stdio, `local`.
    pub fn of(context: &RequestContext<RoleServer>, local: Option<&LocalAccess>) -> Result<Caller, ApiError> {
        if let Some(local) = local {
            return Ok(Caller { scope: Arc::new(Scope::everything("hoprag mcp")), local: Some(local.clone()) });
        }
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<Scope>>())
            .map(|scope| Caller { scope: scope.clone(), local: None })
            .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "no token on this call"))
    }

    /// The namespace a call works on (its `namespace` argument, checked by
    /// `Namespace::new`), if the caller may use it for `access`; what to hand the route.
    pub fn namespace(&self, name: Option<&str>, access: Access) -> Result<Option<String>, ApiError> {
        let Some(local) = &self.local else {
            // The route checks the name and the token's scope itself.
            return Ok(name.map(String::from));
        };
        let namespace = match (name, local.namespaces.first()) {
            (None, Some(first)) => first.clone(),
            (name, _) => parse_namespace(name)?,
        };
        if !local.namespaces.is_empty() && !local.namespaces.contains(&namespace) {
            return Err(no_namespace(&namespace));
        }
        if access == Access::Write && !local.write {
            return Err(read_only());
        }
        Ok(Some(namespace.to_string()))
    }

    /// Whether the caller may write to some namespace of the store: the write tools are
    /// listed only then (they answer a tool error otherwise).
    pub async fn writes_somewhere(&self, state: &Arc<AppState>) -> bool {
        if let Some(local) = &self.local {
            return local.write;
        }
        let lister = state.clone();
        let names = match tokio::task::spawn_blocking(move || lister.namespaces.list()).await {
            Ok(Ok(names)) => names,
            // Listed rather than hidden when the store cannot say: a call still checks.
            _ => return true,
        };
        names.iter().any(|n| self.scope.allows(n, Access::Write))
    }
}

fn read_only() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "read_only",
        "this MCP server is read-only: start `hoprag mcp` with --allow-write to let it write",
    )
}
