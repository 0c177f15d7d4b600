// Continuous batching and paged KV blocks, step by step, replayed from real
// `minfer generate --trace` runs, one per KV pool size (data/trace-stories260K.json,
// written by scripts/book-trace.sh). Everything drawn is read from the engine's own step
// plans: which sequences ran, how many tokens each, which blocks they hold,
// the free count, the waiting queue, preemptions. Nothing here decides what
// the scheduler would do; the figure only reads the file.
import {
    svg, html, figureRoot, drawing, scroller, slider, select, button, controls,
    loadJSON, showError, PALETTE,
} from "./kit.js";

const WIDTH = 680;
const ROW_HEIGHT = 26;
const BAR_LEFT = 64, BAR_RIGHT = 360;   // the sequences' token bars
const PLAY_INTERVAL_MS = 700;

export default function mount(element, options = {}) {
    const root = figureRoot(element, "batching-stepper");
    loadJSON("/figures/data/trace-stories260K.json")
        .then((trace) => build(root, trace, options))
        .catch((error) => showError(root, `The trace could not be loaded (${error.message}).`));
}

function build(root, data, options) {
    // One run of the engine per KV pool size; each is drawn the same way.
    const runs = data.runs.map((run) => ({ ...run, model: data.model, requests: data.requests }));
    const preemptions = (run) => run.steps.reduce((n, s) => n + s.preempted.length, 0);
    let trace, history, index, timer = null;

    const status = html("div", { class: "lk-status", "aria-live": "polite" });
    const readout = html("p", { class: "lk-readout" });
    const picture = drawing(WIDTH, 100, "One engine step: the batch, each sequence's tokens and the KV block pool");
    const source = html("code");

    const poolSelect = select({
        label: "KV pool",
        value: data.default_run,
        choices: runs.map((run, k) => [k, `${run.settings.num_kv_blocks} blocks: ${preemptions(run)} preemption${preemptions(run) === 1 ? "" : "s"}, ${run.steps.length} steps`]),
        onChange: (k) => { stop(); load(Number(k)); },
    });
    const stepSlider = slider({
        label: "Step", min: 1, max: 1, value: 1,
        show: (v) => `${v} of ${trace ? trace.steps.length : 1}`,
        onInput: (v) => { stop(); go(v - 1); },
    });
    const previous = button("◀ Previous", () => { stop(); go(index - 1); });
    const next = button("Next ▶", () => { stop(); go(index + 1); });
    const play = button("Play", () => (timer ? stop() : start()));
    const nextPreemption = button("Next preemption", () => {
        stop();
        const later = trace.steps.findIndex((s, i) => i > index && s.preempted.length > 0);
        go(later >= 0 ? later : trace.steps.findIndex((s) => s.preempted.length > 0));
    });

    root.append(
        controls(html("div", { class: "lk-buttons" }, previous, play, next, nextPreemption), poolSelect.element, stepSlider.element),
        status, readout, scroller(picture),
        html("p", { class: "lk-fig-source" }, `Replayed from the engine's own trace (the bundled ${data.model} model on the CPU): `, source),
    );

    // Shows run k at its first preemption (or its first step when it has none).
    function load(k, step) {
        trace = runs[k];
        history = readHistory(trace);
        const height = 126 + history.seqs.length * ROW_HEIGHT + 24 + blockRows(trace) * 62;
        picture.setAttribute("viewBox", `0 0 ${WIDTH} ${height}`);
        source.textContent = trace.command;
        nextPreemption.disabled = preemptions(trace) === 0;
        stepSlider.input.max = trace.steps.length;
        const firstPreemption = trace.steps.findIndex((s) => s.preempted.length > 0);
        go(step >= 1 && step <= trace.steps.length ? step - 1 : Math.max(0, firstPreemption));
    }
    function go(i) {
        index = Math.min(trace.steps.length - 1, Math.max(0, i));
        stepSlider.set(index + 1);
        previous.disabled = index === 0;
        next.disabled = index === trace.steps.length - 1;
        render();
    }
    function start() {
        if (index === trace.steps.length - 1) go(0);
        play.textContent = "Pause";
        timer = setInterval(() => (index < trace.steps.length - 1 ? go(index + 1) : stop()), PLAY_INTERVAL_MS);
    }
    function stop() {
        clearInterval(timer);
        timer = null;
        play.textContent = "Play";
    }
    function render() {
        const step = trace.steps[index];
        status.replaceChildren(...statusBadges(trace, history, index));
        readout.textContent = narrate(trace, history, index);
        picture.replaceChildren(...drawStep(trace, history, step, index));
    }
    const pool = runs.findIndex((run) => run.settings.num_kv_blocks === Number(options.kv_blocks));
    load(pool >= 0 ? pool : data.default_run, Number(options.step));
}

// ---- reading the file -----------------------------------------------------------

// Per sequence: its request, the steps it ran in, the steps it was preempted
// at. All of it is read off the trace.
function readHistory(trace) {
    const bySeq = new Map();
    const seqOf = (id) => {
        if (!bySeq.has(id)) bySeq.set(id, { id, ran: [], preempted: [], request: null, sample: 0 });
        return bySeq.get(id);
    };
    trace.steps.forEach((step, i) => {
        for (const s of step.seqs) {
            const q = seqOf(s.seq);
            q.ran.push(i);
            q.request = s.request;
            q.sample = s.sample;
        }
        for (const id of step.preempted) seqOf(id).preempted.push(i);
    });
    const seqs = [...bySeq.values()].sort((a, b) => a.id - b.id);
    seqs.forEach((q, k) => {
        // The engine numbers requests from 1 in the input file's order.
        const request = trace.requests[q.request - 1];
        q.name = request ? String(request.id) + (q.sample ? `#${q.sample}` : "") : `seq ${q.id}`;
        q.length = request ? request.prompt_tokens + request.max_tokens : 0;
        q.promptTokens = request ? request.prompt_tokens : 0;
        q.colour = PALETTE[k % PALETTE.length];
    });
    return { seqs, byId: bySeq };
}

// Where a sequence stands at step i, as the file shows it.
function seqState(q, step, i) {
    const entry = step.seqs.find((s) => s.seq === q.id);
    if (entry) return { kind: entry.kind, entry };
    if (step.preempted.includes(q.id)) return { kind: "preempted-now" };
    if (!q.ran.length || i < q.ran[0]) return { kind: "not-admitted" };
    if (i > q.ran[q.ran.length - 1]) return { kind: "finished" };
    const lastRan = Math.max(...q.ran.filter((r) => r < i));
    const preemptedSince = q.preempted.find((p) => p > lastRan && p <= i);
    return preemptedSince !== undefined ? { kind: "preempted", at: preemptedSince } : { kind: "idle" };
}

// A sequence admitted at this step: its first step, or its first since a preemption.
function admittedNow(q, i) {
    if (!q.ran.includes(i)) return false;
    const before = q.ran.filter((r) => r < i);
    if (!before.length) return true;
    return q.preempted.some((p) => p > before[before.length - 1] && p <= i);
}

function blockRows(trace) {
    return Math.ceil(trace.settings.num_kv_blocks / 16);
}

// ---- text -------------------------------------------------------------------------

function statusBadges(trace, history, i) {
    const step = trace.steps[i];
    const hits = step.prefix_cache_hits - (i ? trace.steps[i - 1].prefix_cache_hits : 0);
    const names = (ids) => ids.map((id) => history.byId.get(id)?.name ?? id).join(", ");
    const badge = (text, kind = "") => html("span", { class: `lk-badge ${kind}` }, text);
    const out = [
        badge(`step ${step.step}`),
        badge(`${step.seqs.length} sequence${step.seqs.length === 1 ? "" : "s"}, ${step.num_tokens} token${step.num_tokens === 1 ? "" : "s"}`),
        badge(`free blocks ${step.blocks_free} of ${step.blocks_total}`),
        badge(`waiting ${step.waiting}`),
    ];
    if (step.preempted.length) out.push(badge(`preempted: ${names(step.preempted)}`, "lk-badge-warn"));
    if (hits > 0) out.push(badge(`prefix cache +${hits} tokens`, "lk-badge-good"));
    return out;
}

// One or two sentences on what happened in step i.
function narrate(trace, history, i) {
    const step = trace.steps[i];
    const parts = [];
    const prefills = [], decodes = [];
    for (const s of step.seqs) {
        const q = history.byId.get(s.seq);
        if (admittedNow(q, i)) {
            parts.push(s.computed > 0
                ? `${q.name} is admitted with its first ${s.computed} tokens already in the prefix cache (shared blocks, nothing to recompute).`
                : `${q.name} is admitted.`);
        }
        if (s.kind === "prefill") prefills.push(`${q.name} tokens ${s.computed}–${s.computed + s.tokens - 1}`);
        else decodes.push(q.name);
    }
    if (prefills.length) parts.push(`Prefill chunk${prefills.length > 1 ? "s" : ""}: ${prefills.join("; ")}.`);
    if (decodes.length) parts.push(`${decodes.join(", ")} decode${decodes.length === 1 ? "s" : ""} one token${decodes.length === 1 ? "" : " each"}.`);
    for (const id of step.preempted) {
        parts.push(`A running sequence needed a new block and none was free, so the scheduler preempted ${history.byId.get(id).name}: ` +
            "its blocks go back to the pool and it waits to compute its tokens again.");
    }
    const finished = history.seqs.filter((q) => q.ran[q.ran.length - 1] === i).map((q) => q.name);
    if (finished.length) parts.push(`${finished.join(", ")} finish${finished.length === 1 ? "es" : ""} with this step.`);
    return parts.join(" ");
}

// ---- drawing ------------------------------------------------------------------------

function drawStep(trace, history, step, i) {
    const parts = [];
    let y = 18;

    // The step's token budget, split among the sequences that ran.
    const budget = trace.settings.max_num_batched_tokens;
    parts.push(svg("text", { x: 10, y, class: "lk-section-title" },
        `TOKENS IN THIS STEP: ${step.num_tokens} OF A BUDGET OF ${budget} (AT MOST ${trace.settings.max_num_seqs} SEQUENCES)`));
    y += 10;
    const slot = (WIDTH - 20) / budget;
    parts.push(svg("rect", { x: 10, y, width: WIDTH - 20, height: 24, class: "lk-track" }));
    let x = 10;
    for (const s of step.seqs) {
        const q = history.byId.get(s.seq);
        parts.push(svg("rect", { x, y, width: s.tokens * slot, height: 24, fill: q.colour, class: "lk-kv-cell" }));
        if (s.tokens * slot >= 26) {
            parts.push(svg("text", { x: x + (s.tokens * slot) / 2, y: y + 16, "text-anchor": "middle", class: "lk-kv-id-on" },
                s.tokens * slot >= 70 ? `${q.name}: ${s.tokens} ${s.kind}` : `${q.name} ${s.tokens}`));
        }
        x += s.tokens * slot;
    }
    y += 56;

    // One row per sequence: its tokens so far and this step's share.
    parts.push(svg("text", { x: 10, y, class: "lk-section-title" }, "SEQUENCES"),
               svg("text", { x: 112, y, class: "lk-row-note" }, "pale: tokens already in the KV cache · bright: this step's tokens · line: end of the prompt"));
    y += 10;
    const maxLength = Math.max(...history.seqs.map((q) => q.length));
    const tokenX = (t) => BAR_LEFT + (t / maxLength) * (BAR_RIGHT - BAR_LEFT);
    for (const q of history.seqs) {
        parts.push(...drawSeqRow(q, seqState(q, step, i), tokenX, y));
        y += ROW_HEIGHT;
    }
    y += 26;

    // The KV block pool, coloured by the sequences of this step that hold each block.
    const bs = trace.settings.block_size;
    parts.push(svg("text", { x: 10, y, class: "lk-section-title" },
        `KV BLOCK POOL: ${step.blocks_total} BLOCKS OF ${bs} TOKENS, ${step.blocks_free} FREE (THE ENGINE'S COUNT)`));
    y += 12;
    parts.push(...drawBlocks(history, step, bs, y));
    return parts;
}

function drawSeqRow(q, state, tokenX, y) {
    const parts = [
        svg("rect", { x: 10, y: y + 3, width: 14, height: 14, fill: q.colour, rx: 2 }),
        svg("text", { x: 30, y: y + 15, class: "lk-row-label" }, q.name),
        svg("rect", { x: BAR_LEFT, y: y + 2, width: BAR_RIGHT - BAR_LEFT, height: 16, class: "lk-track" }),
        // Where the prompt ends.
        svg("line", { x1: tokenX(q.promptTokens), x2: tokenX(q.promptTokens), y1: y, y2: y + 20, class: "lk-prompt-end" }),
    ];
    const note = (text, cls = "lk-row-note") => svg("text", { x: BAR_RIGHT + 12, y: y + 15, class: cls }, text);
    const e = state.entry;
    switch (state.kind) {
        case "prefill":
        case "decode": {
            parts.push(
                svg("rect", { x: BAR_LEFT, y: y + 2, width: tokenX(e.computed) - BAR_LEFT, height: 16, fill: q.colour, class: "lk-context" }),
                svg("rect", { x: tokenX(e.computed), y: y + 2, width: Math.max(2, tokenX(e.computed + e.tokens) - tokenX(e.computed)), height: 16, fill: q.colour }),
                note(e.kind === "prefill"
                    ? `prefill ${e.tokens} token${e.tokens === 1 ? "" : "s"} after ${e.computed} cached · ${e.blocks.length} blocks`
                    : `decode 1 token at position ${e.computed} · ${e.blocks.length} blocks`),
            );
            break;
        }
        case "preempted-now":
            parts.push(svg("rect", { x: BAR_LEFT, y: y + 2, width: BAR_RIGHT - BAR_LEFT, height: 16, class: "lk-preempted-box" }),
                       note("preempted: blocks freed, to be recomputed", "lk-row-warn"));
            break;
        case "preempted":
            parts.push(note(`waiting again (preempted at step ${state.at})`, "lk-row-warn"));
            break;
        case "not-admitted":
            parts.push(note("waiting: not admitted yet"));
            break;
        case "finished":
            parts.push(svg("rect", { x: BAR_LEFT, y: y + 2, width: tokenX(q.length) - BAR_LEFT, height: 16, fill: q.colour, class: "lk-context" }),
                       note("finished"));
            break;
        default:
            parts.push(note("running, not scheduled in this step"));
    }
    return parts;
}

function drawBlocks(history, step, blockSize, top) {
    // Which sequences of this step hold each block, and how many of its slots
    // hold tokens once the step is done.
    const owners = new Map();
    for (const s of step.seqs) {
        const filled = s.computed + s.tokens;
        s.blocks.forEach((block, k) => {
            if (!owners.has(block)) owners.set(block, { seqs: [], filled: 0 });
            const o = owners.get(block);
            o.seqs.push(history.byId.get(s.seq));
            o.filled = Math.max(o.filled, Math.min(blockSize, Math.max(0, filled - k * blockSize)));
        });
    }
    const parts = [];
    const columns = Math.min(16, step.blocks_total);
    const cell = (WIDTH - 20) / columns;
    const size = cell - 6;
    for (let b = 0; b < step.blocks_total; b += 1) {
        const x = 10 + (b % columns) * cell;
        const y = top + Math.floor(b / columns) * 62 + 14;
        parts.push(svg("text", { x: x + size / 2, y: y - 4, "text-anchor": "middle", class: "lk-kv-id" }, `#${b}`));
        const o = owners.get(b);
        if (!o) {
            parts.push(svg("rect", { x, y, width: size, height: 24, class: "lk-kv-free", rx: 2 }));
            continue;
        }
        // Token slots left to right; a block shared by several sequences is
        // striped with their colours, one band each.
        const slotWidth = size / blockSize;
        const band = 24 / o.seqs.length;
        for (let t = 0; t < blockSize; t += 1) {
            o.seqs.forEach((q, k) => {
                parts.push(svg("rect", { x: x + t * slotWidth, y: y + k * band, width: slotWidth - 1, height: band,
                                         ...(t < o.filled ? { fill: q.colour } : { class: "lk-slot-empty" }) }));
            });
        }
        parts.push(svg("rect", { x, y, width: size, height: 24, class: "lk-outline", rx: 2 }));
        parts.push(svg("text", { x: x + size / 2, y: y + 38, "text-anchor": "middle", class: "lk-kv-id" },
            o.seqs.map((q) => q.name).join(" ")));
    }
    return parts;
}
