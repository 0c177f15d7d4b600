// The KV-cache calculator: how many bytes the keys and values of a batch take,
// how a paged cache cuts them into blocks (and wastes the tail of the last
// one), and how many sequences of that length fit on an H200 beside the weights.
//
//   KV bytes per token = 2 (K and V) x layers x KV heads x head dim x bytes per element
import {
    svg, html, figureRoot, drawing, scroller, listSlider, select, toggle, controls,
    formatNumber, formatBytes, formatSignificant,
} from "./kit.js";

// The shapes of the models minfer runs (engine/gguf/synth.cpp's presets, checked
// with `minfer inspect --synthetic PRESET`). Parameters count every weight,
// embeddings included (the preset's f32 GGUF data section / 4).
const MODELS = {
    "llama3-8b": { name: "Llama 3.1 8B", layers: 32, kvHeads: 8, headDim: 128, params: 8.0305e9, maxContext: 131072, heads: 32 },
    "llama3-1b": { name: "Llama 3.2 1B (untied output)", layers: 16, kvHeads: 8, headDim: 64, params: 1.4985e9, maxContext: 131072, heads: 32 },
    "qwen2-0.5b": { name: "Qwen2.5 0.5B", layers: 24, kvHeads: 2, headDim: 64, params: 0.4940e9, maxContext: 32768, heads: 14 },
    "gemma3-270m": { name: "Gemma 3 270M", layers: 18, kvHeads: 1, headDim: 256, params: 0.2681e9, maxContext: 32768, heads: 4 },
};

const DTYPES = { fp32: 4, bf16: 2, fp8: 1 };  // bytes per element

// One NVIDIA H200 as CUDA reports it (139.8 GiB of HBM3e).
const GPU_BYTES = 139.8 * 2 ** 30;

// Slider stops; several contexts are not multiples of a block on purpose.
const CONTEXTS = [100, 500, 1000, 1500, 2000, 3000, 4000, 5000, 8000, 10000, 16000, 20000, 32000, 50000, 64000, 100000, 131072];
const BATCHES = [1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024];
const BLOCK_SIZES = [8, 16, 32, 64];

export default function mount(element, options = {}) {
    const root = figureRoot(element, "kv-cache-calculator");
    const state = {
        model: MODELS[options.preset] ? options.preset : "llama3-8b",
        dtype: DTYPES[options.dtype] ? options.dtype : "bf16",
        context: CONTEXTS.includes(Number(options.context)) ? Number(options.context) : 5000,
        batch: BATCHES.includes(Number(options.batch)) ? Number(options.batch) : 64,
        blockSize: BLOCK_SIZES.includes(Number(options.block_size)) ? Number(options.block_size) : 16,
        kvHeads: null,  // null: the model's own
    };
    const kvHeads = () => state.kvHeads ?? MODELS[state.model].kvHeads;

    const modelSelect = select({
        label: "Model", value: state.model,
        choices: Object.entries(MODELS).map(([id, m]) => [id, `${id} (${m.name})`]),
        onChange: (id) => { state.model = id; state.kvHeads = null; fillKvHeads(); render(); },
    });
    // What-if: the same model with more or fewer KV heads (grouped-query
    // attention shares each KV head among heads / kvHeads query heads).
    const kvHeadsSelect = select({
        label: "KV heads", value: kvHeads(), choices: [],
        onChange: (h) => { state.kvHeads = Number(h); render(); },
    });
    function fillKvHeads() {
        const model = MODELS[state.model];
        const divisors = [...Array(model.heads).keys()].map((i) => i + 1).filter((h) => model.heads % h === 0);
        kvHeadsSelect.input.replaceChildren(...divisors.map((h) => {
            const text = h === model.kvHeads ? `${h} (the model's)` : h === model.heads ? `${h} (one per query head)` : String(h);
            const option = html("option", { value: h }, text);
            option.selected = h === kvHeads();
            return option;
        }));
    }
    fillKvHeads();
    const dtypeToggle = toggle({
        label: "Weights and KV dtype", value: state.dtype, choices: [["fp32", "fp32"], ["bf16", "bf16"], ["fp8", "fp8"]],
        onChange: (dtype) => { state.dtype = dtype; render(); },
    });
    const blockSelect = select({
        label: "Block size (tokens)", value: state.blockSize, choices: BLOCK_SIZES.map((b) => [b, String(b)]),
        onChange: (b) => { state.blockSize = Number(b); render(); },
    });
    const contextSlider = listSlider({
        label: "Context length (tokens)", values: CONTEXTS, value: state.context,
        onInput: (context) => { state.context = context; render(); },
    });
    const batchSlider = listSlider({
        label: "Batch (sequences)", values: BATCHES, value: state.batch,
        onInput: (batch) => { state.batch = batch; render(); },
    });

    const formula = html("p", { class: "lk-formula" });
    const numbers = html("dl", { class: "lk-numbers" });
    const memory = drawing(680, 96, "H200 memory: weights, the batch's KV cache and what is left");
    const blocks = drawing(680, 110, "One sequence's KV blocks and the unused slots of its last block");
    const note = html("p", { class: "lk-fig-source" });

    root.append(
        controls(modelSelect.element, kvHeadsSelect.element, dtypeToggle.element, blockSelect.element),
        controls(contextSlider.element, batchSlider.element),
        formula, numbers, scroller(memory), scroller(blocks), note,
    );

    function render() {
        const model = { ...MODELS[state.model], kvHeads: kvHeads() };
        // A model's context cap limits the slider's meaning, not its stops.
        const context = Math.min(state.context, model.maxContext);
        const r = compute(model, DTYPES[state.dtype], context, state.batch, state.blockSize);

        formula.replaceChildren(
            `2 (K and V) × ${model.layers} layers × ${model.kvHeads} KV head${model.kvHeads > 1 ? "s" : ""} × ` +
            `${model.headDim} dims × ${DTYPES[state.dtype]} byte${DTYPES[state.dtype] > 1 ? "s" : ""} = `,
            html("strong", {}, `${formatBytes(r.perToken)} per token`),
            context < state.context ? ` (context capped at the model's ${formatNumber(model.maxContext)})` : "",
            model.kvHeads !== MODELS[state.model].kvHeads
                ? ` (what if: the model has ${MODELS[state.model].kvHeads} KV head${MODELS[state.model].kvHeads > 1 ? "s" : ""} for ${model.heads} query heads)` : "",
        );
        numbers.replaceChildren(
            number("One sequence", formatBytes(r.perSequence),
                   `${formatNumber(r.blocksPerSequence)} blocks of ${state.blockSize} tokens`),
            number("Waste in its last block", `${formatNumber(r.wastedTokens)} token slots`,
                   `${formatBytes(r.wastedTokens * r.perToken)}, ${formatSignificant(100 * r.wastedTokens / (r.blocksPerSequence * state.blockSize))}% of the sequence's cache`),
            number(`The batch of ${formatNumber(state.batch)}`, formatBytes(r.batchBytes),
                   `${formatNumber(r.blocksPerSequence * state.batch)} blocks`),
            number("Weights", formatBytes(r.weightBytes),
                   `${formatSignificant(model.params / 1e9)} billion parameters × ${DTYPES[state.dtype]} byte${DTYPES[state.dtype] > 1 ? "s" : ""}`),
            number("Sequences that fit on an H200", formatNumber(r.fit),
                   r.fit >= state.batch ? `at ${formatNumber(context)} tokens each, beside the weights` : html("span", { class: "lk-over" }, `fewer than the batch of ${formatNumber(state.batch)}`),
                   "lk-number-main"),
        );
        drawMemory(memory, r);
        drawBlocks(blocks, r, state.blockSize, context);
        note.textContent =
            `H200 memory: ${formatNumber(139.8, 1)} GiB; "fit" counts every byte the weights leave (a real engine also keeps ` +
            "activations, CUDA graphs and a safety margin). minfer keeps every layer's K and V for the whole context" +
            (state.model === "gemma3-270m" ? " (Gemma 3's sliding-window layers could keep only their last 512 tokens)." : ".");
    }
    render();
}

// All the calculator's numbers, in bytes and tokens.
function compute(model, bytesPerElement, context, batch, blockSize) {
    const perToken = 2 * model.layers * model.kvHeads * model.headDim * bytesPerElement;
    const blocksPerSequence = Math.ceil(context / blockSize);
    const wastedTokens = blocksPerSequence * blockSize - context;
    const perSequence = blocksPerSequence * blockSize * perToken;  // whole blocks are allocated
    const weightBytes = model.params * bytesPerElement;
    const left = Math.max(0, GPU_BYTES - weightBytes);
    return {
        perToken, blocksPerSequence, wastedTokens, perSequence, weightBytes,
        batchBytes: perSequence * batch,
        fit: Math.floor(left / perSequence),
    };
}

function number(title, value, detail, extraClass = "") {
    return html("div", { class: `lk-number ${extraClass}` }, html("dt", {}, title), html("dd", {}, value, html("small", {}, detail)));
}

// The H200's memory as one bar: weights, the batch's KV cache, what is left
// (or, in red, how far the batch overflows).
function drawMemory(picture, r) {
    const left = 10, right = 670, top = 30, height = 34;
    const total = Math.max(GPU_BYTES, r.weightBytes + r.batchBytes);
    const px = (bytes) => (bytes / total) * (right - left);
    const weightsWidth = px(r.weightBytes);
    const kvFits = Math.min(r.batchBytes, Math.max(0, GPU_BYTES - r.weightBytes));
    const overflow = r.weightBytes + r.batchBytes - GPU_BYTES;
    const parts = [
        svg("text", { x: left, y: 18, class: "lk-section-title" }, `H200 MEMORY, ${formatNumber(139.8, 1)} GiB`),
        svg("rect", { x: left, y: top, width: right - left, height, class: "lk-bar-free" }),
        svg("rect", { x: left, y: top, width: weightsWidth, height, class: "lk-bar-weights" }),
        svg("rect", { x: left + weightsWidth, y: top, width: px(kvFits), height, class: "lk-bar-kv" }),
    ];
    if (overflow > 0) {
        parts.push(svg("rect", { x: left + px(GPU_BYTES), y: top, width: px(overflow), height, class: "lk-bar-over" }),
                   svg("line", { x1: left + px(GPU_BYTES), x2: left + px(GPU_BYTES), y1: top - 6, y2: top + height + 6, class: "lk-limit" }));
    }
    const caption = overflow > 0
        ? `weights ${formatBytes(r.weightBytes)} + KV ${formatBytes(r.batchBytes)}: ${formatBytes(overflow)} more than the GPU has`
        : `weights ${formatBytes(r.weightBytes)} + KV ${formatBytes(r.batchBytes)}, ${formatBytes(GPU_BYTES - r.weightBytes - r.batchBytes)} left`;
    parts.push(svg("text", { x: left, y: top + height + 20, class: overflow > 0 ? "lk-row-warn" : "lk-bar-text" }, caption));
    legend(parts, [["lk-bar-weights", "weights"], ["lk-bar-kv", "KV cache"], ["lk-bar-over", "does not fit"], ["lk-bar-free", "free"]], right, 18);
    picture.replaceChildren(...parts);
}

// One sequence's blocks: full blocks as squares (elided when many), the last
// one opened up into its token slots, used and wasted.
function drawBlocks(picture, r, blockSize, context) {
    const parts = [svg("text", { x: 10, y: 18, class: "lk-section-title" },
        `ONE SEQUENCE: ${formatNumber(context)} TOKENS IN ${formatNumber(r.blocksPerSequence)} BLOCKS OF ${blockSize}`)];
    const top = 30, size = 22, gap = 4;
    const full = r.blocksPerSequence - 1;
    const shown = Math.min(full, 8);
    let x = 10;
    for (let i = 0; i < shown; i += 1) {
        parts.push(svg("rect", { x, y: top, width: size, height: size, class: "lk-block lk-block-full" }));
        x += size + gap;
    }
    if (full > shown) {
        parts.push(svg("text", { x: x + 4, y: top + 16, class: "lk-row-note" }, `… ${formatNumber(full - shown)} more full blocks …`));
        x += 170;
    }
    // The last block: one slot per token, at most 64 wide.
    const used = blockSize - r.wastedTokens;
    const slot = Math.min(12, (670 - x - 8) / blockSize);
    parts.push(svg("rect", { x: x - 2, y: top - 2, width: slot * blockSize + 4, height: size + 4, class: "lk-outline" }));
    for (let t = 0; t < blockSize; t += 1) {
        parts.push(svg("rect", { x: x + t * slot, y: top, width: Math.max(1, slot - 1), height: size,
                                 class: t < used ? "lk-block-full" : "lk-block-tail" }));
    }
    parts.push(svg("text", { x, y: top + size + 20, class: "lk-bar-text" },
        `last block: ${used} of ${blockSize} slots used, ${r.wastedTokens} empty`));
    legend(parts, [["lk-block-full", "slot holding a token's K and V"], ["lk-block-tail", "allocated, unused"]], 670, top + size + 44);
    picture.replaceChildren(...parts);
}

// A legend drawn right-aligned on one line ending at `right`.
function legend(parts, entries, right, y) {
    let x = right;
    for (const [cls, text] of [...entries].reverse()) {
        const width = 7 * text.length + 22;
        x -= width;
        parts.push(svg("rect", { x, y: y - 10, width: 12, height: 12, class: cls }),
                   svg("text", { x: x + 16, y, class: "lk-row-note" }, text));
    }
}
