// Flash attention's online softmax, one tile at a time, over one row of
// attention scores. The kernel never holds the whole row: it keeps a running
// max m, a running sum l of exp(s - m), and an output accumulator; when a tile
// raises the max, l and the accumulator are rescaled by exp(m_old - m_new).
// The figure computes in float32, as the kernel does, and compares the result
// with the ordinary softmax computed at once in float64.
import {
    svg, html, figureRoot, drawing, scroller, select, button, controls, linearScale,
    formatNumber,
} from "./kit.js";

const LENGTH = 16;        // scores in the row
const VALUE_DIM = 4;      // a small head dimension, to show the accumulator as a vector
const TILE_SIZES = [2, 4, 8, 16];
const DEFAULT_SEED = 2;   // the max rises in tiles 2 and 3 (of 4) and not in tile 4
const WIDTH = 680;

const f32 = Math.fround;

export default function mount(element, options = {}) {
    const root = figureRoot(element, "online-softmax");
    const state = {
        seed: Number.isInteger(Number(options.seed)) && options.seed !== "" ? Number(options.seed) : DEFAULT_SEED,
        tileSize: TILE_SIZES.includes(Number(options.tile_size)) ? Number(options.tile_size) : 4,
        done: null,  // tiles processed; null: all of them
    };
    let row = makeRow(state.seed);

    const tileSelect = select({
        label: "Tile size", value: state.tileSize, choices: TILE_SIZES.map((t) => [t, `${t} scores`]),
        onChange: (t) => { state.tileSize = Number(t); state.done = 0; render(); },
    });
    const previous = button("◀ Previous tile", () => { state.done = Math.max(0, tilesDone() - 1); render(); });
    const next = button("Next tile ▶", () => { state.done = Math.min(tileCount(), tilesDone() + 1); render(); });
    const reset = button("Reset", () => { state.done = 0; render(); });
    const shuffle = button("New random scores", () => {
        state.seed += 1;
        row = makeRow(state.seed);
        state.done = 0;
        render();
    });
    const seedLabel = html("span", { class: "lk-label" });

    const readout = html("p", { class: "lk-readout", "aria-live": "polite" });
    const picture = drawing(WIDTH, 300, "A row of attention scores split into tiles, the running max and the weights exp(s - m)");
    const frame = scroller(picture);
    const tableBody = html("tbody");
    const table = html("table", { class: "lk-table" },
        html("thead", {}, html("tr", {},
            ...["tile", "tile max", "m", "rescale exp(m_old − m_new)", "l", "accumulator"]
                .map((h) => html("th", { scope: "col" }, h)))),
        tableBody);
    const compare = html("p", { class: "lk-compare" });

    root.append(
        controls(html("div", { class: "lk-buttons" }, previous, next, reset), tileSelect.element,
                 html("div", { class: "lk-control" }, seedLabel, shuffle)),
        readout, frame, html("div", { class: "lk-table-wrap" }, table), compare,
    );

    function tileCount() { return Math.ceil(LENGTH / state.tileSize); }
    function tilesDone() { return state.done === null ? tileCount() : state.done; }

    function render() {
        const done = tilesDone();
        const history = runOnline(row, state.tileSize);
        previous.disabled = done === 0;
        reset.disabled = done === 0;
        next.disabled = done === tileCount();
        seedLabel.textContent = `Scores: seed ${state.seed}`;
        readout.textContent = explain(history, done, state.tileSize);
        drawRow(picture, row, history, done, state.tileSize);
        fillTable(tableBody, history, done);
        fillCompare(compare, row, history, done);
        // On a narrow screen the drawing scrolls: keep the latest tile in view.
        if (frame.scrollWidth > frame.clientWidth && done) {
            const h = history[done - 1];
            const centre = (h.start + h.end) / 2 / LENGTH;
            frame.scrollLeft = centre * frame.scrollWidth - frame.clientWidth / 2;
        }
    }
    render();
}

// ---- the numbers ----------------------------------------------------------------------

// A small seeded generator (mulberry32), so "new random scores" is repeatable.
function generator(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

// Scores around 0 with a spread of about 2 (as scaled q·k often are), and a
// value vector per key.
function makeRow(seed) {
    const random = generator(seed);
    const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
    const scores = Array.from({ length: LENGTH }, () => f32(2 * normal()));
    const values = Array.from({ length: LENGTH }, () => Array.from({ length: VALUE_DIM }, () => f32(2 * random() - 1)));
    return { scores, values };
}

// The kernel's loop in float32: one entry per tile with the state after it.
function runOnline(row, tileSize) {
    let m = -Infinity, l = 0;
    let acc = new Array(VALUE_DIM).fill(0);
    const history = [];
    for (let start = 0; start < LENGTH; start += tileSize) {
        const end = Math.min(LENGTH, start + tileSize);
        const tile = row.scores.slice(start, end);
        const tileMax = Math.max(...tile);
        const mNew = Math.max(m, tileMax);
        // The first tile has nothing to rescale (exp(-inf) would be 0 anyway).
        const rescale = m === -Infinity ? null : f32(Math.exp(f32(m - mNew)));
        l = rescale === null ? 0 : f32(l * rescale);
        acc = acc.map((a) => (rescale === null ? 0 : f32(a * rescale)));
        for (let j = start; j < end; j += 1) {
            const p = f32(Math.exp(f32(row.scores[j] - mNew)));
            l = f32(l + p);
            acc = acc.map((a, d) => f32(a + f32(p * row.values[j][d])));
        }
        history.push({ start, end, tileMax, mOld: m, m: mNew, rescale, l, acc: acc.slice() });
        m = mNew;
    }
    return history;
}

// The ordinary softmax over the whole row, in float64, times the values.
function reference(row) {
    const m = Math.max(...row.scores);
    const e = row.scores.map((s) => Math.exp(s - m));
    const sum = e.reduce((a, b) => a + b, 0);
    return Array.from({ length: VALUE_DIM }, (_, d) => e.reduce((a, w, j) => a + w * row.values[j][d], 0) / sum);
}

// ---- text -----------------------------------------------------------------------------------

const fmt = (v) => (v === null ? "—" : formatNumber(v, 4));
const fmtVector = (v, digits = 3) => `[${v.map((x) => formatNumber(x, digits)).join(", ")}]`;

function explain(history, done, tileSize) {
    if (done === 0) {
        return `Nothing read yet: m = −∞, l = 0, accumulator = 0. The row of ${LENGTH} scores is read in tiles of ${tileSize}, ` +
            "as a kernel reads keys from memory; press Next tile.";
    }
    const h = history[done - 1];
    const range = `scores ${h.start}–${h.end - 1}`;
    if (done === 1) {
        return `Tile 1 (${range}): m = its max, ${fmt(h.m)}; l = Σ exp(s − m) = ${fmt(h.l)}; ` +
            "the accumulator = Σ exp(s − m) · v. Nothing earlier to rescale.";
    }
    if (h.rescale < 1) {
        return `Tile ${done} (${range}) has max ${fmt(h.tileMax)}, above m = ${fmt(h.mOld)}: m becomes ${fmt(h.m)}, so l and the ` +
            `accumulator so far are multiplied by exp(${fmt(h.mOld)} − ${fmt(h.m)}) = ${fmt(h.rescale)} before this tile's terms are added. ` +
            "Below, the dashed outlines are the earlier weights before the rescale, the pale bars after.";
    }
    return `Tile ${done} (${range}) has max ${fmt(h.tileMax)}, not above m = ${fmt(h.mOld)}: m stays, the rescale factor is exp(0) = 1, ` +
        "and this tile's terms are simply added to l and the accumulator.";
}

function fillTable(body, history, done) {
    body.replaceChildren(...history.slice(0, done).map((h, k) => {
        const rescaleCell = html("td", {}, fmt(h.rescale));
        if (h.rescale !== null && h.rescale < 1) rescaleCell.classList.add("lk-rescaled");
        return html("tr", { class: k === done - 1 ? "lk-now" : "" },
            html("td", {}, `${k + 1} (${h.start}–${h.end - 1})`), html("td", {}, fmt(h.tileMax)), html("td", {}, fmt(h.m)),
            rescaleCell, html("td", {}, fmt(h.l)), html("td", {}, fmtVector(h.acc)));
    }));
    if (!done) body.append(html("tr", {}, html("td", { colspan: 6 }, "(no tile yet)")));
}

function fillCompare(box, row, history, done) {
    if (done < history.length) {
        box.textContent = `After the last tile the output is accumulator / l. ${history.length - done} tile${history.length - done === 1 ? "" : "s"} to go.`;
        return;
    }
    const last = history[history.length - 1];
    const online = last.acc.map((a) => f32(a / last.l));
    const exact = reference(row);
    const diff = Math.max(...online.map((o, d) => Math.abs(o - exact[d])));
    box.replaceChildren(
        html("strong", {}, "Same result. "),
        `Online, float32: accumulator / l = ${fmtVector(online, 6)}. Ordinary softmax of the whole row, float64: ${fmtVector(exact, 6)}. `,
        `Largest difference ${diff.toExponential(1)}: float32 rounding (about 6e-8 per operation), not a different answer.`,
    );
}

// ---- drawing ----------------------------------------------------------------------------------

function drawRow(picture, row, history, done, tileSize) {
    const left = 96, right = WIDTH - 10;
    const slot = (right - left) / LENGTH;
    const barX = (j) => left + j * slot + 3;
    const barWidth = slot - 6;
    const limit = Math.max(4, Math.ceil(Math.max(...row.scores.map(Math.abs))));
    const y = linearScale(-limit, limit, 170, 30);          // the scores
    const w = linearScale(0, 1, 278, 200);                  // the weights exp(s - m)
    const parts = [];

    // Tiles as bands: read ones plain, the latest outlined.
    history.forEach((h, k) => {
        const cls = k === done - 1 ? "lk-tile-current" : "lk-tile-bg";
        parts.push(svg("rect", { x: left + h.start * slot, y: 22, width: (h.end - h.start) * slot, height: 262, class: cls, rx: 3 }));
        parts.push(svg("text", { x: left + ((h.start + h.end) / 2) * slot, y: 16, "text-anchor": "middle", class: "lk-kv-id" }, `tile ${k + 1}`));
    });

    parts.push(
        svg("text", { x: 8, y: y(0) - 4, class: "lk-section-title" }, "score s"),
        svg("line", { x1: left, x2: right, y1: y(0), y2: y(0), class: "lk-zero-line" }),
        svg("text", { x: left - 6, y: y(0) + 4, "text-anchor": "end", class: "lk-tick" }, "0"),
        svg("text", { x: left - 6, y: y(limit) + 10, "text-anchor": "end", class: "lk-tick" }, `+${limit}`),
        svg("text", { x: left - 6, y: y(-limit), "text-anchor": "end", class: "lk-tick" }, `−${limit}`),
    );
    const readEnd = done ? history[done - 1].end : 0;
    const latestStart = done ? history[done - 1].start : 0;
    row.scores.forEach((s, j) => {
        const cls = j >= readEnd ? "lk-score-later" : j >= latestStart ? "lk-score-now" : "lk-score-done";
        parts.push(svg("rect", { x: barX(j), y: Math.min(y(s), y(0)), width: barWidth, height: Math.abs(y(s) - y(0)), class: cls }));
    });

    // The running max after the tiles read so far, over the part read.
    if (done) {
        const h = history[done - 1];
        parts.push(
            svg("line", { x1: left, x2: left + readEnd * slot, y1: y(h.m), y2: y(h.m), class: "lk-max-line" }),
            svg("text", { x: left + readEnd * slot - 4, y: y(h.m) - 5, "text-anchor": "end", class: "lk-max-label" }, `m = ${formatNumber(h.m, 2)}`),
        );
        if (h.rescale !== null && h.rescale < 1) {
            parts.push(svg("line", { x1: left, x2: left + h.start * slot, y1: y(h.mOld), y2: y(h.mOld), class: "lk-max-line", opacity: 0.35 }),
                       svg("text", { x: left + 4, y: y(h.mOld) - 5, class: "lk-max-label", opacity: 0.6 }, `old m = ${formatNumber(h.mOld, 2)}`));
        }
    }

    // The weights exp(s - m) against the current m: when m rises, the earlier
    // weights are what the rescale turns them into (drawn pale); the earlier
    // value, against the old m, is outlined.
    parts.push(
        svg("text", { x: 8, y: 236, class: "lk-section-title" }, "weight"),
        svg("text", { x: 8, y: 252, class: "lk-row-note" }, "exp(s − m)"),
        svg("line", { x1: left, x2: right, y1: w(0), y2: w(0), class: "lk-zero-line" }),
        svg("text", { x: left - 6, y: w(1) + 4, "text-anchor": "end", class: "lk-tick" }, "1"),
    );
    if (done) {
        const h = history[done - 1];
        for (let j = 0; j < readEnd; j += 1) {
            const weight = Math.exp(row.scores[j] - h.m);
            const earlier = j < h.start;
            if (earlier && h.rescale !== null && h.rescale < 1) {
                const before = Math.exp(row.scores[j] - h.mOld);
                parts.push(svg("rect", { x: barX(j), y: w(before), width: barWidth, height: w(0) - w(before), class: "lk-before-rescale" }));
            }
            parts.push(svg("rect", { x: barX(j), y: w(weight), width: barWidth, height: Math.max(0.5, w(0) - w(weight)),
                                     class: earlier ? "lk-score-done" : "lk-score-now", opacity: earlier ? 0.45 : 1 }));
        }
    }
    picture.replaceChildren(...parts);
}
