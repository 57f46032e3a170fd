//! The tools. Each reads its arguments ([`super::args`]), checks the caller
//! ([`super::access`]) and calls the HTTP route that does the same thing, so that limits,
//! validation, scopes, timeouts and answers are the server's own, not a copy of them.

use std::collections::BTreeMap;

use axum::extract::{Extension, Path, State};
use axum::http::Uri;
use axum::Json;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, RoleServer};

use super::access::Caller;
use super::args::{parse, schema, DeleteArgs, DocumentArgs, ExplainArgs, MethodsArgs, RetrieveArgs, UpsertArgs};
use super::reply::reply;
use super::McpServer;
use crate::api::{ApiError, ApiJson, DeleteRequest, RetrieveRequest, UpsertRequest};
use crate::auth::Access;
use crate::inspect::WalkRequest;
use crate::state::parse_namespace;
use crate::{edits, handlers, inspect};

/// The tools that write: listed only to a caller that may write somewhere.
pub const WRITE_TOOLS: &[&str] = &["upsert_documents", "delete_documents"];

const RETRIEVE: &str = "Search the indexed corpus for the passages that answer a question, best first, \
with their ids, titles, text, scores, document ids and metadata, and the method's trace. \
Use it before answering any question about the corpus's content, and quote or cite the passages by id. \
It is built for multi-hop questions, whose answer is spread over several passages linked by an entity \
(\"Who founded the company that built the lighthouse on Varn Island?\" needs the lighthouse's passage and \
the company's): ask the whole question in one call, since the default method `auto` walks an entity graph \
from the question's entities to the passages of every hop; splitting it into one call per hop is rarely \
better. `k` is how many passages come back: one per hop at least, 5 to 10 for most questions, more when \
the question asks for a list. Narrow the search with `filter` on the passages' metadata, or pick a \
corpus with `namespace`.";

const EXPLAIN: &str = "Show why a graph method ranks what it ranks for a question: the entities the \
question links to (seeds, with their weights and why they were linked), the facts nearest to it, and the \
heaviest entities and passages of the Personalized PageRank walk, with the edges between them. Use it to \
understand or debug a `retrieve` result (a hop that was missed, an entity that was not linked); it is \
not needed to answer questions. Needs an index with an entity graph.";

const GET_DOCUMENT: &str = "Read a whole document: all passages of the document with this id, or of \
the document holding the passage with this id (pass a retrieved passage's `id` or `doc`). Use it when a \
retrieved passage is cut short of what is needed, or to read what surrounds it.";

const LIST_METHODS: &str = "List the retrieval methods `retrieve` accepts, with what each does, \
whether it needs an entity graph or an LLM, its parameters as configured, and the default method. \
`auto` (the default) is the best measured method without an LLM and needs no choice; look here only to \
pick another on purpose.";

const UPSERT: &str = "Add or replace documents in the corpus (needs write access). A passage with a \
`doc` replaces all passages of that document; one without, whose `id` is an existing passage's, \
replaces that passage; any other is added as a document of its own. Every method, the entity graph \
included, sees the change when the call returns. `dry_run` counts what would change.";

const DELETE: &str = "Delete documents (all their passages) or single passages by id (needs write \
access). An unknown id fails the call and nothing is deleted. `dry_run` counts what would change.";

#[tool_router(router = tool_router, vis = "pub(super)")]
impl McpServer {
    #[tool(name = "retrieve", description = RETRIEVE, input_schema = schema::<RetrieveArgs>(),
           annotations(title = "Retrieve passages", read_only_hint = true, open_world_hint = false))]
    async fn retrieve(&self, arguments: JsonObject, context: RequestContext<RoleServer>) -> CallToolResult {
        reply(self.run_retrieve(arguments, &context).await)
    }

    #[tool(name = "explain", description = EXPLAIN, input_schema = schema::<ExplainArgs>(),
           annotations(title = "Explain a graph walk", read_only_hint = true, open_world_hint = false))]
    async fn explain(&self, arguments: JsonObject, context: RequestContext<RoleServer>) -> CallToolResult {
        reply(self.run_explain(arguments, &context).await)
    }

    #[tool(name = "get_document", description = GET_DOCUMENT, input_schema = schema::<DocumentArgs>(),
           annotations(title = "Read a document", read_only_hint = true, open_world_hint = false))]
    async fn get_document(&self, arguments: JsonObject, context: RequestContext<RoleServer>) -> CallToolResult {
        reply(self.run_get_document(arguments, &context).await)
    }

    #[tool(name = "list_methods", description = LIST_METHODS, input_schema = schema::<MethodsArgs>(),
           annotations(title = "List retrieval methods", read_only_hint = true, open_world_hint = false))]
    async fn list_methods(&self, arguments: JsonObject, context: RequestContext<RoleServer>) -> CallToolResult {
        reply(self.run_list_methods(arguments, &context).await)
    }

    #[tool(name = "upsert_documents", description = UPSERT, input_schema = schema::<UpsertArgs>(),
           annotations(title = "Add or replace documents", read_only_hint = false, destructive_hint = true,
                       idempotent_hint = true, open_world_hint = false))]
    async fn upsert_documents(&self, arguments: JsonObject, context: RequestContext<RoleServer>) -> CallToolResult {
        reply(self.run_upsert(arguments, &context).await)
    }

    #[tool(name = "delete_documents", description = DELETE, input_schema = schema::<DeleteArgs>(),
           annotations(title = "Delete documents", read_only_hint = false, destructive_hint = true,
                       idempotent_hint = false, open_world_hint = false))]
    async fn delete_documents(&self, arguments: JsonObject, context: RequestContext<RoleServer>) -> CallToolResult {
        reply(self.run_delete(arguments, &context).await)
    }
}

impl McpServer {
    pub(super) fn tools() -> ToolRouter<McpServer> {
        Self::tool_router()
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, ApiError> {
        Caller::of(context, self.local.as_ref())
    }

    async fn run_retrieve(
        &self,
        arguments: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<hoprag::response::RetrieveResponse, ApiError> {
        let caller = self.caller(context)?;
        let a: RetrieveArgs = parse(arguments)?;
        let namespace = caller.namespace(a.namespace.as_deref(), Access::Read)?;
        let request = RetrieveRequest {
            query: a.query,
            method: a.method,
            k: a.k,
            options: BTreeMap::new(),
            filter: a.filter,
            namespace,
        };
        let Json(response) =
            handlers::retrieve(State(self.app().clone()), Extension(caller.scope), ApiJson(request)).await?;
        Ok(response)
    }

    async fn run_explain(
        &self,
        arguments: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<inspect::WalkResponse, ApiError> {
        let caller = self.caller(context)?;
        let a: ExplainArgs = parse(arguments)?;
        let namespace = caller.namespace(a.namespace.as_deref(), Access::Read)?;
        let request = WalkRequest { query: a.query, method: a.method, nodes: a.nodes, include: Vec::new(), namespace };
        let Json(walk) = inspect::walk(State(self.inspect.clone()), Extension(caller.scope), ApiJson(request)).await?;
        Ok(walk)
    }

    async fn run_get_document(
        &self,
        arguments: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<crate::api::DocumentResponse, ApiError> {
        let caller = self.caller(context)?;
        let a: DocumentArgs = parse(arguments)?;
        let namespace = caller.namespace(a.namespace.as_deref(), Access::Read)?;
        let Json(document) =
            edits::get_document(State(self.app().clone()), Extension(caller.scope), Ok(Path(a.id)), uri(namespace)?)
                .await?;
        Ok(document)
    }

    async fn run_list_methods(
        &self,
        arguments: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<crate::api::MethodList, ApiError> {
        let caller = self.caller(context)?;
        let a: MethodsArgs = parse(arguments)?;
        let namespace = caller.namespace(a.namespace.as_deref(), Access::Read)?;
        let Json(methods) =
            handlers::methods(State(self.app().clone()), Extension(caller.scope), uri(namespace)?).await?;
        Ok(methods)
    }

    async fn run_upsert(
        &self,
        arguments: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<crate::api::EditResponse, ApiError> {
        let caller = self.caller(context)?;
        let a: UpsertArgs = parse(arguments)?;
        let namespace = caller.namespace(a.namespace.as_deref(), Access::Write)?;
        let request =
            UpsertRequest { passages: a.passages.into_iter().map(Into::into).collect(), dry_run: a.dry_run, namespace };
        let Json(edited) = edits::upsert(State(self.app().clone()), Extension(caller.scope), ApiJson(request)).await?;
        Ok(edited)
    }

    async fn run_delete(
        &self,
        arguments: JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<crate::api::EditResponse, ApiError> {
        let caller = self.caller(context)?;
        let a: DeleteArgs = parse(arguments)?;
        let namespace = caller.namespace(a.namespace.as_deref(), Access::Write)?;
        let request = DeleteRequest { ids: a.ids, dry_run: a.dry_run, namespace };
        let Json(edited) =
            edits::delete_many(State(self.app().clone()), Extension(caller.scope), ApiJson(request)).await?;
        Ok(edited)
    }
}

/// The URL a route without a body reads its namespace from; the name is checked by
/// `Namespace::new` first, so only its letters reach the URL.
fn uri(namespace: Option<String>) -> Result<Uri, ApiError> {
    let query = match namespace {
        None => String::new(),
        Some(name) => format!("?namespace={}", parse_namespace(Some(&name))?.as_str()),
    };
    format!("/mcp{query}").parse().map_err(|e| ApiError::internal(format!("the namespace's URL: {e}")))
}
