"""The book's MCP server (POST /api/mcp on `minfer book serve`) over real
HTTP: raw JSON-RPC for each protocol revision (the 2025-06-18 and 2025-11-25
handshake, the stateless 2026-07-28) and each error path, then the MCP Python
SDK as a real client. Expectations come from book.json and glossary.json as
loaded, never from particular prose."""
import asyncio
import json

import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.shared.exceptions import MCPError

from book_server import BookServer, book_root
from openapi_check import check_against_spec

MCP = "/api/mcp"
STATELESS = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
TOOLS = ["list_chapters", "get_chapter", "search_glossary", "get_section", "search"]


def content_json(name):
    return json.loads((book_root() / "book" / "content" / name).read_text())


def glossary_matches(query):
    """The ids search_glossary should answer: term matches, then definition-only matches."""
    q = query.lower()
    glossary = content_json("glossary.json")
    by_term = [e["id"] for e in glossary if q in e["term"].lower()]
    by_definition = [e["id"] for e in glossary if q not in e["term"].lower() and q in e["definition"].lower()]
    return by_term + by_definition


def glossary_queries():
    glossary = content_json("glossary.json")
    # A term in another case (if there is one), and a query nothing matches.
    return ([glossary[0]["term"].swapcase()] if glossary else []) + ["zq-no-such-term-qz"]


@pytest.fixture(scope="module")
def server():
    with BookServer("--rate-limit", 6000000, "--rate-burst", 100000) as s:
        yield s


@pytest.fixture(scope="module")
def spec():
    return json.loads((book_root() / "book" / "site" / "openapi.json").read_text())


def post(server, spec, body, headers=None):
    """POSTs to /api/mcp; checks the answer against /openapi.json; (status, headers, parsed body or None)."""
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})}
    answer = server.request("POST", MCP, body=body, headers=h)
    document = check_against_spec(spec, MCP, "POST", answer)
    assert "mcp-session-id" not in answer[1]  # the server keeps no sessions
    return answer[0], answer[1], document


def rpc(server, spec, method, params=None, headers=None, id=1):
    message = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return post(server, spec, message, headers)


def stateless(server, spec, method, params=None, version=STATELESS, headers=None):
    """A 2026-07-28 request: the _meta envelope, and the headers that mirror it."""
    params = {**(params or {}), "_meta": {META_VERSION: version, META_CAPABILITIES: {}}}
    h = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    if method == "tools/call":
        h["Mcp-Name"] = params["name"]
    return rpc(server, spec, method, params, {**h, **(headers or {})})


def result_of(answer):
    status, _, body = answer
    assert status == 200, body
    assert body["jsonrpc"] == "2.0" and "result" in body, body
    return body["result"]


def error_of(answer, status, null_id=False):
    got, _, body = answer
    assert got == status, body
    if null_id:
        assert body["id"] is None
    return body["error"]["code"]


def check_tools(tools_result, call):
    """tools/list has the three tools; each call's structuredContent fits the
    tool's outputSchema and is what book.json and glossary.json hold. `call`
    runs tools/call and returns its result."""
    tools = {t["name"]: t for t in tools_result["tools"]}
    assert list(tools) == TOOLS
    for t in tools.values():
        assert t["inputSchema"]["type"] == "object"
        Draft202012Validator.check_schema(t["outputSchema"])

    def structured(name, arguments):
        result = call(name, arguments)
        assert result["isError"] is False
        Draft202012Validator(tools[name]["outputSchema"]).validate(result["structuredContent"])
        # The same content as text, for clients that read only text.
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
        return result["structuredContent"]

    chapters = content_json("book.json")["chapters"]
    listed = structured("list_chapters", {})["chapters"]
    assert [c["slug"] for c in listed] == [c["slug"] for c in chapters]
    first = chapters[0]
    chapter = structured("get_chapter", {"slug": first["slug"]})
    assert chapter["markdown"] == (book_root() / "book" / "content" / first["slug"] / "index.md").read_text()
    assert [s["slug"] for s in chapter["sections"]] == [s["slug"] for s in first["sections"]]
    for query in glossary_queries():
        found = structured("search_glossary", {"query": query})
        assert [m["id"] for m in found["matches"]] == glossary_matches(query)

    missing = call("get_chapter", {"slug": "no-such-chapter"})
    assert missing["isError"] is True
    assert "no-such-chapter" in missing["content"][0]["text"]

    # A section's source, by its slug alone.
    last = chapters[-1]
    section = structured("get_section", {"slug": last["sections"][0]["slug"]})
    assert section["chapter"] == last["slug"] and section["title"] == last["sections"][0]["title"]
    path = book_root() / "book" / "content" / last["slug"] / (last["sections"][0]["slug"] + ".md")
    assert section["markdown"] == path.read_text()
    assert call("get_section", {"slug": "no-such-section"})["isError"] is True
    # The prose: a phrase that only one section uses comes back with that section first, an excerpt around it.
    found = structured("search", {"query": "kv-transfer-port"})["results"]
    assert found and found[0]["slug"] == "prefill-and-decode-disaggregation", found
    assert "kv-transfer-port" in found[0]["excerpt"] and found[0]["matches"] >= 1
    counts = [r["matches"] for r in structured("search", {"query": "warp"})["results"]]
    assert counts == sorted(counts, reverse=True) and 1 <= len(counts) <= 20
    assert structured("search", {"query": "zzz-no-such-words-zzz"})["results"] == []


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_handshake_revision(server, spec, version):
    init = result_of(rpc(server, spec, "initialize", {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}}))
    assert init["protocolVersion"] == version
    assert "tools" in init["capabilities"]
    assert init["serverInfo"]["name"] == "minfer-book"

    status, _, body = post(server, spec, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                           {"MCP-Protocol-Version": version})
    assert status == 202 and body is None

    header = {"MCP-Protocol-Version": version}
    assert result_of(rpc(server, spec, "ping", {}, header)) == {}
    listed = result_of(rpc(server, spec, "tools/list", {}, header))
    assert "resultType" not in listed  # a 2026-07-28 field
    check_tools(listed, lambda name, args: result_of(
        rpc(server, spec, "tools/call", {"name": name, "arguments": args}, header)))


def test_initialize_answers_a_version_it_does_not_speak_with_its_latest(server, spec):
    for asked in ("2024-11-05", "2025-03-26", STATELESS):
        assert result_of(rpc(server, spec, "initialize", {"protocolVersion": asked}))["protocolVersion"] == "2025-11-25"


def test_stateless_revision(server, spec):
    discover = result_of(stateless(server, spec, "server/discover"))
    assert discover["resultType"] == "complete"
    assert set(discover["supportedVersions"]) == {"2025-06-18", "2025-11-25", STATELESS}
    assert "tools" in discover["capabilities"]
    assert discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "minfer-book"
    assert discover["cacheScope"] == "public" and discover["ttlMs"] > 0

    listed = result_of(stateless(server, spec, "tools/list"))
    assert listed["resultType"] == "complete"

    def call(name, arguments):
        result = result_of(stateless(server, spec, "tools/call", {"name": name, "arguments": arguments}))
        assert result["resultType"] == "complete"
        return result

    check_tools(listed, call)
    # No handshake in this revision: initialize's companion ping is gone too.
    assert error_of(stateless(server, spec, "ping"), 404) == -32601


def test_stateless_envelope_and_headers_are_checked(server, spec):
    # No _meta envelope.
    assert error_of(rpc(server, spec, "tools/list", {}, {"MCP-Protocol-Version": STATELESS,
                                                         "Mcp-Method": "tools/list"}), 400) == -32602
    # Headers that disagree with the body.
    assert error_of(stateless(server, spec, "tools/list", headers={"Mcp-Method": "tools/call"}), 400) == -32020
    assert error_of(stateless(server, spec, "tools/call", {"name": "list_chapters", "arguments": {}},
                              headers={"Mcp-Name": "get_chapter"}), 400) == -32020
    # A version it does not serve.
    status, _, body = stateless(server, spec, "tools/list", version="2099-01-01")
    assert status == 400 and body["error"]["code"] == -32022
    assert body["error"]["data"]["requested"] == "2099-01-01"
    assert STATELESS in body["error"]["data"]["supported"]
    # An unsupported MCP-Protocol-Version header is a 400 for any message.
    assert error_of(rpc(server, spec, "tools/list", {}, {"MCP-Protocol-Version": "1999-01-01"}), 400) == -32022
    status, _, _ = post(server, spec, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"MCP-Protocol-Version": "1999-01-01"})
    assert status == 400


def test_json_rpc_errors(server, spec):
    assert error_of(post(server, spec, b'{"jsonrpc": "2.0", "id": 1, "method": '), 400, null_id=True) == -32700
    assert error_of(post(server, spec, b"[]"), 400, null_id=True) == -32600
    assert error_of(post(server, spec, [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]), 400, null_id=True) == -32600
    assert error_of(post(server, spec, b'"ping"'), 400, null_id=True) == -32600
    assert error_of(post(server, spec, {"jsonrpc": "1.0", "id": 1, "method": "ping"}), 400) == -32600
    assert error_of(post(server, spec, {"jsonrpc": "2.0", "id": 1, "method": ["ping"]}), 400) == -32600
    assert error_of(post(server, spec, {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}), 400, True) == -32600

    assert error_of(rpc(server, spec, "no/such/method"), 200) == -32601
    for params in ({"name": "no_such_tool", "arguments": {}},
                   {"arguments": {}},
                   {"name": "get_chapter", "arguments": {}},
                   {"name": "get_chapter", "arguments": {"slug": 7}},
                   {"name": "get_chapter", "arguments": {"slug": "x", "extra": 1}},
                   {"name": "search_glossary", "arguments": {}},
                   {"name": "search_glossary", "arguments": {"query": ["kv"]}},
                   {"name": "list_chapters", "arguments": {"slug": "x"}}):
        assert error_of(rpc(server, spec, "tools/call", params), 200) == -32602, params

    # A string id comes back as sent; a client's response is acknowledged.
    assert rpc(server, spec, "ping", id="req-9")[2]["id"] == "req-9"
    assert post(server, spec, {"jsonrpc": "2.0", "id": 5, "result": {}})[0] == 202
    # Still serving.
    assert server.alive()
    assert result_of(rpc(server, spec, "ping")) == {}


def test_transport_rules(server, spec):
    # A person who follows llms.txt's link gets a page that says what the address is.
    status, headers, body = server.request("GET", MCP, headers={"Accept": "text/html,application/xhtml+xml"})
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b"Model Context Protocol" in body and b"/developers" in body
    for method in ("GET", "DELETE"):
        status, headers, body = server.request(method, MCP, headers={"Accept": "text/event-stream"})
        assert status == 405 and headers["allow"] == "POST"
        assert json.loads(body)["error"]["code"] == -32600

    # DNS rebinding: a page from another origin may not call the server.
    for origin in ("http://evil.example", "http://evil.example:8080", "null"):
        status, _, body = post(server, spec, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"Origin": origin})
        assert status == 403
        assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32000
    # What a rebinding attack sends: a name that resolved to this server, in Origin and Host alike.
    status, _, _ = post(server, spec, {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        {"Origin": f"http://evil.example:{server.port}", "Host": f"evil.example:{server.port}"})
    assert status == 403
    for origin in ("http://localhost:3000", "http://127.0.0.1", server.base_url):
        assert post(server, spec, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"Origin": origin})[0] == 200

    assert post(server, spec, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"Accept": "text/html"})[0] == 406
    assert post(server, spec, b"ping", {"Content-Type": "text/plain"})[0] == 415
    assert server.alive()


# ---- the MCP Python SDK as a real client ------------------------------------------


async def sdk_session(url, mode):
    async with Client(url, mode=mode) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == TOOLS

        async def call(name, arguments):
            result = await client.call_tool(name, arguments)
            return result.model_dump(by_alias=True, exclude_none=True, mode="json")

        results = {}
        for name, arguments in (("list_chapters", {}),
                                ("get_chapter", {"slug": content_json("book.json")["chapters"][-1]["slug"]}),
                                ("get_chapter", {"slug": "no-such-chapter"}),
                                *(("search_glossary", {"query": q}) for q in glossary_queries())):
            results[(name, json.dumps(arguments))] = await call(name, arguments)
        with pytest.raises(MCPError) as refused:
            await client.call_tool("get_chapter", {})
        return client.protocol_version, results, refused.value.code


@pytest.mark.parametrize("mode, version", [("legacy", "2025-11-25"), ("auto", STATELESS)])
def test_python_sdk_client(server, mode, version):
    negotiated, results, refused_code = asyncio.run(sdk_session(f"{server.base_url}{MCP}", mode))
    # auto probes server/discover first, and so speaks the stateless revision.
    assert negotiated == version
    assert refused_code == -32602
    chapters = content_json("book.json")["chapters"]
    listed = results[("list_chapters", "{}")]
    assert [c["slug"] for c in listed["structuredContent"]["chapters"]] == [c["slug"] for c in chapters]
    last = results[("get_chapter", json.dumps({"slug": chapters[-1]["slug"]}))]
    assert last["structuredContent"]["slug"] == chapters[-1]["slug"]
    assert results[("get_chapter", json.dumps({"slug": "no-such-chapter"}))]["isError"] is True
    for q in glossary_queries():
        found = results[("search_glossary", json.dumps({"query": q}))]["structuredContent"]["matches"]
        assert [m["id"] for m in found] == glossary_matches(q)
    assert server.alive()
