// Learn Kernels: the little the pages need from JavaScript. Every page reads
// fine without it; this adds typeset math (KaTeX), highlighted code
// (highlight.js), the glossary filter, the site search, the marked line range
// of a source view, and the interactive figures (book/figures/ID.js,
// mount(element, options)).

// Math: the renderer wrapped each formula, still written as TeX, in .math.
function typesetMath() {
  if (typeof window.renderMathInElement !== "function") return;
  for (const el of document.querySelectorAll(".math")) {
    window.renderMathInElement(el, {
      delimiters: [
        { left: "$$", right: "$$", display: true },
        { left: "$", right: "$", display: false },
      ],
      throwOnError: false,
    });
  }
}

// Code: the book's fence languages mapped onto those highlight.js knows.
const LANGUAGE_ALIASES = { cuda: "cpp", cu: "cpp", "c++": "cpp", sh: "bash", shell: "bash", console: "bash" };

function highlightCode() {
  const hljs = window.hljs;
  if (!hljs) return;
  // The site serves Debian's highlight.js 9 (libjs-highlight.js, kept up by
  // Debian); without this it prints an upgrade notice to the console.
  hljs.configure({ hideUpgradeWarningAcceptNoSupportOrSecurityUpdates: true });
  for (const code of document.querySelectorAll('pre code[class*="language-"]')) {
    const match = code.className.match(/language-([\w+-]+)/);
    const language = LANGUAGE_ALIASES[match[1]] || match[1];
    if (!hljs.getLanguage(language)) continue; // ptx, sass, text: left plain
    code.innerHTML = hljs.highlight(language, code.textContent, true).value;
    code.classList.add("hljs");
  }
}

// Source view: #L12 or #L12-L48 marks those lines and scrolls to the first.
function markSourceRange() {
  const view = document.querySelector(".lk-source");
  if (!view) return;
  for (const old of view.querySelectorAll(".lk-range")) old.remove();
  for (const old of view.querySelectorAll(".lk-gutter a.hl")) old.classList.remove("hl");
  const m = location.hash.match(/^#L(\d+)(?:-L(\d+))?$/);
  if (!m) return;
  const lines = Number(view.dataset.lines);
  const first = Math.max(1, Number(m[1]));
  const last = Math.min(lines, Math.max(first, Number(m[2] || m[1])));
  if (first > lines) return;
  for (let n = first; n <= last; n++) document.getElementById("L" + n)?.classList.add("hl");
  const code = view.querySelector(".lk-code");
  const style = getComputedStyle(code);
  const lineHeight = parseFloat(style.lineHeight);
  const band = document.createElement("div");
  band.className = "lk-range";
  band.style.top = `${parseFloat(style.paddingTop) + (first - 1) * lineHeight}px`;
  band.style.height = `${(last - first + 1) * lineHeight}px`;
  code.prepend(band);
  document.getElementById("L" + first)?.scrollIntoView({ block: first === last ? "center" : "start" });
}

// Glossary: the filter box is hidden until this script can make it work.
function setUpGlossaryFilter() {
  const box = document.querySelector(".glossary-search");
  const input = document.getElementById("glossary-filter");
  if (!box || !input) return;
  const entries = [...document.querySelectorAll(".glossary-entry")];
  const count = document.getElementById("glossary-count");
  box.hidden = false;
  const apply = () => {
    const query = input.value.trim().toLowerCase();
    let shown = 0;
    for (const entry of entries) {
      const hit = !query || entry.textContent.toLowerCase().includes(query);
      entry.hidden = !hit;
      shown += hit;
    }
    count.textContent = query ? `${shown} of ${entries.length} terms` : "";
  };
  input.addEventListener("input", apply);
}

// Search: /search-index.json (every chapter, section and reference page as
// plain words, written by the site and by `book build`) is fetched on the
// first keystroke and searched here: a page matches when it holds every word
// of the query; pages whose title holds them come first, then by matches.
let searchIndex = null;

function escapeHtml(text) {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

function searchPages(index, query) {
  const words = query.toLowerCase().split(/\s+/).filter((w) => w.length > 1);
  if (!words.length) return [];
  const results = [];
  for (const page of index) {
    const title = page.title.toLowerCase(), text = page.text.toLowerCase();
    if (!words.every((w) => title.includes(w) || text.includes(w))) continue;
    let count = 0;
    for (const w of words) for (let at = text.indexOf(w); at >= 0; at = text.indexOf(w, at + w.length)) count++;
    const inTitle = words.filter((w) => title.includes(w)).length;
    const first = Math.max(0, text.indexOf(words[0]));
    const from = Math.max(0, first - 80);
    const excerpt = (from > 0 ? "…" : "") + page.text.slice(from, first + 160) + "…";
    results.push({ page, score: inTitle * 1000 + count, excerpt });
  }
  return results.sort((a, b) => b.score - a.score).slice(0, 12);
}

function setUpSearch() {
  const input = document.getElementById("site-search");
  const panel = document.getElementById("search-results");
  if (!input || !panel) return;
  input.closest("form").hidden = false;
  input.closest("form").addEventListener("submit", (event) => event.preventDefault());
  const show = async () => {
    const query = input.value.trim();
    if (!query) { panel.hidden = true; return; }
    try {
      if (!searchIndex) searchIndex = await (await fetch("/search-index.json")).json();
    } catch (error) {
      panel.innerHTML = `<p>The search index could not be loaded.</p>`;
      panel.hidden = false;
      return;
    }
    const results = searchPages(searchIndex, query);
    panel.innerHTML = results.length
      ? `<p class="search-count">${results.length} page${results.length > 1 ? "s" : ""}</p><ol>` +
        results.map((r) => `<li><a href="${escapeHtml(r.page.url)}">${escapeHtml(r.page.title)}</a>` +
                            `<p>${escapeHtml(r.excerpt)}</p></li>`).join("") + "</ol>"
      : `<p class="search-count">No page holds every word of “${escapeHtml(query)}”.</p>`;
    panel.hidden = false;
  };
  input.addEventListener("input", show);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") { input.value = ""; panel.hidden = true; }
  });
}

// Ask AI: a question about the page goes to /api/ask, which sends it with
// the page's text to the answering server the book's server was started with
// (--ask-ai-url), and streams the answer back with the sources it used.
// Without one (or in a static copy of the site) the panel says so.
function setUpAskAi() {
  const open = document.getElementById("ask-ai-open");
  const panel = document.getElementById("ask-ai");
  if (!open || !panel) return;
  const form = document.getElementById("ask-ai-form");
  const question = document.getElementById("ask-ai-question");
  const note = document.getElementById("ask-ai-note");
  const answer = document.getElementById("ask-ai-answer");
  const sources = document.getElementById("ask-ai-sources");
  open.hidden = false;
  let info = null;
  open.addEventListener("click", async () => {
    panel.hidden = false;
    question.focus();
    if (!info) {
      try {
        const r = await fetch("/api/ask");
        info = r.ok ? await r.json() : { enabled: false };
      } catch (error) {
        info = { enabled: false };
      }
      note.textContent = info.enabled
        ? `Your question is sent with ${info.sends.slice(1).join(" and ")} to the answering server this site was started with (see the privacy page).`
        : "Ask AI is off here: it needs the book's own server started with --ask-ai-url (for instance a minfer serve you run).";
      form.querySelector('button[type="submit"]').disabled = !info.enabled;
    }
  });
  document.getElementById("ask-ai-close").addEventListener("click", () => { panel.hidden = true; });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = question.value.trim();
    if (!text || !info || !info.enabled) return;
    answer.textContent = "";
    sources.replaceChildren();
    answer.setAttribute("aria-busy", "true");
    try {
      const response = await fetch("/api/ask", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ page: location.pathname, question: text }),
      });
      if (!response.ok) {
        answer.textContent = (await response.json()).error || `The server answered ${response.status}.`;
        return;
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const line = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
          const message = JSON.parse(line.slice(6));
          if (message.delta) answer.textContent += message.delta;
          if (message.error) answer.textContent += ` (${message.error})`;
          for (const source of message.sources || []) {
            const link = document.createElement("a");
            link.href = source.url;
            link.textContent = source.title;
            const item = document.createElement("li");
            item.append(link);
            sources.append(item);
          }
        }
      }
    } catch (error) {
      answer.textContent = `The question could not be sent: ${error.message}`;
    } finally {
      answer.removeAttribute("aria-busy");
    }
  });
}

// Figures: each module draws inside its <figure>, above the caption the page
// already has (the caption is put back should a module clear the element).
// A failure is shown in the figure, not logged to the console.
async function mountFigures() {
  for (const figure of document.querySelectorAll("figure.lk-figure[data-figure]")) {
    const id = figure.dataset.figure;
    const caption = figure.querySelector(":scope > figcaption");
    try {
      const options = JSON.parse(figure.dataset.options || "{}");
      const module = await import(`/figures/${encodeURIComponent(id)}.js`);
      await module.default(figure, options);
    } catch (error) {
      const note = document.createElement("p");
      note.className = "lk-figure-error";
      note.textContent = `The figure "${id}" could not be shown: ${error && error.message ? error.message : error}`;
      figure.insertBefore(note, caption && figure.contains(caption) ? caption : null);
    }
    if (caption && !figure.contains(caption)) figure.append(caption);
  }
}

// On a narrow screen the contents sit above the text: start them folded there
// (without JavaScript they stay open, which is still readable).
function foldContentsOnNarrowScreens() {
  const details = document.querySelector(".toc details");
  if (details && window.matchMedia("(max-width: 60rem)").matches) details.open = false;
}

foldContentsOnNarrowScreens();
typesetMath();
highlightCode();
setUpGlossaryFilter();
setUpSearch();
setUpAskAi();
markSourceRange();
window.addEventListener("hashchange", markSourceRange);
mountFigures();
