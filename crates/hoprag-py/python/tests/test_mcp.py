"""The MCP server, driven by the official Python client (the `mcp` package): `hoprag mcp`
on stdio, and `/mcp` of a running `hoprag serve` (streamable HTTP) with scoped tokens.
Retrieval through a tool returns the passages `hoprag query --json` prints; what a
caller may not do is a tool error (`isError`), never a change."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from conftest import REPO, need_model, required, run_cli

try:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
except ImportError as e:  # scripts/python-dev.sh installs it
    if required():
        raise
    pytest.skip(f"the mcp package is not installed: {e}", allow_module_level=True)

QUESTION = "Who founded the company that built the lighthouse on Varn Island?"
READ_TOOLS = {"retrieve", "explain", "get_document", "list_methods"}
WRITE_TOOLS = {"upsert_documents", "delete_documents"}


@pytest.fixture(scope="module")
def store(cli: Path, tmp_path_factory) -> Path:
    """The demo corpus as the default namespace (with its entity graph) and as namespace
    `other` (without one)."""
    need_model("minilm")
    store = tmp_path_factory.mktemp("mcp") / "store"
    corpus = str(REPO / "demo" / "corpus.jsonl")
    subprocess.run([str(cli), "index", "-q", "--corpus", corpus, "--out", str(store)], check=True)
    subprocess.run(
        [str(cli), "index", "-q", "--no-graph", "--corpus", corpus, "--out", str(store), "--namespace", "other"],
        check=True,
    )
    return store


def cli_passages(cli: Path, store: Path, method: str, k: int, *extra: str) -> list[dict]:
    out = run_cli(cli, "query", "--index", str(store), *extra, "--json", "--method", method, "-k", str(k), QUESTION)
    return out["passages"]


def error_of(result) -> dict:
    """The tool error's body: the HTTP route's `{"error": {"code", "message"}}`."""
    assert result.is_error, result
    return json.loads(result.content[0].text)["error"]


@asynccontextmanager
async def stdio_session(cli: Path, *args: str):
    params = StdioServerParameters(command=str(cli), args=["mcp", *args])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(url: str, token: str):
    headers = {"Authorization": f"Bearer {token}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def check_retrieve_matches_the_cli(session, cli: Path, store: Path) -> None:
    for method, k in [("bm25", 3), ("ppr", 4), ("auto", 5)]:
        result = await session.call_tool("retrieve", {"query": QUESTION, "method": method, "k": k})
        assert not result.is_error, result.content
        got = result.structured_content
        assert (got["query"], got["method"], got["k"]) == (QUESTION, method, k)
        assert got["passages"] == cli_passages(cli, store, method, k), method
        assert got["trace"]["steps"], "the method's trace comes with the passages"


def test_stdio_read_only(cli: Path, store: Path):
    async def run():
        async with stdio_session(cli, "--index", str(store)) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == READ_TOOLS, "no write tools without --allow-write"
            for tool in tools.values():
                assert len(tool.description) > 100, tool.name
                assert tool.input_schema["additionalProperties"] is False, tool.name
            assert tools["retrieve"].input_schema["required"] == ["query"]

            await check_retrieve_matches_the_cli(s, cli, store)

            # A write tool without write access: a tool error, and nothing changes.
            e = error_of(await s.call_tool("delete_documents", {"ids": ["p57"]}))
            assert e["code"] == "read_only" and "--allow-write" in e["message"], e
            e = error_of(await s.call_tool("upsert_documents", {"passages": [{"text": "A new passage."}]}))
            assert e["code"] == "read_only", e
            doc = await s.call_tool("get_document", {"id": "p57"})
            assert not doc.is_error and [p["id"] for p in doc.structured_content["passages"]] == ["p57"]

            # Bad arguments are tool errors that name the argument; limits are the server's.
            e = error_of(await s.call_tool("retrieve", {"query": QUESTION, "top_k": 3}))
            assert "top_k" in e["message"], e
            e = error_of(await s.call_tool("retrieve", {"query": QUESTION, "k": 100000}))
            assert e["code"] == "limit_exceeded" and "k" in e["message"] and "serve.max_k" in e["message"], e
            e = error_of(await s.call_tool("retrieve", {"query": QUESTION, "k": "five"}))
            assert e["message"].startswith("k: "), e
            e = error_of(await s.call_tool("retrieve", {"query": "  "}))
            assert "query" in e["message"], e
            e = error_of(await s.call_tool("retrieve", {"query": QUESTION, "method": "nope"}))
            assert e["code"] == "unknown_method", e
            e = error_of(await s.call_tool("retrieve", {"query": QUESTION, "namespace": "../etc"}))
            assert e["code"] == "invalid_namespace", e
            e = error_of(await s.call_tool("retrieve", {"query": QUESTION, "filter": {"year": {"$near": 1}}}))
            assert e["code"] == "invalid_filter", e

            # The other read tools answer the HTTP routes' documents.
            walk = await s.call_tool("explain", {"query": QUESTION, "nodes": 12})
            assert not walk.is_error, walk.content
            assert walk.structured_content["seeds"] and 2 <= len(walk.structured_content["nodes"]) <= 12
            methods = await s.call_tool("list_methods", {})
            listed = [m["name"] for m in methods.structured_content["methods"]]
            assert listed == [m["name"] for m in run_cli(cli, "methods", "--json")]
            assert methods.structured_content["default"] == "auto"

    anyio.run(run)


def test_stdio_namespaces_and_writes(cli: Path, store: Path):
    new = {"id": "mcp-1", "title": "Orrin Vale", "text": "Orrin Vale is a glassworks town famed for blue lanterns."}

    async def run():
        async with stdio_session(cli, "--index", str(store), "--namespace", "other", "--allow-write") as s:
            assert {t.name for t in (await s.list_tools()).tools} == READ_TOOLS | WRITE_TOOLS
            # The first --namespace is the one a call without one works on; no other is served.
            got = await s.call_tool("retrieve", {"query": QUESTION, "method": "dense", "k": 3})
            assert got.structured_content["passages"] == cli_passages(cli, store, "dense", 3, "--namespace", "other")
            e = error_of(await s.call_tool("retrieve", {"query": QUESTION, "namespace": "default"}))
            assert e["code"] == "not_found", e

            edited = await s.call_tool("upsert_documents", {"passages": [new]})
            assert not edited.is_error and edited.structured_content["changed"], edited.content
            found = await s.call_tool("retrieve", {"query": "glassworks town with blue lanterns", "method": "bm25", "k": 1})
            assert found.structured_content["passages"][0]["id"] == "mcp-1"
            e = error_of(await s.call_tool("delete_documents", {"ids": ["no-such-id"]}))
            assert e["code"] == "not_found" and "no-such-id" in e["message"], e
            deleted = await s.call_tool("delete_documents", {"ids": ["mcp-1"]})
            assert not deleted.is_error and deleted.structured_content["changed"], deleted.content

    anyio.run(run)


def new_token(cli: Path, store: Path, name: str, *scopes: str) -> str:
    out = subprocess.run(
        [str(cli), "token", "new", "--name", name, *scopes, "--tokens", str(store / "tokens.toml")],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def test_http_transport_with_scoped_tokens(cli: Path, store: Path):
    reader = new_token(cli, store, "mcp-reader", "--read", "default")
    writer = new_token(cli, store, "mcp-writer", "--write", "other")
    server = subprocess.Popen(
        [str(cli), "serve", "--index", str(store), "--addr", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = server.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:"), line
        url = line.split()[-1]

        # No token, or a wrong one: the token check answers before MCP does.
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            request = urllib.request.Request(
                f"{url}/mcp",
                data=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
                headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code == 401

        async def run():
            async with http_session(url, reader) as s:
                assert {t.name for t in (await s.list_tools()).tools} == READ_TOOLS
                await check_retrieve_matches_the_cli(s, cli, store)
                # Read-only: the write tools are tool errors, and nothing changes.
                e = error_of(await s.call_tool("delete_documents", {"ids": ["p57"]}))
                assert e["code"] == "read_only", e
                e = error_of(await s.call_tool("upsert_documents", {"passages": [{"text": "A new passage."}]}))
                assert e["code"] == "read_only", e
                doc = await s.call_tool("get_document", {"id": "p57"})
                assert not doc.is_error and doc.structured_content["passages"][0]["id"] == "p57"
                # A namespace the token does not open answers as one that does not exist.
                e = error_of(await s.call_tool("retrieve", {"query": QUESTION, "namespace": "other"}))
                assert e["code"] == "not_found", e
                e = error_of(await s.call_tool("get_document", {"id": "p57", "namespace": "other"}))
                assert e["code"] == "not_found", e
                e = error_of(await s.call_tool("retrieve", {"query": QUESTION, "k": 0}))
                assert "k" in e["message"], e

            async with http_session(url, writer) as s:
                assert {t.name for t in (await s.list_tools()).tools} == READ_TOOLS | WRITE_TOOLS
                e = error_of(await s.call_tool("retrieve", {"query": QUESTION}))
                assert e["code"] == "not_found", "the writer of `other` does not open the default namespace"
                e = error_of(await s.call_tool("delete_documents", {"ids": ["p57"]}))
                assert e["code"] == "not_found", e
                dry = await s.call_tool("delete_documents", {"ids": ["p57"], "namespace": "other", "dry_run": True})
                assert not dry.is_error and dry.structured_content["dry_run"], dry.content

        anyio.run(run)
    finally:
        server.terminate()
        server.wait(timeout=30)
