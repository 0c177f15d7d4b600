"""Ask AI through real servers: `minfer book serve --ask-ai-url` in front of a
real `minfer serve` (the bundled 260K-parameter model: its answers are
nonsense, the wiring is what is tested). The question, the page's text and the
glossary entries it names go to the model's server; the answer streams back
to the page with its sources; without --ask-ai-url the panel says Ask AI is
off. In a browser (playwright, Debian's chromium) and over plain HTTP."""
import json
import re

import pytest
from playwright.sync_api import sync_playwright

from book_server import BookServer
from minfer_server import Server
from test_book_figures import CHROMIUM

PAGE = "/chapters/distributed-inference/prefill-and-decode-disaggregation"


@pytest.fixture(scope="module")
def model_server():
    with Server("--threads", "1") as s:
        yield s


@pytest.fixture(scope="module")
def book(model_server):
    # 80 characters of the page and 32-token answers: the bundled model's context is 512 tokens,
    # and its 512-piece vocabulary spends about a token a character.
    with BookServer("--ask-ai-url", model_server.base_url, "--ask-ai-context-chars", "80",
                    "--ask-ai-max-tokens", "32") as b:
        yield b


def events_of(body):
    out = []
    for block in body.decode().split("\n\n"):
        if block.startswith("data: "):
            payload = block[6:]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def test_a_question_streams_an_answer_with_its_sources(book, model_server):
    status, _, body = book.get("/api/ask")
    info = json.loads(body)
    assert status == 200 and info["enabled"] is True and "the question" in info["sends"]
    status, headers, body = book.request("POST", "/api/ask", {"page": PAGE, "question": "What is a KV transfer?"},
                                         headers={"Content-Type": "application/json"}, timeout=120)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = events_of(body)
    assert events[-1] == "[DONE]"
    sources = events[0]["sources"]
    assert sources[0] == {"title": "Prefill and decode disaggregation", "url": PAGE}
    answer = "".join(e.get("delta", "") for e in events[1:-1] if isinstance(e, dict))
    assert answer.strip(), events
    assert not any(isinstance(e, dict) and "error" in e for e in events)
    # The model's server saw one chat request.
    m = model_server.metrics()
    assert m["minfer:generation_tokens_total"] > 0


@pytest.mark.parametrize("body, needle", [
    ({"question": "x"}, "'page' must be"),
    ({"page": PAGE, "question": ""}, "'question' must be"),
    ({"page": PAGE, "question": "x" * 2001}, "'question' must be"),
    ({"page": "/chapters/nowhere", "question": "x"}, "no page /chapters/nowhere"),
    ([1, 2], "must be a JSON object"),
])
def test_bad_questions_get_a_400(book, body, needle):
    status, _, answer = book.request("POST", "/api/ask", body, headers={"Content-Type": "application/json"})
    assert status == 400 and needle in json.loads(answer)["error"]


def test_an_answering_server_that_is_gone_is_an_error_event():
    with BookServer("--ask-ai-url", "http://127.0.0.1:9", "--ask-ai-context-chars", "200") as b:
        status, _, body = b.request("POST", "/api/ask", {"page": PAGE, "question": "Anyone?"},
                                    headers={"Content-Type": "application/json"})
        events = events_of(body)
        assert status == 200 and events[-1] == "[DONE]"
        assert any(isinstance(e, dict) and "did not answer" in e.get("error", "") for e in events)


def browser_page(base_url):
    p = sync_playwright().start()
    browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type in ("error", "warning") and errors.append(m.text))
    page.goto(base_url + PAGE)
    return p, browser, page, errors


def test_the_panel_asks_and_shows_the_answer_and_sources(book):
    p, browser, page, errors = browser_page(book.base_url)
    try:
        page.get_by_role("button", name="Ask AI").click()
        note = page.locator("#ask-ai-note")
        note.wait_for()
        page.wait_for_function("() => document.getElementById('ask-ai-note').textContent.length > 0")
        assert "answering server" in note.inner_text()
        page.get_by_label("Ask a question about this page").fill("What does the router do?")
        page.get_by_role("button", name="Ask", exact=True).click()
        page.wait_for_function("() => document.getElementById('ask-ai-answer').textContent.trim().length > 0 && "
                               "!document.getElementById('ask-ai-answer').hasAttribute('aria-busy')", timeout=60_000)
        links = page.locator("#ask-ai-sources a").evaluate_all("as => as.map((a) => a.getAttribute('href'))")
        assert links[0] == PAGE
        assert not errors, errors
    finally:
        browser.close()
        p.stop()


def test_without_a_url_ask_ai_is_off():
    with BookServer() as b:
        status, _, body = b.get("/api/ask")
        assert status == 200 and json.loads(body)["enabled"] is False
        status, _, body = b.request("POST", "/api/ask", {"page": PAGE, "question": "x"},
                                    headers={"Content-Type": "application/json"})
        assert status == 503 and "off" in json.loads(body)["error"]
        p, browser, page, errors = browser_page(b.base_url)
        try:
            page.get_by_role("button", name="Ask AI").click()
            page.wait_for_function("() => document.getElementById('ask-ai-note').textContent.length > 0")
            assert "Ask AI is off here" in page.locator("#ask-ai-note").inner_text()
            assert page.get_by_role("button", name="Ask", exact=True).is_disabled()
            assert not errors, errors
        finally:
            browser.close()
            p.stop()
