//! The tools' arguments: typed, with the JSON Schemas the tools list shows, and read with
//! unknown fields denied. A tool takes its arguments as a raw object and reads them here,
//! so that a bad argument is a tool error (`isError`) naming it, which the calling model
//! reads and can correct, rather than a protocol error it never sees.

use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::api::{ApiError, NewPassage};

/// `retrieve`: the fields of `POST /v1/retrieve` (per-request `options` aside).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveArgs {
    /// The question, in natural language (not blank). Ask the whole multi-hop question at
    /// once: the graph methods find the passages of every hop.
    pub query: String,
    /// A retrieval method of `list_methods` (default `auto`: the best measured method
    /// that needs no LLM). `auto` suits almost every question; `bm25` for exact names or
    /// codes, `dense` for a one-hop question, `ppr` or `phasegraph` to force the
    /// multi-hop graph walk.
    #[serde(default)]
    pub method: Option<String>,
    /// How many passages to return, best first (at least 1, at most the server's
    /// `max_k`; default the server's `default_k`, 5). A two- or three-hop question needs
    /// a passage per hop: 5 to 10 is usual.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub k: Option<usize>,
    /// The namespace (corpus) to search; the server's default one when left out.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Only passages whose `meta` matches this MongoDB-style filter, e.g. `{"year":
    /// {"$gte": 2000}, "source": {"$in": ["wiki", "news"]}}` (operators `$eq`, `$ne`,
    /// `$gt`, `$gte`, `$lt`, `$lte`, `$in`, `$nin`, `$exists`, `$and`, `$or`, `$not`).
    #[serde(default)]
    #[schemars(with = "Option<JsonObject>")]
    pub filter: Option<Value>,
}

/// `explain`: the fields of `POST /v1/graph/walk`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainArgs {
    /// The question (not blank).
    pub query: String,
    /// `ppr` (default), `phasegraph`, or `auto` (which explains the graph method it
    /// chooses): whose entity linking and walk to explain.
    #[serde(default)]
    pub method: Option<String>,
    /// Most nodes (entities and passages) to return, heaviest first (2 to 60; default 40).
    #[serde(default)]
    #[schemars(range(min = 2, max = 60))]
    pub nodes: Option<usize>,
    /// The namespace; the default one when left out.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `get_document`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentArgs {
    /// A document's id, or a passage's (the `id` or `doc` of a retrieved passage): the
    /// whole document holding it is returned.
    pub id: String,
    /// The namespace; the default one when left out.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `list_methods`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MethodsArgs {
    /// The namespace whose index decides what each method can do there (a graph, an
    /// LLM); the default one when left out.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `upsert_documents`: the fields of `PUT /v1/documents`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpsertArgs {
    /// The passages to write. A passage with a `doc` replaces all of that document's
    /// passages (with the passages of this call that name it); one without, whose `id`
    /// names an existing passage, replaces that passage; any other is a new document of
    /// its own.
    pub passages: Vec<PassageArg>,
    /// Count what would change; write nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// The namespace; the default one when left out.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// One passage to write, as a row of a JSONL corpus (`NewPassage`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PassageArg {
    /// Derived from the title and text when left out (the same content keeps its id).
    #[serde(default)]
    pub id: Option<String>,
    /// The document the passage belongs to; left out, the passage is a document of its own.
    #[serde(default)]
    pub doc: Option<String>,
    #[serde(default)]
    pub title: String,
    /// Not blank.
    pub text: String,
    /// Any JSON object (source, url, date, ...): returned with the passage, and what
    /// `filter` matches.
    #[serde(default)]
    pub meta: Option<JsonObject>,
}

impl From<PassageArg> for NewPassage {
    fn from(p: PassageArg) -> NewPassage {
        NewPassage { id: p.id, doc: p.doc, title: p.title, text: p.text, meta: p.meta }
    }
}

/// `delete_documents`: the fields of `POST /v1/delete`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    /// Ids of documents (all their passages go) or of single passages. An unknown id
    /// fails the call and nothing is deleted.
    pub ids: Vec<String>,
    /// Count what would change; write nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// The namespace; the default one when left out.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// The input schema of a tool whose arguments are `T`.
pub fn schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_input::<T>()
        .unwrap_or_else(|e| panic!("the input schema of {}: {e}", std::any::type_name::<T>()))
}

/// A tool's arguments read as `T`; the error names the argument at fault (`k: invalid
/// type: ...`, `unknown field `x`, expected one of ...`).
pub fn parse<T: DeserializeOwned>(arguments: JsonObject) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(Value::Object(arguments)).map_err(|e| {
        let path = e.path().to_string();
        let message = match path.as_str() {
            "." => e.inner().to_string(),
            _ => format!("{path}: {}", e.inner()),
        };
        ApiError::bad_request("invalid_request", message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(v: Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn bad_arguments_name_the_field() {
        let e = parse::<RetrieveArgs>(object(serde_json::json!({"query": "q", "top": 3}))).unwrap_err();
        assert!(e.message.contains("unknown field `top`"), "{}", e.message);
        let e = parse::<RetrieveArgs>(object(serde_json::json!({"query": "q", "k": -1}))).unwrap_err();
        assert!(e.message.starts_with("k: "), "{}", e.message);
        let e = parse::<RetrieveArgs>(object(serde_json::json!({"k": 2}))).unwrap_err();
        assert!(e.message.contains("missing field `query`"), "{}", e.message);
        let e = parse::<UpsertArgs>(object(serde_json::json!({"passages": [{"text": "t", "body": 1}]}))).unwrap_err();
        assert!(e.message.starts_with("passages[0].body: unknown field `body`"), "{}", e.message);
    }

    #[test]
    fn schemas_deny_other_fields() {
        let s = schema::<RetrieveArgs>();
        assert_eq!(s["additionalProperties"], Value::Bool(false), "{s:?}");
        assert_eq!(s["required"], serde_json::json!(["query"]));
    }
}
