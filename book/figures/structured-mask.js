// A token mask as you type: a JSON Schema, the model's output so far, and which
// tokens of a small vocabulary may come next. The grammar is the one minfer
// compiles from the schema (`minfer grammar export`, data/grammar-pet.json,
// written by scripts/book-grammar.sh); this module runs it with an Earley
// recognizer over code points, the same algorithm as engine/grammar/earley.cpp
// (which works on UTF-8 bytes). A token is allowed when the recognizer takes
// all its characters after the text; the end token only when the text is whole.
import { svg, html, figureRoot, drawing, scroller, button, controls, loadJSON, showError } from "./kit.js";

// A small vocabulary shaped like a BPE tokenizer's: whole words, pieces of
// words, punctuation runs and digits, so that a token often spans two places
// of the grammar ("\": " closes a key and opens its value).
const VOCAB = [
    "{", "}", "{\"", "\"", "\":", "\": ", "\",", "\", \"", ", \"", ",", " ", "\n", "  ",
    "animal", "legs", "name", "an", "imal", "le", "gs", "na", "me",
    "cat", "dog", "c", "a", "at", "d", "og", "ca", "do",
    "0", "1", "2", "4", "8", "9", "10", "-", "-1",
    "Rex", "Tom", "é", "x", "true", "null", "[", "]",
];
const END = "⟨end⟩";
const DEFAULT_TEXT = "{\"animal\": \"c";
const WIDTH = 680;
const CELL_W = 80, CELL_H = 30, COLUMNS = 8;

export default function mount(element, options = {}) {
    const root = figureRoot(element, "structured-mask");
    Promise.all([loadJSON("/figures/data/pet.schema.json"), loadJSON("/figures/data/grammar-pet.json")])
        .then(([schema, grammar]) => build(root, schema, grammar, options))
        .catch((error) => showError(root, `The grammar could not be loaded (${error.message}).`));
}

// ---- the recognizer -----------------------------------------------------------------

export class Recognizer {
    constructor(grammar) {
        this.g = grammar;
        // Nullable rules: an alternative of nullable rules only (a fixpoint).
        this.nullable = grammar.rules.map(() => false);
        for (let changed = true; changed;) {
            changed = false;
            grammar.rules.forEach((rule, r) => {
                if (this.nullable[r]) return;
                if (rule.alternatives.some((alt) => alt.every(([kind, i]) => kind === "r" && this.nullable[i]))) {
                    this.nullable[r] = changed = true;
                }
            });
        }
        this.sets = [[]];
        this.keys = [new Set()];
        grammar.rules[grammar.root].alternatives.forEach((_, a) => this.add(0, [grammar.root, a, 0, 0]));
        this.close(0);
    }

    next([rule, alt, dot]) { return this.g.rules[rule].alternatives[alt][dot]; }

    add(at, item) {
        const key = item.join(",");
        if (this.keys[at].has(key)) return;
        this.keys[at].add(key);
        this.sets[at].push(item);
    }

    close(at) {
        const set = this.sets[at];
        for (let i = 0; i < set.length; ++i) {
            const item = set[i];
            const sym = this.next(item);
            if (sym && sym[0] === "r") {
                this.g.rules[sym[1]].alternatives.forEach((_, a) => this.add(at, [sym[1], a, 0, at]));
                if (this.nullable[sym[1]]) this.add(at, [item[0], item[1], item[2] + 1, item[3]]);
            } else if (!sym) {
                for (const w of this.sets[item[3]]) {
                    const s = this.next(w);
                    if (s && s[0] === "r" && s[1] === item[0]) this.add(at, [w[0], w[1], w[2] + 1, w[3]]);
                }
            }
        }
    }

    // Takes one character (a code point); false (and no change) if no sentence can follow.
    feed(cp) {
        const next = [];
        for (const item of this.sets[this.sets.length - 1]) {
            const sym = this.next(item);
            if (sym && sym[0] === "c" && this.g.classes[sym[1]].some(([lo, hi]) => cp >= lo && cp <= hi)) {
                next.push([item[0], item[1], item[2] + 1, item[3]]);
            }
        }
        if (!next.length) return false;
        this.sets.push([]);
        this.keys.push(new Set());
        for (const item of next) this.add(this.sets.length - 1, item);
        this.close(this.sets.length - 1);
        return true;
    }

    // Characters taken so far; back to `n` of them.
    get size() { return this.sets.length - 1; }
    rollback(n) {
        this.sets.length = n + 1;
        this.keys.length = n + 1;
    }

    accepting() {
        const root = this.g.root;
        return this.sets[this.sets.length - 1].some((item) => item[0] === root && item[3] === 0 && !this.next(item));
    }

    // Feeds a whole text; the characters taken before the first refused one.
    feedText(text) {
        let taken = 0;
        for (const ch of text) {
            if (!this.feed(ch.codePointAt(0))) break;
            taken += 1;
        }
        return taken;
    }
}

// For each vocabulary entry: does the recognizer take all of it?
export function mask(recognizer, vocab) {
    return vocab.map((token) => {
        const before = recognizer.size;
        const all = recognizer.feedText(token) === [...token].length;
        recognizer.rollback(before);
        return all;
    });
}

// ---- the figure -----------------------------------------------------------------------

// A token as the grid writes it: spaces as middle dots, a line break as \n.
function shown(token) { return token.replace(/ /g, "·").replace(/\n/g, "\\n"); }

function build(root, schema, grammar, options) {
    let text = typeof options.text === "string" ? options.text : DEFAULT_TEXT;
    const input = html("input", { type: "text", id: "lk-mask-text", class: "lk-text", spellcheck: "false", autocomplete: "off" });
    input.value = text;
    const label = html("label", { for: "lk-mask-text" }, "The model's output so far");
    const back = button("Remove a character", () => { text = [...text].slice(0, -1).join(""); input.value = text; render(); });
    const reset = button("Start over", () => { text = ""; input.value = text; render(); });
    const readout = html("p", { class: "lk-readout", "aria-live": "polite" });
    const picture = drawing(WIDTH, 10, "The vocabulary's tokens, those the grammar allows next marked");
    const schemaText = html("pre", { class: "lk-schema" }, JSON.stringify(schema, null, 1));

    root.append(
        html("div", { class: "lk-control" }, label, input),
        controls(html("div", { class: "lk-buttons" }, back, reset)),
        readout, scroller(picture),
        html("details", {}, html("summary", {}, "The JSON Schema"), schemaText),
    );
    input.addEventListener("input", () => { text = input.value; render(); });

    function render() {
        const r = new Recognizer(grammar);
        const chars = [...text];
        const taken = r.feedText(text);
        const valid = taken === chars.length;
        const allowed = valid ? mask(r, VOCAB) : VOCAB.map(() => false);
        const whole = valid && r.accepting();
        const count = allowed.filter(Boolean).length + (whole ? 1 : 0);
        readout.textContent = valid
            ? `${count} of ${VOCAB.length + 1} tokens may come next` +
              (whole ? "; the text is a whole object, so the end token is allowed." : "; the end token is not allowed: the object is not finished.")
            : `The text leaves the schema at character ${taken + 1} ("${chars[taken]}"): no token may follow it.`;
        draw(allowed, whole);
    }

    function draw(allowed, whole) {
        const entries = [...VOCAB.map((t, i) => [t, allowed[i]]), [END, whole]];
        const rows = Math.ceil(entries.length / COLUMNS);
        const height = rows * CELL_H + 30;
        picture.setAttribute("viewBox", `0 0 ${WIDTH} ${height}`);
        picture.replaceChildren(svg("text", { x: 4, y: 16, "font-size": 13 }, "Allowed next (filled) and masked out (outlined); click an allowed token to append it"));
        entries.forEach(([token, ok], i) => {
            const x = (i % COLUMNS) * (CELL_W + 4) + 4, y = Math.floor(i / COLUMNS) * CELL_H + 26;
            const g = svg("g", { class: ok ? "lk-token lk-token-allowed" : "lk-token", "data-token": token });
            g.append(
                svg("rect", { x, y, width: CELL_W, height: CELL_H - 6, rx: 4,
                    fill: ok ? "var(--lk-good-bg)" : "var(--lk-paper)", stroke: ok ? "var(--lk-good)" : "var(--lk-line)" }),
                svg("text", { x: x + CELL_W / 2, y: y + 16, "text-anchor": "middle", "font-size": 12,
                    "font-family": "ui-monospace, monospace", opacity: ok ? 1 : 0.45 }, shown(token)),
            );
            if (ok && token !== END) {
                g.style.cursor = "pointer";
                g.addEventListener("click", () => { text += token; input.value = text; render(); });
            }
            picture.append(g);
        });
    }

    render();
}
