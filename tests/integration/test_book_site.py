"""The book's site (`minfer book serve` and `minfer book build`) checked from
the outside: every page of book.json and its Markdown twin, the table of
contents, llms.txt and llms-full.txt, source links and the source view, the
build's refusal of broken links, and /source's refusal of anything outside the
repository. Structure only (book.json, glossary.json, reading.json): the prose
may change freely.

MINFER_BOOK_ROOT picks another checkout whose book to serve (default: this one)."""
import html.parser
import json
import os
import pathlib
import re
import shutil
import subprocess
import urllib.parse

import pytest

from book_server import BookServer
from conftest import ROOT, minfer_bin

BOOK_ROOT = pathlib.Path(os.environ.get("MINFER_BOOK_ROOT", ROOT))
CONTENT = BOOK_ROOT / "book" / "content"
BOOK = json.loads((CONTENT / "book.json").read_text())
GLOSSARY = json.loads((CONTENT / "glossary.json").read_text())
READING_GROUPS = json.loads((CONTENT / "reading_groups.json").read_text())


def chapter_path(c):
    return f"/chapters/{c['slug']}"


def section_path(c, s):
    return f"/chapters/{c['slug']}/{s['slug']}"


def all_pages():
    pages = ["/"]
    for c in BOOK["chapters"]:
        pages.append(chapter_path(c))
        pages += [section_path(c, s) for s in c["sections"]]
    return pages + ["/chapters/glossary", "/chapters/reading", "/about", "/privacy", "/developers"]


def twin(path):
    return "/index.md" if path == "/" else path + ".md"


@pytest.fixture(scope="module")
def server():
    s = BookServer(root=BOOK_ROOT)
    yield s
    s.stop()


def repository_files(root):
    """The files a copy of the repository needs: what git lists, else a walk without build outputs."""
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True)
    if out.returncode == 0 and out.stdout:
        return [f for f in out.stdout.decode().split("\0") if f]
    skip = {".git", ".venv", "__pycache__"}
    return [str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and not any(part in skip or part.startswith("build") for part in p.relative_to(root).parts)]


@pytest.fixture
def repo_copy(tmp_path):
    """A copy of the repository (no .git: the site walks its folders instead)."""
    dest = tmp_path / "repo"
    for f in repository_files(BOOK_ROOT):
        src = BOOK_ROOT / f
        if src.is_file() and not src.is_symlink():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / f)
    return dest


class Links(html.parser.HTMLParser):
    """Every href, the ids, the links inside <nav class="toc">, and the stylesheets and scripts."""

    def __init__(self):
        super().__init__()
        self.hrefs, self.ids, self.toc, self.classes, self.assets = [], set(), [], [], []
        self._toc_depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if a.get("class"):
            self.classes.append(a["class"])
        if tag == "nav" and "toc" in (a.get("class") or "").split():
            self._toc_depth = 1
        elif tag == "nav" and self._toc_depth:
            self._toc_depth += 1
        if tag in ("link", "script") and (a.get("href") or a.get("src")):
            self.assets.append(a.get("href") or a.get("src"))
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])
            if self._toc_depth:
                self.toc.append(a["href"])

    def handle_endtag(self, tag):
        if tag == "nav" and self._toc_depth:
            self._toc_depth -= 1


def parse(body):
    p = Links()
    p.feed(body.decode())
    return p


# ---- pages -------------------------------------------------------------------

@pytest.mark.parametrize("path", all_pages())
def test_every_page_and_its_markdown_twin(server, path):
    status, headers, body = server.get(path)
    assert status == 200, path
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert b"<nav class=\"toc\"" in body and b"</html>" in body
    status, headers, md = server.get(twin(path))
    assert status == 200, twin(path)
    assert headers["content-type"] == "text/markdown; charset=utf-8"
    assert md.startswith(b"# ") or md.startswith(b"> Status: in preparation."), md[:80]
    assert b"](src:" not in md and b"](glossary:" not in md  # made plain links in the twin


def test_the_table_of_contents_reaches_every_section(server):
    toc = parse(server.get("/")[2]).toc
    for c in BOOK["chapters"]:
        assert chapter_path(c) in toc
        for s in c["sections"]:
            assert section_path(c, s) in toc
    # Each section page marks itself in the contents, and outlines say they are outlines.
    for c in BOOK["chapters"]:
        for s in c["sections"]:
            body = server.get(section_path(c, s))[2].decode()
            assert f'<a href="{section_path(c, s)}" aria-current="page">' in body
            assert ('class="badge">In preparation' in body) == (s["status"] == "in-preparation"), s["slug"]


def test_chapter_pages_list_their_sections_and_link_onwards(server):
    for c in BOOK["chapters"]:
        page = parse(server.get(chapter_path(c))[2])
        main_links = page.hrefs[len(page.toc):]
        for s in c["sections"]:
            assert section_path(c, s) in main_links
    first = BOOK["chapters"][0]
    assert f'rel="next" href="{section_path(first, first["sections"][0])}"' in server.get(chapter_path(first))[2].decode()


def test_glossary_has_every_term_and_reading_every_group(server):
    glossary = parse(server.get("/chapters/glossary")[2])
    for g in GLOSSARY:
        assert g["id"] in glossary.ids
    assert "glossary-filter" in glossary.ids  # the client-side filter (hidden without JavaScript)
    reading = parse(server.get("/chapters/reading")[2])
    for group in READING_GROUPS:
        assert group["id"] in reading.ids


def test_internal_links_on_every_page_answer(server):
    seen = set()
    for path in all_pages():
        page = parse(server.get(path)[2])
        for href in page.hrefs + page.assets:
            target = urllib.parse.urldefrag(href)[0]
            if not target.startswith("/") or target.startswith("//") or target in seen:
                continue
            seen.add(target)
            status = server.get(target)[0]
            assert status == 200, f"{path} links to {href}: {status}"
    assert any(t.startswith("/static/") for t in seen)


def test_assets_are_served_by_the_site_itself(server):
    for path, kind in [("/static/style.css", "text/css"), ("/static/site.js", "text/javascript"),
                       ("/static/katex/katex.min.js", "text/javascript"),
                       ("/static/katex/contrib/auto-render.js", "text/javascript"),
                       ("/static/katex/katex.min.css", "text/css"),
                       ("/static/highlight/highlight.min.js", "text/javascript")]:
        status, headers, _ = server.get(path)
        assert status == 200, path
        assert headers["content-type"].startswith(kind), path
    css = server.get("/static/katex/katex.min.css")[2].decode()
    font = re.search(r"url\((fonts/[^)]+\.woff2)\)", css).group(1)
    assert server.get("/static/katex/" + font)[0] == 200
    # No page asks another host for anything.
    for path in all_pages():
        body = server.get(path)[2].decode()
        assert not re.search(r'(src|href)="(https?:)?//(?!127\.0\.0\.1)[^"]*\.(js|css)', body), path


def test_figures_have_their_own_pages(server):
    figures = BOOK_ROOT / "book" / "figures"
    used = set()
    for md in CONTENT.rglob("*.md"):
        used |= set(re.findall(r"```figure\s*\nid:\s*([a-z0-9-]+)", md.read_text()))
    for fid in used:
        assert (figures / f"{fid}.js").exists(), fid
        status, headers, body = server.get(f"/figures/{fid}")
        assert status == 200
        assert f'data-figure="{fid}"'.encode() in body
        assert server.get(f"/figures/{fid}.js")[1]["content-type"].startswith("text/javascript")
        assert f"/figures/{fid}".encode() in server.get(f"/figures/{fid}.md")[2]


# ---- llms.txt ----------------------------------------------------------------

def parse_llms_txt(text):
    """llmstxt.org's shape: H1, blockquote, free paragraphs, then H2 sections of link lists."""
    lines = text.split("\n")
    assert lines[0].startswith("# "), "the first line is the H1 title"
    doc = {"title": lines[0][2:], "summary": "", "intro": [], "sections": []}
    i = 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    assert lines[i].startswith("> "), "a blockquote summary follows the title"
    doc["summary"] = lines[i][2:]
    i += 1
    for line in lines[i:]:
        if line.startswith("# "):
            raise AssertionError("only one H1")
        if line.startswith("## "):
            doc["sections"].append({"heading": line[3:], "text": [], "links": []})
        elif doc["sections"]:
            m = re.match(r"^- \[([^\]]+)\]\((\S+)\)(?:: (.+))?$", line)
            if m:
                doc["sections"][-1]["links"].append((m.group(1), m.group(2), m.group(3)))
            elif line.strip():
                assert not line.startswith("- "), f"a list item that is not a link: {line}"
                doc["sections"][-1]["text"].append(line)
        elif line.strip():
            doc["intro"].append(line)
    return doc


SEED_LLMS = ROOT.parent / "shared" / "seed" / "llms.txt"


def test_llms_txt_is_the_seeds_shape(server):
    """/llms.txt line for line as the seed the book was planned from, with this server as the host:
    the same headings in the same order, the same titles, numbering, link paths and descriptions,
    the same paragraphs (but where each says which of our files holds its entries)."""
    status, headers, body = server.get("/llms.txt")
    assert status == 200
    assert headers["content-type"] == "text/plain; charset=utf-8"
    ours = body.decode().splitlines()
    seed = SEED_LLMS.read_text().replace("https://learn-kernels.com", server.base_url).splitlines()
    where = re.compile(r" Entries live in .*$")  # the seed names another project's files
    assert [where.sub("", line) for line in ours] == [where.sub("", line) for line in seed]
    doc = parse_llms_txt(body.decode())
    assert doc["title"] == BOOK["title"]
    for c, section in zip(BOOK["chapters"], doc["sections"]):
        assert section["heading"] == f"{c['number']}. {c['title']}"
        assert section["text"] == [f"{c['summary']} {c['description']}"]
    # Every link answers: a page, an anchor of one, the API, the MCP endpoint.
    for section in doc["sections"]:
        for title, url, _ in section["links"]:
            assert url.startswith(server.base_url + "/"), url
            path = url[len(server.base_url):]
            page, _, anchor = path.partition("#")
            status, _, html = server.get(page)
            if page == "/api/mcp":  # Streamable HTTP: the endpoint takes POST; GET is refused, not missing
                assert status == 405, url
                continue
            assert status == 200, url
            if anchor:
                assert f'id="{anchor}"'.encode() in html, url
            if not page.startswith("/api/") and not page.endswith(".json"):
                assert server.get(page + ".md")[0] == 200, url  # each page's Markdown is its URL + .md



def test_llms_txt_links_follow_the_host(server):
    _, _, body = server.request("GET", "/llms.txt", headers={"Host": "book.example:8443", "X-Forwarded-Proto": "https"})
    assert "](https://book.example:8443/chapters/" in body.decode()
    _, _, body = server.request("GET", "/llms.txt", headers={"Host": "bad<host>"})  # not a host: links stay site-relative
    assert "](/chapters/" in body.decode() and "bad<host>" not in body.decode()


def test_llms_full_txt_holds_the_whole_book(server):
    status, headers, body = server.get("/llms-full.txt")
    assert status == 200
    assert headers["content-type"] == "text/plain; charset=utf-8"
    text = body.decode()
    assert text.startswith(f"# {BOOK['title']}\n")
    position = 0
    for c in BOOK["chapters"]:
        for s in c["sections"]:
            found = text.find(s["title"], position)
            assert found >= 0, f"{s['title']} missing or out of order"
            position = found
    for g in GLOSSARY:
        assert g["term"] in text
    assert "](src:" not in text


def test_build_base_url_makes_llms_txt_absolute(tmp_path):
    out = tmp_path / "site"
    proc = subprocess.run([minfer_bin(), "book", "build", "--root", str(BOOK_ROOT), "--out", str(out),
                           "--base-url", "https://book.example/"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = parse_llms_txt((out / "llms.txt").read_text())
    for section in doc["sections"]:
        for _, url, _ in section["links"]:
            assert url.startswith("https://book.example/"), url
    for path in all_pages():
        assert (out / (path.strip("/") or ".") / "index.html").is_file(), path
        assert (out / twin(path).lstrip("/")).is_file(), path
    assert (out / "llms-full.txt").is_file()
    assert (out / "static" / "site.js").is_file()
    assert (out / "source" / "cli" / "main.cpp" / "index.html").is_file()


# ---- source links ------------------------------------------------------------

def test_every_source_link_resolves_to_its_lines(server):
    checked = 0
    for path in all_pages():
        body = server.get(path)[2]
        assert b'href="src:' not in body and b'href="glossary:' not in body
        for href in parse(body).hrefs:
            if not href.startswith("/source/"):
                continue
            target, fragment = urllib.parse.urldefrag(href)
            status, headers, view = server.get(target)
            assert status == 200, f"{path}: {href}"
            assert headers["content-type"] == "text/html; charset=utf-8"
            if fragment:
                m = re.fullmatch(r"L(\d+)-L(\d+)", fragment)
                assert m, href
                first, last = int(m.group(1)), int(m.group(2))
                assert 1 <= first <= last, href
                ids = parse(view).ids
                assert f"L{first}" in ids and f"L{last}" in ids, href
                assert f"L{last + 1}" in ids or view.count(b'<a id="L') == last
            checked += 1
    source_links = sum(len(re.findall(r"\]\(src:", md.read_text())) for md in CONTENT.rglob("*.md"))
    assert checked >= (1 if source_links else 0)


def test_source_view_numbers_every_line(server):
    text = (BOOK_ROOT / "cli" / "main.cpp").read_text()
    status, _, body = server.get("/source/cli/main.cpp")
    assert status == 200
    ids = parse(body).ids
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    assert {f"L{n}" for n in range(1, lines + 1)} <= ids
    assert f"L{lines + 1}" not in ids
    assert b'class="language-cpp"' in body


def write_section_with(root, markdown):
    """Appends `markdown` to the first section of the copy's book."""
    c = BOOK["chapters"][0]
    page = root / "book" / "content" / c["slug"] / f"{c['sections'][0]['slug']}.md"
    page.write_text(page.read_text() + "\n" + markdown + "\n")
    return f"book/content/{c['slug']}/{c['sections'][0]['slug']}.md"


def build(root, out):
    return subprocess.run([minfer_bin(), "book", "build", "--root", str(root), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)


def test_the_real_book_builds(tmp_path):
    proc = build(BOOK_ROOT, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_build_fails_on_a_broken_source_link(repo_copy, tmp_path):
    page = write_section_with(repo_copy, "[gone](src:cli/main.cpp#no_such_symbol_anywhere)")
    proc = build(repo_copy, tmp_path / "site")
    assert proc.returncode == 1
    assert page in proc.stderr and "no_such_symbol_anywhere" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_build_fails_on_an_ambiguous_source_link(repo_copy, tmp_path):
    (repo_copy / "engine" / "twins_fixture.h").write_text(
        "namespace a {\nstruct Twin {};\n}\nnamespace b {\nstruct Twin {};\n}\n")
    page = write_section_with(repo_copy, "[twin](src:engine/twins_fixture.h#Twin)")
    proc = build(repo_copy, tmp_path / "site")
    assert proc.returncode == 1
    assert page in proc.stderr and "ambiguous" in proc.stderr and "engine/twins_fixture.h" in proc.stderr
    # Qualified, the same symbol resolves.
    page_path = repo_copy / page
    page_path.write_text(page_path.read_text().replace("#Twin)", "#b::Twin)"))
    proc = build(repo_copy, tmp_path / "site2")
    assert proc.returncode == 0, proc.stderr


def test_build_fails_on_unknown_glossary_ids_and_pages(repo_copy, tmp_path):
    page = write_section_with(repo_copy, "[x](glossary:no-such-term-here)")
    proc = build(repo_copy, tmp_path / "a")
    assert proc.returncode == 1 and page in proc.stderr and "no-such-term-here" in proc.stderr
    page_path = repo_copy / page
    page_path.write_text(page_path.read_text().replace("glossary:no-such-term-here", "/chapters/no-such-chapter"))
    proc = build(repo_copy, tmp_path / "b")
    assert proc.returncode == 1 and "/chapters/no-such-chapter" in proc.stderr


def test_serve_refuses_to_start_with_a_broken_link(repo_copy):
    write_section_with(repo_copy, "[gone](src:engine/no/such/file.cpp#X)")
    proc = subprocess.run([minfer_bin(), "book", "serve", "--port", "0", "--root", str(repo_copy)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "engine/no/such/file.cpp" in proc.stderr


# ---- what the server refuses ---------------------------------------------------

TRAVERSALS = ["/source/../../etc/passwd", "/source/%2e%2e/%2e%2e/etc/passwd", "/source/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
              "/source//etc/passwd", "/source/%2fetc%2fpasswd", "/source/.git/config", "/source/build/CMakeCache.txt",
              "/source/engine/../../../etc/passwd", "/source/engine%5c..%5c..%5cetc%5cpasswd",
              "/source/cli/main.cpp%00.html", "/source/", "/source/.venv/pyvenv.cfg"]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_source_traversal_is_not_found(server, path):
    status, _, body = server.get(path)
    assert status == 404, path
    assert b"root:" not in body
    assert server.get("/")[0] == 200  # still answering


def test_a_symlink_out_of_the_tree_is_not_served(repo_copy):
    (repo_copy / "engine" / "outside").symlink_to("/etc/passwd")
    (repo_copy / "engine" / "outside_dir").symlink_to("/etc")
    s = BookServer(root=repo_copy)
    try:
        for path in ["/source/engine/outside", "/source/engine/outside_dir/passwd", "/source/engine/outside_dir/hostname"]:
            assert s.get(path)[0] == 404, path
        assert s.get("/source/cli/main.cpp")[0] == 200
    finally:
        s.stop()


def test_unknown_paths_are_404_pages(server):
    status, headers, body = server.get("/no/such/page")
    assert status == 404 and headers["content-type"].startswith("text/html") and b"</html>" in body
    status, headers, _ = server.get("/chapters/no-such-chapter.md")
    assert status == 404 and headers["content-type"].startswith("text/markdown")


def test_a_404_page_does_not_echo_markup(server):
    status, _, body = server.get('/x"><script>alert(1)</script>')
    assert status == 404
    assert b"<script>alert" not in body and b'x"><' not in body


def test_pages_take_get_and_head_only(server):
    status, headers, _ = server.request("POST", "/about")
    assert status == 405
    assert headers["allow"] == "GET, HEAD"
    status, headers, body = server.request("HEAD", "/about")
    assert status == 200 and body == b"" and headers["content-type"].startswith("text/html")


def test_etags_let_clients_revalidate(server):
    _, headers, _ = server.get("/chapters/glossary")
    status, _, body = server.request("GET", "/chapters/glossary", headers={"If-None-Match": headers["etag"]})
    assert status == 304 and body == b""


def test_bad_requests_get_4xx_and_the_server_stays_up(server):
    big = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (80 << 10) + b"\r\n\r\n"
    assert server.raw(big).startswith(b"HTTP/1.1 431")
    assert server.raw(b"NONSENSE\r\n\r\n")[:10] in (b"HTTP/1.1 4", b"HTTP/1.0 4")
    assert server.raw(b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n")[:10] in (b"HTTP/1.1 4", b"HTTP/1.0 4")
    assert server.get("/")[0] == 200


# ---- the pages' JavaScript, in a real browser ------------------------------------------

CHROMIUM = "/usr/bin/chromium"


def first_section_with(pattern):
    for c in BOOK["chapters"]:
        for s in c["sections"]:
            if re.search(pattern, (CONTENT / c["slug"] / f"{s['slug']}.md").read_text()):
                return section_path(c, s)
    return None


def test_site_js_in_a_browser(server):
    """Math typeset, code highlighted, the source range marked, the glossary
    filtered, and nothing printed to the console or failing to load."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("no Debian chromium")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        problems = []
        page.on("console", lambda m: problems.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: problems.append(f"error: {e}"))
        page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
        try:
            math_page = first_section_with(r"\$[^$\s][^$]*\$")
            if math_page:
                page.goto(server.base_url + math_page)
                page.locator(".math .katex").first.wait_for(timeout=10_000)
            code_page = first_section_with(r"```(cpp|cuda|bash|json)\n")
            if code_page:
                page.goto(server.base_url + code_page)
                page.locator("pre code.hljs").first.wait_for(timeout=10_000)

            page.goto(server.base_url + "/source/cli/main.cpp#L3-L5")
            band = page.locator(".lk-range")
            band.wait_for(timeout=10_000)
            assert page.locator(".lk-gutter a.hl").count() == 3
            box, line3, line5 = band.bounding_box(), page.locator("#L3").bounding_box(), page.locator("#L5").bounding_box()
            assert abs(box["y"] - line3["y"]) < 4 and abs(box["y"] + box["height"] - (line5["y"] + line5["height"])) < 4

            page.goto(server.base_url + "/chapters/glossary")
            term = GLOSSARY[0]["term"]
            page.fill("#glossary-filter", term)
            visible = page.locator(".glossary-entry:not([hidden])")
            assert 1 <= visible.count() < len(GLOSSARY)
            assert page.locator(f'#{GLOSSARY[0]["id"]}').is_visible()
        finally:
            browser.close()
    assert problems == []


def test_a_kernels_source_link_starts_at_its_template_line(server):
    """ctags names a kernel's line; the book's range starts where its declaration does
    (`template <bool Vec>` and `__global__ void __launch_bounds__(...)` above the name)."""
    lines = (BOOK_ROOT / "kernels/cuda/norm_rope.cu").read_text().splitlines()
    name = next(i for i, l in enumerate(lines) if l.strip().startswith("add_rms_norm_kernel("))
    assert lines[name - 2].startswith("template <") and "__global__" in lines[name - 1]
    status, _, body = server.get("/chapters/foundations/compilation-and-machine-code")
    assert status == 200
    assert f"/source/kernels/cuda/norm_rope.cu#L{name - 1}-".encode() in body  # 1-based: the template line


def test_a_long_section_has_its_own_contents_and_permalinks(server):
    """'On this page' lists the section's h2 headings, each a link to its anchor; every h2 of
    the text has a permalink to itself; a short page has no such list."""
    status, _, body = server.get("/chapters/distributed-inference/prefill-and-decode-disaggregation")
    assert status == 200
    page = body.decode()
    nav = re.search(r'<nav class="page-toc" aria-label="On this page">(.*?)</nav>', page, re.S)
    assert nav, "no page contents"
    ids = re.findall(r'<h2 id="([^"]+)">', page)
    assert len(ids) >= 3
    assert re.findall(r'href="#([^"]+)"', nav.group(1))[:1] == ids[:1]
    for i in ids:
        assert f'href="#{i}"' in nav.group(1), i
        assert f'<a class="permalink" href="#{i}"' in page, i
    short = server.get("/privacy")[2].decode()
    assert 'class="page-toc"' not in short or len(re.findall(r"<h2 ", short)) >= 3


def test_text_answers_are_gzipped_for_clients_that_accept_it(server):
    """gzip when Accept-Encoding allows it (its own ETag, Vary on every text answer); the same
    bytes once inflated; plain for a client that refuses it or does not say."""
    import gzip
    plain_status, plain_headers, plain = server.request("GET", "/llms-full.txt")
    assert plain_status == 200 and "content-encoding" not in plain_headers
    assert plain_headers["vary"] == "Accept-Encoding"
    status, headers, body = server.request("GET", "/llms-full.txt", headers={"Accept-Encoding": "gzip, br"})
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert gzip.decompress(body) == plain and len(body) < len(plain) / 2
    assert headers["etag"] != plain_headers["etag"]
    status, headers, body = server.request("GET", "/llms-full.txt", headers={"Accept-Encoding": "gzip",
                                                                             "If-None-Match": headers["etag"]})
    assert status == 304 and body == b""
    assert "content-encoding" not in server.request("GET", "/llms-full.txt",
                                                    headers={"Accept-Encoding": "gzip;q=0, identity"})[1]
    page_status, page_headers, page = server.request("GET", "/chapters/foundations", headers={"Accept-Encoding": "*"})
    assert page_status == 200 and page_headers["content-encoding"] == "gzip" and b"<html" in gzip.decompress(page)


@pytest.mark.parametrize("chapter", ["foundations", "kernel-optimization", "inference-engines"])
def test_chapters_end_with_problems_and_worked_answers(server, chapter):
    status, _, body = server.get(f"/chapters/{chapter}")
    page = body.decode()
    assert status == 200 and '<h2 id="problems">' in page
    problems = page[page.index('<h2 id="problems">'):]
    assert problems.count("<details><summary>Answer</summary>") >= 4
    assert len(re.findall(r"<strong>\d+\. ", problems)) == problems.count("<details><summary>Answer</summary>")


def term_uses():
    """Each glossary id: the pages (path, chapter index) whose Markdown links glossary:ID, in reading order."""
    uses = {}
    for i, c in enumerate(BOOK["chapters"]):
        pages = [(chapter_path(c), CONTENT / c["slug"] / "index.md")]
        pages += [(section_path(c, s), CONTENT / c["slug"] / f"{s['slug']}.md") for s in c["sections"]]
        for path, md in pages:
            for gid in dict.fromkeys(re.findall(r"\(glossary:([\w-]+)", md.read_text())):
                uses.setdefault(gid, []).append((path, i))
    return uses


def test_glossary_is_grouped_by_the_chapter_that_first_uses_each_term(server):
    uses = term_uses()
    page = server.get("/chapters/glossary")[2].decode()
    groups = re.findall(r'<section class="glossary-group">\n<h2>(.*?)</h2>(.*?)</section>', page, re.S)
    titles = [f"{c['number']}. {c['title']}" for c in BOOK["chapters"]] + ["Not yet used in a section"]
    assert [t for t, _ in groups] == [t for t in titles if any(t == g for g, _ in groups)]
    placed = {}
    for title, body in groups:
        for gid in re.findall(r'<div class="glossary-entry" id="([\w-]+)">', body):
            placed[gid] = title
    assert set(placed) == {g["id"] for g in GLOSSARY}
    for g in GLOSSARY:
        want = titles[uses[g["id"]][0][1]] if g["id"] in uses else titles[-1]
        assert placed[g["id"]] == want, g["id"]


def test_every_glossary_term_has_a_page_that_links_back_to_its_uses(server):
    uses = term_uses()
    for g in GLOSSARY:
        status, _, body = server.get(f"/chapters/glossary/{g['id']}")
        assert status == 200, g["id"]
        page = body.decode()
        assert re.search(r"<h1[^>]*>", page) and g["term"].split()[0] in page
        listed = re.findall(r'<ul class="term-uses">(.*?)</ul>', page, re.S)
        links = re.findall(r'href="([^"]+)"', listed[0]) if listed else []
        assert links == [path for path, _ in uses.get(g["id"], [])], g["id"]
        assert server.get(f"/chapters/glossary/{g['id']}.md")[0] == 200
