"""The book's JSON API over real HTTP against `minfer book serve`: the
chapters as book.json has them, ETag revalidation, the error statuses as
problem+json, the rate limit (429, Retry-After, recovery), and every answer
checked against the OpenAPI document the server publishes at /openapi.json."""
import json
import re
import socket
import time

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_openapi

from book_server import BookServer, book_root
from openapi_check import check_against_spec

CHAPTERS = "/api/v1/chapters"
CHAPTER = "/api/v1/chapters/{slug}"


def book_json():
    return json.loads((book_root() / "book" / "content" / "book.json").read_text())


@pytest.fixture(scope="module")
def server():
    # A bucket no test here can empty; the rate-limit test starts its own server.
    with BookServer("--rate-limit", 6000000, "--rate-burst", 100000) as s:
        yield s


@pytest.fixture(scope="module")
def spec(server):
    status, headers, body = server.request("GET", "/openapi.json")
    assert status == 200
    assert headers["content-type"] == "application/json"
    doc = json.loads(body)
    validate_openapi(doc)
    return doc


def test_openapi_document_is_the_one_in_the_repository(server, spec):
    assert spec == json.loads((book_root() / "book" / "site" / "openapi.json").read_text())
    assert spec["openapi"].startswith("3.1")
    assert {CHAPTERS, CHAPTER, "/api/mcp"} <= set(spec["paths"])


def test_chapters_are_book_json(server, spec):
    listing = check_against_spec(spec, CHAPTERS, "GET", server.request("GET", CHAPTERS))
    assert listing["version"] == "v1"
    expected = book_json()["chapters"]
    assert [c["slug"] for c in listing["chapters"]] == [c["slug"] for c in expected]
    for got, want in zip(listing["chapters"], expected):
        for key in ("number", "slug", "title", "summary", "description"):
            assert got[key] == want[key]
        assert got["url"] == f"/chapters/{want['slug']}"
        assert got["markdown_url"] == f"/chapters/{want['slug']}.md"
        assert [s["slug"] for s in got["sections"]] == [s["slug"] for s in want["sections"]]
        for s, w in zip(got["sections"], want["sections"]):
            assert (s["title"], s["summary"], s["status"]) == (w["title"], w["summary"], w["status"])
            assert s["url"] == f"/chapters/{want['slug']}/{w['slug']}"
            assert s["markdown_url"] == s["url"] + ".md"


def test_each_chapter_has_its_overview(server, spec):
    content = book_root() / "book" / "content"
    for want in book_json()["chapters"]:
        chapter = check_against_spec(spec, CHAPTER, "GET", server.request("GET", f"{CHAPTERS}/{want['slug']}"))
        assert chapter["slug"] == want["slug"]
        assert chapter["markdown"] == (content / want["slug"] / "index.md").read_text()
        assert len(chapter["sections"]) == len(want["sections"])


def test_head_has_the_headers_of_get_and_no_body(server, spec):
    slug = book_json()["chapters"][0]["slug"]
    for path, template in ((CHAPTERS, CHAPTERS), (f"{CHAPTERS}/{slug}", CHAPTER)):
        get = server.request("GET", path)
        head = server.request("HEAD", path)
        check_against_spec(spec, template, "HEAD", head)
        assert head[0] == 200
        assert head[1]["etag"] == get[1]["etag"]
        assert head[1]["content-type"] == get[1]["content-type"]


def test_head_answers_end_with_their_headers(server):
    # On a raw keep-alive connection: any byte after a HEAD answer's headers
    # would be read as the start of the next answer.
    slug = book_json()["chapters"][0]["slug"]
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        for path, status in ((f"{CHAPTERS}/no-such-chapter", 404), (CHAPTERS, 200), ("/api/mcp", 405),
                             (f"{CHAPTERS}/{slug}", 200), ("/openapi.json", 200)):
            sock.sendall(f"HEAD {path} HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode())
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                assert chunk, "the server closed the connection"
                data += chunk
            head, rest = data.split(b"\r\n\r\n", 1)
            assert head.startswith(f"HTTP/1.1 {status} ".encode()), head
            sock.settimeout(0.2)
            try:
                rest += sock.recv(65536)
            except socket.timeout:
                pass
            sock.settimeout(5)
            assert rest == b"", f"HEAD {path} sent a body"


def test_if_none_match_gives_304(server, spec):
    _, headers, _ = server.request("GET", CHAPTERS)
    etag = headers["etag"]
    assert re.fullmatch(r'"[0-9a-f]{16}"', etag)
    assert headers["cache-control"] == "public, max-age=300"
    for value in (etag, f"W/{etag}", f'"0123456789abcdef", {etag}', "*"):
        answer = server.request("GET", CHAPTERS, headers={"If-None-Match": value})
        check_against_spec(spec, CHAPTERS, "GET", answer)
        assert answer[0] == 304 and answer[2] == b""
        assert answer[1]["etag"] == etag
    stale = server.request("GET", CHAPTERS, headers={"If-None-Match": '"0123456789abcdef"'})
    assert stale[0] == 200
    # Each resource has its own validator.
    slug = book_json()["chapters"][0]["slug"]
    assert server.request("GET", f"{CHAPTERS}/{slug}")[1]["etag"] != etag


def problem_of(spec, template, method, answer, status):
    assert answer[0] == status
    assert answer[1]["content-type"] == "application/problem+json"
    problem = check_against_spec(spec, template, method, answer)
    assert problem["status"] == status
    return problem


def test_errors_are_problem_json(server, spec):
    problem = problem_of(spec, CHAPTER, "GET", server.request("GET", f"{CHAPTERS}/no-such-chapter"), 404)
    assert problem["instance"] == f"{CHAPTERS}/no-such-chapter"
    assert "no-such-chapter" in problem["detail"]
    problem_of(spec, CHAPTER, "GET", server.request("GET", f"{CHAPTERS}/%zz"), 400)
    problem_of(spec, CHAPTER, "GET", server.request("GET", f"{CHAPTERS}/ab%4"), 400)

    for method in ("POST", "PUT", "DELETE", "PATCH"):
        answer = server.request(method, CHAPTERS, body=b"{}")
        assert answer[0] == 405
        assert answer[1]["allow"] == "GET, HEAD"
        assert answer[1]["content-type"] == "application/problem+json"
    problem_of(spec, CHAPTERS, "GET", server.request("GET", CHAPTERS, headers={"Accept": "text/html"}), 406)
    # JSON through a wildcard is fine.
    assert server.request("GET", CHAPTERS, headers={"Accept": "text/html, */*;q=0.1"})[0] == 200

    # Unknown /api paths: 404 problems too, rate-limited like the rest.
    for path in ("/api", "/api/v2/chapters", "/api/v1/sections"):
        status, headers, body = server.request("GET", path)
        assert status == 404 and headers["content-type"] == "application/problem+json"
        Draft202012Validator({**spec, "$ref": "#/components/schemas/Problem"}).validate(json.loads(body))
        assert "ratelimit" in headers
    assert server.alive()


def test_rate_limit_429_then_recovery(spec):
    with BookServer("--rate-limit", 60, "--rate-burst", 5) as server:
        remaining = []
        for _ in range(5):
            answer = server.request("GET", CHAPTERS)
            check_against_spec(spec, CHAPTERS, "GET", answer)
            assert answer[0] == 200
            assert answer[1]["ratelimit-policy"] == '"burst";q=5;w=5'
            remaining.append(int(re.search(r";r=(\d+)", answer[1]["ratelimit"]).group(1)))
        assert remaining == [4, 3, 2, 1, 0]

        # MCP and unknown paths count too, so the bucket stays empty for them.
        refused = server.request("GET", CHAPTERS)
        problem = problem_of(spec, CHAPTERS, "GET", refused, 429)
        assert "retry" in problem["detail"].lower()
        retry_after = int(refused[1]["retry-after"])
        assert retry_after >= 1
        assert re.search(r";r=0;", refused[1]["ratelimit"])
        assert server.request("POST", "/api/mcp", body={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                              headers={"Content-Type": "application/json"})[0] == 429
        # /openapi.json is outside /api and its limit.
        assert server.request("GET", "/openapi.json")[0] == 200

        time.sleep(retry_after + 0.2)
        recovered = server.request("GET", CHAPTERS)
        assert recovered[0] == 200
        assert server.alive()


def test_any_page_may_read_the_keyless_api(server):
    """CORS: answers say any origin may read them (and their rate-limit and cache headers);
    a preflight is answered without a body; the MCP endpoint is not opened this way."""
    for path in (CHAPTERS, f"{CHAPTERS}/introduction", "/openapi.json", f"{CHAPTERS}/no-such-chapter"):
        status, headers, _ = server.request("GET", path, headers={"Origin": "https://example.org"})
        assert headers["access-control-allow-origin"] == "*", path
        assert "RateLimit" in headers.get("access-control-expose-headers", "") or path == "/openapi.json"
    status, headers, body = server.request("OPTIONS", CHAPTERS, headers={
        "Origin": "https://example.org", "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "if-none-match"})
    assert status == 204 and body == b""
    assert headers["access-control-allow-origin"] == "*"
    assert headers["access-control-allow-methods"] == "GET, HEAD"
    assert "If-None-Match" in headers["access-control-allow-headers"]
    _, headers, _ = server.request("POST", "/api/mcp", body=b"{}", headers={"Origin": "https://example.org"})
    assert "access-control-allow-origin" not in headers
