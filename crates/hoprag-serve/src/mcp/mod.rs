//! The MCP server: the engine's retrieval as tools for an agent (Model Context Protocol,
//! on its official Rust SDK, `rmcp`). Two transports serve the same tools: stdio, for a
//! desktop or IDE agent that starts `hoprag mcp` itself ([`crate::Server::serve_mcp_stdio`]),
//! and streamable HTTP at `/mcp` of `hoprag serve` ([`transport::router`]), behind the
//! same bearer tokens and namespace scopes as every other route. docs/mcp.md.
//!
//! Tools: `retrieve`, `explain`, `get_document`, `list_methods`, and for a caller that
//! may write, `upsert_documents` and `delete_documents`. Each runs the HTTP route that does
//! the same ([`tools`]), so an answer is the route's JSON document (what `hoprag query
//! --json` prints, for `retrieve`) and an error is the route's, as a tool error.

mod access;
mod args;
mod reply;
mod tools;
mod transport;

pub use access::LocalAccess;
pub use transport::router;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::dataset::Inspect;
use crate::state::AppState;
use access::Caller;

const INSTRUCTIONS: &str = "hoprag answers questions about an indexed corpus with the passages that \
hold the answer, including multi-hop questions whose answer spans several passages. Call `retrieve` \
with the user's whole question and answer from the passages it returns, citing their ids; \
`get_document` reads a passage's whole document. The default method needs no choosing.";

/// One MCP server: the served namespaces (through the inspection state, which `explain`
/// needs), and, for a local server, what it was started to allow.
#[derive(Clone)]
pub struct McpServer {
    inspect: Arc<Inspect>,
    local: Option<LocalAccess>,
    tool_router: ToolRouter<McpServer>,
}

impl McpServer {
    pub(crate) fn new(inspect: Arc<Inspect>, local: Option<LocalAccess>) -> McpServer {
        McpServer { inspect, local, tool_router: Self::tools() }
    }

    fn app(&self) -> &Arc<AppState> {
        &self.inspect.app
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hoprag", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    /// Every tool, but the write tools only for a caller that may write somewhere: a model
    /// is not offered what it cannot do. (They still answer, with a tool error, when called.)
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let writes = match Caller::of(&context, self.local.as_ref()) {
            Ok(caller) => caller.writes_somewhere(self.app()).await,
            Err(_) => false,
        };
        let tools: Vec<Tool> = self
            .tool_router
            .list_all()
            .into_iter()
            .filter(|t| writes || !tools::WRITE_TOOLS.contains(&t.name.as_ref()))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.tool_router.call(ToolCallContext::new(self, request, context)).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_router.get(name).cloned()
    }
}
