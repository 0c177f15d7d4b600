"""The book's interactive figures (book/figures/*.js) in a real browser: PyPI
playwright driving Debian's headless chromium against `minfer book serve`.

For each figure: its page renders an SVG with content, nothing reaches the
console, the figure fetches only /figures/data/..., its controls change what is
drawn (and the numbers are the right ones), it fits a phone's width, it follows
the system's dark mode, and it mounts where the book's pages place it.
Screenshots go to build/book-screenshots/ (ID.png, ID-narrow.png, ID-dark.png:
look at them). The batching stepper's data is re-made by scripts/book-trace.sh
and must equal the committed file, so the figure cannot drift from the engine.

MINFER_BOOK_URL=http://host:port runs the browser tests against a server that
is already running instead of starting one.
"""
import json
import math
import os
import re
import subprocess
import urllib.parse

import pytest
from playwright.sync_api import sync_playwright

from book_server import ROOT, BookServer
from minfer_server import minfer_bin

FIGURES = ["roofline", "kv-cache-calculator", "batching-stepper", "online-softmax", "structured-mask", "speculative-speedup",
           "parallel-communication", "disaggregation-load"]
SCREENSHOTS = ROOT / "build" / "book-screenshots"
TRACE = ROOT / "book" / "figures" / "data" / "trace-stories260K.json"
GRAMMAR = ROOT / "book" / "figures" / "data" / "grammar-pet.json"
SPEC_MEASURED = ROOT / "book" / "figures" / "data" / "spec-measured.json"
CHROMIUM = "/usr/bin/chromium"


# ---- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base_url():
    if os.environ.get("MINFER_BOOK_URL"):
        yield os.environ["MINFER_BOOK_URL"].rstrip("/")
        return
    server = BookServer()
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


class FigurePage:
    """One figure's page, with everything the browser reported while it ran."""

    def __init__(self, browser, base_url, figure, width=760, color_scheme="light"):
        self.figure = figure
        self.page = browser.new_page(viewport={"width": width, "height": 1100}, color_scheme=color_scheme)
        self.console = []   # (type, text, url of the source)
        self.errors = []    # uncaught exceptions
        self.fetches = []   # paths the page fetched with fetch() / XHR
        self.failed = []    # responses >= 400 and failed requests
        self.page.on("console", lambda m: self.console.append((m.type, m.text, m.location.get("url", ""))))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", self._on_request)
        self.page.on("requestfailed", lambda r: self.failed.append((r.url, r.failure)))
        self.page.on("response", lambda r: r.status >= 400 and self.failed.append((r.url, r.status)))
        self.page.goto(f"{base_url}/figures/{figure}")
        self.root = self.page.locator(f'figure.lk-figure[data-figure="{figure}"]')
        self.root.locator(".lk-fig svg").first.wait_for(timeout=10_000)

    def _on_request(self, request):
        if request.resource_type in ("fetch", "xhr"):
            self.fetches.append(urllib.parse.urlparse(request.url).path)

    def text(self, selector):
        return self.root.locator(selector).first.inner_text()

    def drawing(self):
        """The figure's SVG markup (what is drawn)."""
        return self.root.locator(".lk-fig").first.evaluate(
            "el => [...el.querySelectorAll('svg')].map(s => s.outerHTML).join('')")

    def set_range(self, index, value):
        self.root.locator('input[type="range"]').nth(index).fill(str(value))

    def click(self, name):
        self.root.get_by_role("button", name=name, exact=True).click()

    def check_quiet(self):
        """Nothing on the console from the figures, no exceptions, no failed figure requests."""
        assert not self.errors, self.errors
        # A failed resource of the site's own (a favicon) is the site's business;
        # everything under /figures/ must load.
        figure_failures = [f for f in self.failed if "/figures/" in f[0]]
        assert not figure_failures, figure_failures
        figure_logs = [c for c in self.console if "/figures/" in c[2] or not c[2]]
        assert not figure_logs, figure_logs
        assert all(p.startswith("/figures/data/") for p in self.fetches), self.fetches
        # Neither the site's note for a figure that failed to mount nor the figure's own.
        assert self.root.locator(".lk-figure-error, .lk-error").count() == 0, self.root.inner_text()

    def screenshot(self, name=None):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.root.screenshot(path=str(SCREENSHOTS / f"{name or self.figure}.png"))

    def close(self):
        self.page.close()


@pytest.fixture
def open_figure(browser, base_url):
    pages = []

    def open_(figure, width=760, color_scheme="light"):
        pages.append(FigurePage(browser, base_url, figure, width, color_scheme))
        return pages[-1]

    yield open_
    for p in pages:
        p.close()


# ---- every figure ----------------------------------------------------------------------------

@pytest.mark.parametrize("figure", FIGURES)
def test_figure_renders_quietly(open_figure, figure):
    f = open_figure(figure)
    shapes = f.root.locator(".lk-fig svg").first.evaluate("s => s.querySelectorAll('rect, path, line, circle, text').length")
    assert shapes >= 10, f"{figure}: only {shapes} shapes drawn"
    assert f.root.locator(".lk-fig button, .lk-fig input, .lk-fig select").count() >= 2
    # The caption the site wrote stays below the figure.
    assert f.root.locator(":scope > figcaption").count() == 1
    assert f.root.locator(":scope > .lk-fig + figcaption").count() == 1
    f.check_quiet()
    f.screenshot()


@pytest.mark.parametrize("figure", FIGURES)
def test_figure_fits_a_phone(open_figure, figure):
    """At 375 px nothing sticks out of the page; wide drawings and tables scroll
    inside their own box."""
    f = open_figure(figure, width=375)
    overflow = f.page.evaluate("""() => {
        const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
        const insideScroller = (el) => {
            for (let a = el.parentElement; a && !a.classList.contains('lk-figure'); a = a.parentElement)
                if (scrolls(a)) return true;
            return false;
        };
        const out = [];
        for (const el of document.querySelectorAll('.lk-fig, .lk-fig *')) {
            if (insideScroller(el)) continue;
            const r = el.getBoundingClientRect();
            if (r.right > window.innerWidth + 1) out.push(el.tagName + '.' + el.className + ' ' + Math.round(r.right));
        }
        return out;
    }""")
    assert not overflow, overflow
    f.check_quiet()
    f.screenshot(f"{figure}-narrow")


@pytest.mark.parametrize("figure", FIGURES)
def test_figure_follows_dark_mode(open_figure, figure):
    """The site goes dark with the system; the figure's text must stay readable."""
    f = open_figure(figure, color_scheme="dark")
    lightness = f.root.locator(".lk-fig").first.evaluate("""el => {
        const luminance = (colour) => {
            const [r, g, b] = colour.match(/[\\d.]+/g).map(Number);
            return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
        };
        const svgText = el.querySelector('svg text');
        return { html: luminance(getComputedStyle(el).color), svg: luminance(getComputedStyle(svgText).fill) };
    }""")
    assert lightness["html"] > 0.6 and lightness["svg"] > 0.4, lightness
    f.check_quiet()
    f.screenshot(f"{figure}-dark")


def spec_speedup(alpha, k, cost=0.0, verify=0.0):
    """Leviathan et al.'s expected tokens per verification step, and the speedup over plain decoding."""
    e = k + 1 if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
    return e, e / ((1 + cost * k) * (1 + verify * k))


def tp_step(dim, layers, params, ranks, tokens, weight_bytes, act_bytes, gbps, alpha_us):
    """parallel-communication's arithmetic for a dense model: all-reduced bytes a rank sends,
    their time, the weight reads' time (4.19 TB/s) and the weights a GPU holds."""
    reduces = 2 * layers + 1
    sent = reduces * 2 * (ranks - 1) / ranks * tokens * dim * act_bytes
    comm = reduces * alpha_us + sent / (gbps * 1e9) * 1e6 if ranks > 1 else 0.0
    read = params * weight_bytes / ranks / 4.19e12 * 1e6
    return sent, comm, read, params * weight_bytes / ranks


# Options as a figure block passes them: strings, and what the figure should show.
OPTIONS = {
    "roofline": ({"precision": "fp8", "kv_dtype": "bf16", "batch": "256", "context": "4096"},
                 "256 sequences of 4,096 tokens", "of fp8 weights once and", "of bf16 K/V"),
    "kv-cache-calculator": ({"preset": "qwen2-0.5b", "dtype": "fp8", "context": "32000", "batch": "8", "block_size": "32"},
                            "24 layers × 2 KV heads × 64 dims × 1 byte", "1,000 blocks of 32 tokens"),
    "batching-stepper": ({"kv_blocks": "32", "step": "20"}, "Step: 20 of 33", "--num-kv-blocks 32"),
    "online-softmax": ({"seed": "5", "tile_size": "8"}, "seed 5", "8 scores"),
    "structured-mask": ({"text": '{"animal": "dog", "legs": 4'}, "the end token is not allowed"),
    "speculative-speedup": ({"k": "8", "alpha": "0.75", "cost": "0.1", "verify": "0.05", "points": "cpu"},
                            "k = 8 drafts", "α = 0.75", f"E = {spec_speedup(0.75, 8)[0]:.2f} tokens",
                            f"S = {spec_speedup(0.75, 8, 0.1, 0.05)[1]:.2f}×", "(1 + 0.10 × 8)(1 + 0.05 × 8) = 2.52"),
    # llama3-70b over 8 ranks on PCIe 5, 64 tokens, fp8 weights, bf16 all-reduces: 161 buffers of
    # 64 x 8192 x 2 bytes; 70.554e9 / 8 bytes of weights a GPU.
    "parallel-communication": ({"preset": "llama3-70b", "ranks": "8", "link": "pcie5", "tokens": "64", "weights": "fp8",
                                "allreduce": "bf16"},
                               "At 8 ranks", "8.21 GiB of weights", "161 buffers of 1.00 MiB",
                               f"{round(100 * (lambda s, c, r, m: c / (c + r))(*tp_step(8192, 80, 70.554e9, 8, 64, 1, 2, 64, 15)))}% of the step"),
    "disaggregation-load": ({"metric": "ttft_p50_ms", "share": "0.5"}, "TTFT p50", "At 50% long prompts: colocated 281.7, split 1,857.6 ms"),
}


@pytest.mark.parametrize("figure", FIGURES)
def test_figure_options(open_figure, figure):
    """A figure mounted with a figure block's options (strings) starts where they say."""
    options, *expected = OPTIONS[figure]
    f = open_figure(figure)
    text = f.page.evaluate("""async ([figure, options]) => {
        const element = document.createElement('figure');
        element.className = 'lk-figure';
        document.body.append(element);
        (await import(`/figures/${figure}.js`)).default(element, options);
        // Wait for the figure's data, if it loads any.
        for (let i = 0; i < 100 && !element.querySelector('svg *'); i++) await new Promise((r) => setTimeout(r, 50));
        const shown = [...element.querySelectorAll('select')].map((s) => s.selectedOptions[0].textContent);
        const labels = [...element.querySelectorAll('label')].map((l) => l.textContent);
        return [element.innerText, ...shown, ...labels].join(' | ');
    }""", [figure, options])
    for snippet in expected:
        assert snippet in text, (snippet, text)
    f.check_quiet()


def pages_with_figures():
    """(URL path, figure ids) of every book section with a figure block."""
    out = []
    for md in sorted((ROOT / "book/content").glob("*/*.md")):
        ids = re.findall(r"^```figure\n(?:.*\n)*?id: *([\w-]+)", md.read_text(), flags=re.M)
        if ids:
            chapter, section = md.parent.name, md.stem
            out.append((f"/chapters/{chapter}" if section == "index" else f"/chapters/{chapter}/{section}", ids))
    return out


def test_figures_mount_on_the_book_pages(browser, base_url):
    """Where the prose places figures (several to a page, with their options), each one mounts quietly."""
    pages = pages_with_figures()
    assert pages, "no section uses a figure"
    for path, ids in pages:
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        problems = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("console", lambda m: "/figures/" in m.location.get("url", "") and problems.append(m.text))
        page.goto(base_url + path)
        for k, figure_id in enumerate(ids):
            figure = page.locator(f'figure.lk-figure[data-figure="{figure_id}"]').nth(ids[:k].count(figure_id))
            figure.locator(".lk-fig svg").first.wait_for(timeout=10_000)
            assert figure.locator(".lk-figure-error, .lk-error").count() == 0, (path, figure.inner_text())
        assert not problems, (path, problems)
        page.close()


# ---- roofline ------------------------------------------------------------------------------

def test_roofline_batch_slider_and_precision(open_figure):
    f = open_figure("roofline")
    h200 = json.loads((ROOT / "book/figures/data/h200.json").read_text())
    model = h200["model"]
    before_text, before_svg = f.text(".lk-readout"), f.drawing()
    # The default is the prose's table (foundations/compute-bound-and-memory-bound): batch 64 at
    # 576 tokens of bf16 K/V (minfer's default on CUDA), 49.4 FLOP per byte, at most 13,515 tokens/s.
    assert "64 sequences of 576 tokens" in before_text and "49.4 FLOP/byte, memory-bound" in before_text
    assert "13,515 tokens/s" in before_text
    assert "batch → ∞: 203 FLOP/byte" in before_svg

    # fp32 K/V, the what-if (and every version up to f19da17): 39.7 FLOP per byte, 10,868 tokens/s.
    f.root.get_by_role("group", name="K/V cache").get_by_role("button", name="fp32").click()
    assert "39.7 FLOP/byte, memory-bound" in f.text(".lk-readout") and "10,868 tokens/s" in f.text(".lk-readout")
    assert "batch → ∞: 101 FLOP/byte" in f.drawing()

    # The largest batch over short contexts of bf16 K/V passes the ridge: compute-bound at the bf16 GEMM ceiling.
    f.root.get_by_role("group", name="K/V cache").get_by_role("button", name="bf16").click()
    f.set_range(1, 0)
    f.set_range(0, f.root.locator('input[type="range"]').first.get_attribute("max"))
    after = f.text(".lk-readout")
    assert "2,048 sequences of 64 tokens" in after and "compute-bound" in after and "Ceiling 749 TFLOP/s" in after
    assert f.drawing() != before_svg

    # Batch 1: intensity = FLOPs / (weights + K/V); the ceiling is that times the bandwidth.
    f.set_range(0, 0)
    context = 64
    flops = model["decode_flop_per_token"] + model["attention_flop_per_context_token"] * context
    intensity = flops / (model["weight_bytes"]["bf16"] + context * model["kv_bytes_per_token"]["bf16"])
    ceiling = intensity * h200["ceilings"]["bandwidth_bytes_per_s"] / 1e12
    text = f.text(".lk-readout")
    shown = re.search(r"([\d.]+) FLOP/byte.*Ceiling ([\d.]+) TFLOP/s", text)
    assert shown, text
    assert float(shown.group(1)) == pytest.approx(intensity, rel=5e-3)
    assert float(shown.group(2)) == pytest.approx(ceiling, rel=5e-3)

    f.root.get_by_role("group", name="Weights and GEMMs").get_by_role("button", name="FP8").click()
    assert "1,419 TFLOP/s" in f.drawing()
    assert "8.03 GB of fp8 weights" in f.text(".lk-readout")

    # A batch whose K/V outgrows the GPU says so.
    f.set_range(1, f.root.locator('input[type="range"]').nth(1).get_attribute("max"))
    f.set_range(0, 10)  # batch 48
    assert "does not fit" in f.text(".lk-readout")
    f.check_quiet()


def test_roofline_marks_the_measured_workloads(open_figure):
    f = open_figure("roofline")
    svg = f.drawing()
    # llama3-8b bf16 decode at batch 1 (3fec67a): 227 tok/s x 15.31 GFLOP = 3.48 TFLOP/s; 15.09 GB
    # a step (bf16 K/V) at 4.19 TB/s allows 277.75 tok/s, so 81.7% of its ceiling (the bench,
    # counting the model's exact bytes, printed 81.6%).
    assert "decode, batch 1" in svg and "3.48 TFLOP/s" in svg and "81.7% of its ceiling" in svg
    # Prefill of 512: 33,916 tok/s x 14.097 GFLOP = 478 TFLOP/s, 63.83% (shown as 63.8%) of the
    # 749 TFLOP/s ceiling (the bench, counting 7.217 TFLOP for 512 tokens, printed 63.8%).
    assert "prefill 512" in svg and "478 TFLOP/s" in svg and "63.8% of its ceiling" in svg
    assert "measured on minfer at 3fec67a" in f.root.inner_text()  # the version the points are
    assert "ridge: 179 FLOP/byte" in svg


# ---- KV-cache calculator ---------------------------------------------------------------------

def kv_numbers(f):
    """The calculator's numbers, by their titles."""
    return {dt.inner_text(): dd.inner_text()
            for dt, dd in zip(f.root.locator(".lk-number dt").all(), f.root.locator(".lk-number dd").all())}


def number_in(f, selector, pattern):
    """The number that pattern's one group finds in the text of the figure's selector."""
    text = f.text(selector)
    m = re.search(pattern, text)
    assert m, text
    return float(m.group(1))


def kib_per_token(f):
    return number_in(f, ".lk-formula", r"= ([\d.]+) KiB per token")


def test_kv_cache_calculator_arithmetic(open_figure):
    f = open_figure("kv-cache-calculator")
    # Default: llama3-8b (32 layers, 8 KV heads, head dim 128), bf16, 5,000 tokens, batch 64, blocks of 16.
    assert kib_per_token(f) == 2 * 32 * 8 * 128 * 2 / 1024
    per_token = 2 * 32 * 8 * 128 * 2
    blocks = math.ceil(5000 / 16)
    fit = math.floor((139.8 * 2**30 - 8.0305e9 * 2) / (blocks * 16 * per_token))
    numbers = kv_numbers(f)
    assert numbers["One sequence"].startswith("626 MiB") and f"{blocks} blocks of 16 tokens" in numbers["One sequence"]
    assert numbers["Waste in its last block"].startswith(f"{blocks * 16 - 5000} token slots")
    assert numbers["Sequences that fit on an H200"].startswith(str(fit))

    # Without grouped-query attention (a KV head per query head) the cache is 4 times larger.
    f.root.get_by_label("KV heads").select_option("32")
    assert kib_per_token(f) == 2 * 32 * 32 * 128 * 2 / 1024
    assert "what if" in f.text(".lk-formula")

    before = f.drawing()
    f.root.get_by_label("Model").select_option("gemma3-270m")
    assert f.root.get_by_label("KV heads").input_value() == "1"  # back to the model's own
    # Gemma 3 270M: 18 layers x 1 KV head x head dim 256.
    assert kib_per_token(f) == 2 * 18 * 1 * 256 * 2 / 1024
    assert kv_numbers(f)["Sequences that fit on an H200"] != numbers["Sequences that fit on an H200"]
    assert f.drawing() != before

    f.click("fp32")
    assert kib_per_token(f) == 2 * 18 * 1 * 256 * 4 / 1024
    f.root.get_by_label("Block size (tokens)").select_option("64")
    assert kv_numbers(f)["Waste in its last block"].startswith(f"{math.ceil(5000 / 64) * 64 - 5000} token slots")
    f.check_quiet()


def test_kv_cache_calculator_overflow(open_figure):
    f = open_figure("kv-cache-calculator")
    f.set_range(0, 16)  # 131,072 tokens
    f.set_range(1, 15)  # batch 1,024
    svg = f.drawing()
    assert "more than the GPU has" in svg
    assert "fewer than the batch" in kv_numbers(f)["Sequences that fit on an H200"]
    f.check_quiet()


def test_kv_presets_match_the_engine(minfer):
    """The calculator's shapes are those of the engine's synthetic presets."""
    source = (ROOT / "book/figures/kv-cache-calculator.js").read_text()
    listing = {}
    for line in minfer("synth", "--list").stdout.splitlines():
        # preset arch shape-of... dim layers heads kv ffn vocab context notes
        m = re.match(r"(\S+)\s+\w+\s+.*?\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+\d+\s+(\d+)", line)
        if m:
            listing[m.group(1)] = [int(v) for v in m.groups()[1:]]
    # Gemma 3's head size (256) is not dim / heads; its GGUF says so (a 0.5 GiB model, quick to build).
    gemma = minfer("inspect", "--synthetic", "gemma3-270m:bf16").stdout
    gemma_head_dim = int(re.search(r"gemma3\.attention\.key_length\s+u32\s+= (\d+)", gemma).group(1))
    for preset in ["llama3-8b", "llama3-1b", "qwen2-0.5b", "gemma3-270m"]:
        m = re.search(rf'"{re.escape(preset)}": {{[^}}]*layers: (\d+), kvHeads: (\d+), headDim: (\d+), params: [\d.e]+, '
                      rf'maxContext: (\d+), heads: (\d+)', source)
        assert m, preset
        layers, kv_heads, head_dim, context, query_heads = map(int, m.groups())
        dim, n_layers, heads, n_kv, n_context = listing[preset]
        assert (layers, kv_heads, context, query_heads) == (n_layers, n_kv, n_context, heads), preset
        assert head_dim == (gemma_head_dim if preset == "gemma3-270m" else dim // heads), preset


# ---- parallel communication ----------------------------------------------------------------

def test_parallel_communication_arithmetic(open_figure):
    f = open_figure("parallel-communication")
    # Default: llama3-8b over 4 ranks on NVLink (450 GB/s, 8 µs an all-reduce), batch 1, bf16 weights,
    # fp32 all-reduces (what minfer sends): 65 buffers of 4096 x 4 bytes.
    sent, comm, read, memory = tp_step(4096, 32, 8.0305e9, 4, 1, 2, 4, 450, 8)
    text = f.text(".lk-readout")
    assert "65 buffers of 16.0 KiB" in text and "1.52 MiB" in text, text
    assert f"{round(100 * comm / (comm + read))}% of the step" in text, text
    assert "3.74 GiB of weights" in text, text
    one = f.drawing()
    # One rank: nothing is all-reduced, and the whole model sits on the GPU.
    f.set_range(0, 0)
    assert "nothing is all-reduced" in f.text(".lk-readout")
    assert "15.0 GiB of weights" in f.text(".lk-readout")
    # Slower links make the bars longer; 70B in bf16 takes 131 GiB of one H200's 139.8.
    f.set_range(0, 3)
    f.root.get_by_label("Link between GPUs").select_option("pcie4")
    assert f.drawing() != one
    f.root.get_by_label("Model").select_option("llama3-70b")
    f.set_range(0, 0)
    assert "131 GiB of weights" in f.text(".lk-readout") and "more than" not in f.text(".lk-readout")
    f.check_quiet()


# ---- batching stepper ----------------------------------------------------------------------

def test_trace_data_is_what_the_engine_does(tmp_path):
    out = tmp_path / "trace.json"
    env = {**os.environ, "MINFER_BIN": minfer_bin()}
    subprocess.run(["bash", str(ROOT / "scripts/book-trace.sh"), str(out)], check=True, env=env, timeout=120)
    assert out.read_text() == TRACE.read_text(), "book/figures/data/trace-stories260K.json is stale: run scripts/book-trace.sh"


def test_trace_data_shows_what_the_figure_is_about():
    data = json.loads(TRACE.read_text())
    preemptions = [sum(len(s["preempted"]) for s in run["steps"]) for run in data["runs"]]
    # The default pool preempts; the largest is big enough not to.
    assert preemptions[data["default_run"]] >= 1 and preemptions[-1] == 0, preemptions
    for run in data["runs"]:
        steps = run["steps"]
        assert steps[-1]["prefix_cache_hits"] > 0, "no prefix-cache hit"
        assert any(s["kind"] == "prefill" and s["computed"] > 0 for st in steps for s in st["seqs"]), "no chunked prefill"
        assert any(len(st["seqs"]) >= 3 and any(s["kind"] == "decode" for s in st["seqs"])
                   and any(s["kind"] == "prefill" for s in st["seqs"]) for st in steps), "no step mixing prefill and decode"
        assert max(len(s["seqs"]) for s in steps) == run["settings"]["max_num_seqs"]
        assert len({q["request"] for s in steps for q in s["seqs"]}) == len(data["requests"])
        assert all(s["blocks_total"] == run["settings"]["num_kv_blocks"] for s in steps)


def owned_blocks(step):
    return {b for s in step["seqs"] for b in s["blocks"]}


def check_step_drawn(f, step):
    """The status line and the block grid of one step are the file's."""
    status = f.text(".lk-status")
    assert f"step {step['step']}" in status
    assert f"free blocks {step['blocks_free']} of {step['blocks_total']}" in status
    assert f"waiting {step['waiting']}" in status
    assert f"{step['num_tokens']} token" in status
    svg = f.drawing()
    for block in range(step["blocks_total"]):
        assert f">#{block}<" in svg
    # Every block a scheduled sequence holds carries its owners' names under it.
    labels = f.root.locator(".lk-kv-id").all_text_contents()
    owner_labels = [t for t in labels if t and not t.startswith("#")]
    assert len(owner_labels) == len(owned_blocks(step)), (step["step"], owner_labels)


def test_batching_stepper_follows_the_trace(open_figure):
    data = json.loads(TRACE.read_text())
    run = data["runs"][data["default_run"]]
    f = open_figure("batching-stepper")
    slider = f.root.locator('input[type="range"]').first
    first_preemption = next(i for i, s in enumerate(run["steps"]) if s["preempted"])
    assert int(slider.input_value()) == first_preemption + 1  # the default state shows a preemption
    assert "preempted" in f.text(".lk-status")
    assert run["command"] in f.root.inner_text()

    for step_number in [1, 2, first_preemption + 2, len(run["steps"])]:
        f.set_range(0, step_number)
        check_step_drawn(f, run["steps"][step_number - 1])

    before = f.text(".lk-readout")
    f.click("◀ Previous")
    assert f.text(".lk-readout") != before
    assert int(slider.input_value()) == len(run["steps"]) - 1
    f.click("Next preemption")
    assert f"step {first_preemption + 1}" in f.text(".lk-status")

    f.click("Play")
    f.page.wait_for_function(f"() => document.querySelector('input[type=range]').value > {first_preemption + 1}", timeout=5000)
    f.click("Pause")
    f.check_quiet()


def test_batching_stepper_pool_sizes(open_figure):
    data = json.loads(TRACE.read_text())
    f = open_figure("batching-stepper")
    slider = f.root.locator('input[type="range"]').first
    for k, run in enumerate(data["runs"]):
        f.root.get_by_label("KV pool").select_option(str(k))
        assert slider.get_attribute("max") == str(len(run["steps"]))
        check_step_drawn(f, run["steps"][int(slider.input_value()) - 1])
        assert run["command"] in f.root.inner_text()
        no_preemption = not any(s["preempted"] for s in run["steps"])
        assert f.root.get_by_role("button", name="Next preemption").is_disabled() == no_preemption
    f.check_quiet()


# ---- online softmax --------------------------------------------------------------------------

def largest_difference(f):
    return number_in(f, ".lk-compare", r"Largest difference ([\d.e+-]+)")


def test_online_softmax_steps_and_agrees(open_figure):
    f = open_figure("online-softmax")
    # The default shows every tile read, and the float32 result agreeing with the float64 softmax.
    rows = f.root.locator("tbody tr")
    assert rows.count() == 4
    assert 0 <= largest_difference(f) < 1e-6
    assert f.root.locator("td.lk-rescaled").count() >= 1  # the running max rose at least once

    f.click("Reset")
    assert "Nothing read yet" in f.text(".lk-readout")
    assert "tiles to go" in f.text(".lk-compare")
    before = f.drawing()
    f.click("Next tile ▶")
    assert rows.count() == 1 and f.drawing() != before
    f.click("Next tile ▶")
    assert "Tile 2" in f.text(".lk-readout")

    f.root.get_by_label("Tile size").select_option("8")
    for _ in range(2):
        f.click("Next tile ▶")
    assert rows.count() == 2 and 0 <= largest_difference(f) < 1e-6

    seed_before = f.text(".lk-label")
    f.click("New random scores")
    assert f.text(".lk-label") != seed_before
    for _ in range(2):
        f.click("Next tile ▶")
    assert 0 <= largest_difference(f) < 1e-6
    f.check_quiet()


# ---- structured mask -----------------------------------------------------------------------

def test_grammar_data_is_what_the_compiler_makes(tmp_path):
    out = tmp_path / "grammar.json"
    env = {**os.environ, "MINFER_BIN": minfer_bin()}
    subprocess.run(["bash", str(ROOT / "scripts/book-grammar.sh"), str(out)], check=True, env=env, timeout=60)
    assert out.read_text() == GRAMMAR.read_text(), "book/figures/data/grammar-pet.json is stale: run scripts/book-grammar.sh"


def allowed_tokens(f):
    return f.page.evaluate("""() => [...document.querySelectorAll('.lk-token-allowed')].map((g) => g.dataset.token)""")


def test_structured_mask_follows_the_text(open_figure):
    f = open_figure("structured-mask")
    # '{"animal": "c' can only go on to "cat": of the pieces, "at" and "a" (and nothing else).
    assert sorted(allowed_tokens(f)) == ["a", "at"], allowed_tokens(f)
    assert "2 of 49 tokens may come next" in f.text(".lk-readout")
    text = f.root.locator("input.lk-text")
    text.fill('{"animal": "dog", "legs": ')
    allowed = allowed_tokens(f)
    assert {"0", "1", "2", "4", "8"} <= set(allowed) and not {"9", "10", "-", "-1", "\""} & set(allowed), allowed
    text.fill('{"animal": "dog", "legs": 9')
    assert "leaves the schema at character 27" in f.text(".lk-readout") and allowed_tokens(f) == []
    # Clicking allowed tokens builds a whole object; then only the end token (or more space) may come.
    text.fill('{"animal": "cat", "legs": 4')
    f.root.locator('.lk-token-allowed[data-token="}"]').click()
    assert text.input_value() == '{"animal": "cat", "legs": 4}'
    assert allowed_tokens(f) == ["⟨end⟩"] and "the end token is allowed" in f.text(".lk-readout")
    f.click("Remove a character")
    assert "⟨end⟩" not in allowed_tokens(f)
    f.check_quiet()


# ---- speculative speedup -------------------------------------------------------------------

def spec_shown(f):
    """(E, S) as the readout shows them."""
    text = f.text(".lk-readout")
    m = re.search(r"E = ([\d.]+) tokens.* S = ([\d.]+)×", text)
    assert m, text
    return float(m.group(1)), float(m.group(2))


def test_speculative_speedup_follows_the_formula(open_figure):
    f = open_figure("speculative-speedup")
    # Default (the section's block): k = 4, α = 0.6, a free proposer, verification rows of 0.1 step each
    # (what the CPU measured).
    assert spec_shown(f) == pytest.approx(spec_speedup(0.6, 4, 0.0, 0.1), abs=0.0051)
    assert "no speedup" in f.drawing()
    before = f.drawing()
    f.set_range(0, 8)  # k
    assert spec_shown(f) == pytest.approx(spec_speedup(0.6, 8, 0.0, 0.1), abs=0.0051)
    assert f.drawing() != before
    before = f.drawing()
    f.set_range(1, 0.8)  # α
    assert spec_shown(f) == pytest.approx(spec_speedup(0.8, 8, 0.0, 0.1), abs=0.0051)
    assert f.drawing() != before
    assert f"S = {spec_speedup(0.8, 8, 0.0, 0.1)[1]:.2f}×" in f.drawing()  # the marker's label
    # A draft model's cost and costly verification rows.
    for k, alpha, cost, verify in [(2, 0.5, 0.1, 0.05), (16, 1.0, 0.3, 0.3), (1, 0.0, 0.0, 0.0), (5, 0.93, 0.05, 0.12)]:
        for index, value in enumerate([k, alpha, cost, verify]):
            f.set_range(index, value)
        assert spec_shown(f) == pytest.approx(spec_speedup(alpha, k, cost, verify), abs=0.0051), (k, alpha, cost, verify)
    f.set_range(0, 16), f.set_range(1, 1), f.set_range(2, 0.3), f.set_range(3, 0.3)
    assert "slower than plain decoding" in f.text(".lk-readout")
    f.check_quiet()


def spec_points(f, options=None):
    """The measured points drawn: (label, tooltip) of each, with the figure's own options or the given ones."""
    return f.page.evaluate("""async (options) => {
        let element = document.querySelector('figure.lk-figure');
        if (options) {
            element = document.createElement('figure');
            element.className = 'lk-figure';
            document.body.append(element);
            (await import('/figures/speculative-speedup.js')).default(element, options);
            for (let i = 0; i < 100 && !element.querySelector('svg *'); i++) await new Promise((r) => setTimeout(r, 50));
        }
        return [...element.querySelectorAll('.lk-spec-point')].map((g) => [g.dataset.label, g.querySelector('title').textContent]);
    }""", options)


def test_speculative_speedup_draws_the_measured_points(open_figure):
    data = json.loads(SPEC_MEASURED.read_text())
    cpu = [p for p in data["points"] if p["machine"].startswith("CPU")]
    assert len(cpu) >= 6
    f = open_figure("speculative-speedup")
    drawn = spec_points(f)  # the section's block says points: all
    assert len(drawn) == len(data["points"])
    for (label, title), point in zip(drawn, data["points"]):
        assert label == point["label"]
        for field in ["machine", "model", "command"]:
            assert point[field] in title, (field, title)
    assert "2026-12-05" in drawn[0][1]
    assert len(spec_points(f, {"points": "cpu"})) == len(cpu)
    assert len(spec_points(f, {"points": "all"})) == len(data["points"])
    # The dots measured with the chosen k are filled.
    assert f.root.locator(".lk-spec-point-current").count() == sum(p["k"] == 4 for p in data["points"])
    f.set_range(0, 8)
    assert f.root.locator(".lk-spec-point-current").count() == sum(p["k"] == 8 for p in data["points"])
    f.check_quiet()


# ---- disaggregation ------------------------------------------------------------------------

def test_disaggregation_load_draws_every_measurement(open_figure):
    data = json.loads((ROOT / "book/figures/data/disaggregation-cpu.json").read_text())
    f = open_figure("disaggregation-load")
    titles = f.page.evaluate("() => [...document.querySelectorAll('.lk-fig circle title')].map((t) => t.textContent)")
    assert len(titles) == len(data["rows"]) == 6
    for row in data["rows"]:
        name = "colocated" if row["mode"] == "colocated" else "1 prefill + 1 decode"
        shown = [float(re.search(r": ([\d.,]+) ms$", t).group(1).replace(",", "")) for t in titles
                 if t.startswith(name) and f", {round(row['long_share'] * 100)}% long prompts" in t]
        assert len(shown) == 1 and abs(shown[0] - row["tpot_p99_ms"]) < 0.006, (row, titles)
    split = next(r for r in data["rows"] if r["mode"] == "split" and r["long_share"] == 0.5)
    readout = f.text(".lk-readout")
    assert f"{split['kv_transfer_mean_ms']:.1f} ms a request" in readout, readout
    before = f.drawing()
    f.root.get_by_label("Metric").select_option("goodput_req_s")
    assert f.drawing() != before and "req/s" in f.text(".lk-readout")
    f.click("0%")
    assert f.text(".lk-readout").startswith("At 0% long prompts")
    f.check_quiet()


# ---- the site search -------------------------------------------------------------------------

def test_site_search_finds_a_term_from_each_chapter(browser, base_url):
    """The header's search box (site.js over /search-index.json) finds each chapter's first
    section by its title's words, links to it, and says so when no page holds the words."""
    book = json.loads((ROOT / "book/content/book.json").read_text())
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type in ("error", "warning") and errors.append(m.text))
    page.goto(f"{base_url}/")
    box = page.get_by_role("searchbox", name="Search the book")
    for chapter in book["chapters"]:
        section = chapter["sections"][0]
        box.fill(section["title"])
        results = page.locator("#search-results")
        results.locator("li").first.wait_for(timeout=5000)
        hrefs = results.locator("li > a").evaluate_all("links => links.map((a) => a.getAttribute('href'))")
        assert f"/chapters/{chapter['slug']}/{section['slug']}" in hrefs[:3], (section["title"], hrefs)
    box.fill("zzqx nothing-like-this")
    assert "No page holds every word" in page.locator("#search-results").inner_text()
    box.press("Escape")
    assert page.locator("#search-results").is_hidden()
    assert not errors, errors
    page.close()


@pytest.mark.parametrize("path", ["/chapters/kernel-optimization/matrix-multiplication",
                                  "/chapters/foundations/threads-blocks-and-warps", "/chapters/glossary",
                                  "/chapters/glossary/fast-accumulation", "/chapters/reading"])
def test_long_pages_fit_a_phone(browser, base_url, path):
    """At 375 px a long section, the glossary and the reading list scroll only vertically: a long
    identifier in prose wraps (code blocks and tables scroll inside their own boxes)."""
    page = browser.new_page(viewport={"width": 375, "height": 800})
    try:
        assert page.goto(base_url + path).status == 200
        width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], (path, width)
    finally:
        page.close()
