// Tensor parallelism's price: what the all-reduces of one step cost beside
// what each GPU saves in weight reads and memory, for 1, 2, 4 and 8 ranks.
//
// minfer's splits (Megatron's, and a vocabulary-parallel embedding) all-reduce
// 2 L + 1 buffers of T x d activations a step (after each attention block and
// each FFN, and after the embedding). A ring all-reduce of n ranks sends
// 2 (n - 1) / n of the buffer from every rank, so a step costs
//
//   (2 L + 1) x (alpha + 2 (n - 1) / n x T x d x bytes / link bandwidth)
//
// alpha being one all-reduce's fixed latency. A decode step also reads each
// rank's share of the weights, P x bytes per weight / n, at HBM speed.
import {
    svg, html, figureRoot, drawing, scroller, listSlider, select, toggle, controls,
    formatNumber, formatBytes, formatSignificant,
} from "./kit.js";

// The shapes of engine/gguf/synth.cpp's presets (`minfer synth --list`;
// parameters as `minfer inspect` counts them). A MoE model's experts are split
// whole among the ranks (expert parallelism): its all-reduces are the same.
const MODELS = {
    "llama3-8b": { name: "Llama 3.1 8B", dim: 4096, layers: 32, params: 8.0305e9 },
    "llama3-70b": { name: "Llama 3.1 70B", dim: 8192, layers: 80, params: 70.554e9 },
    "qwen3moe-30b-a3b": { name: "Qwen3 30B-A3B (MoE)", dim: 2048, layers: 48, params: 30.532e9,
                          expertParams: 28.991e9, experts: 128, used: 8 },
};
// Bytes a weight takes.
const WEIGHTS = { bf16: 2, fp8: 1, q4_k_m: 0.6 };
// Links between the GPUs of a run: bandwidth in GB/s in one direction (the
// vendors' figures) and an all-reduce's fixed cost in µs (estimated: NCCL's
// small-message latency is a few microseconds a hop).
const LINKS = {
    nvlink: { name: "NVLink 4 (H100/H200 SXM)", gbps: 450, alpha: 8 },
    pcie5: { name: "PCIe 5 x16", gbps: 64, alpha: 15 },
    ib: { name: "InfiniBand NDR, 400 Gb/s", gbps: 50, alpha: 20 },
    pcie4: { name: "PCIe 4 x16", gbps: 32, alpha: 15 },
};
const HBM_TBPS = 4.19;                 // one H200's copy bandwidth, as `bench latency` assumes
const GPU_BYTES = 139.8 * 2 ** 30;     // one H200's memory as CUDA reports it
const RANKS = [1, 2, 4, 8];
const TOKENS = [1, 8, 32, 64, 128, 256, 512, 2048, 8192];

const WIDTH = 680, HEIGHT = 300;
const PLOT = { left: 70, right: 500, top: 20, bottom: 250 };  // the values right of the bars

// Everything one step costs each rank at n ranks.
export function stepCosts(model, n, tokens, weightBytes, actBytes, link) {
    const m = MODELS[model], l = LINKS[link];
    const reduces = 2 * m.layers + 1;
    const buffer = tokens * m.dim * actBytes;
    const sent = n > 1 ? reduces * 2 * (n - 1) / n * buffer : 0;
    const commUs = n > 1 ? reduces * l.alpha + sent / (l.gbps * 1e9) * 1e6 : 0;
    // A decode step reads the weights it uses: a MoE model's experts only as
    // the batch's rows reach them (1 - (1 - k/E)^T of them, on average).
    let read = m.params;
    if (m.experts) read = m.params - m.expertParams + m.expertParams * (1 - (1 - m.used / m.experts) ** tokens);
    const readUs = read * weightBytes / n / (HBM_TBPS * 1e12) * 1e6;
    const memory = m.params * weightBytes / n;
    return { reduces, buffer, sent, commUs, latencyUs: n > 1 ? reduces * l.alpha : 0, readUs, memory };
}

function option(value, allowed, fallback) {
    return allowed.includes(value) ? value : fallback;
}

export default function mount(element, options = {}) {
    const root = figureRoot(element, "parallel-communication");
    const state = {
        model: option(options.preset, Object.keys(MODELS), "llama3-8b"),
        ranks: option(Number(options.ranks), RANKS, 4),
        link: option(options.link, Object.keys(LINKS), "nvlink"),
        tokens: option(Number(options.tokens), TOKENS, 1),
        weights: option(options.weights, Object.keys(WEIGHTS), "bf16"),
        act: option(options.allreduce, ["fp32", "bf16"], "fp32"),
    };
    const modelSelect = select({
        label: "Model", value: state.model,
        choices: Object.entries(MODELS).map(([id, m]) => [id, `${id} (${m.name})`]),
        onChange: (v) => { state.model = v; render(); },
    });
    const linkSelect = select({
        label: "Link between GPUs", value: state.link,
        choices: Object.entries(LINKS).map(([id, l]) => [id, `${l.name}: ${l.gbps} GB/s`]),
        onChange: (v) => { state.link = v; render(); },
    });
    const ranksSlider = listSlider({ label: "Ranks (-tp)", values: RANKS, value: state.ranks,
                                     onInput: (v) => { state.ranks = v; render(); } });
    const tokensSlider = listSlider({ label: "Tokens in the step", values: TOKENS, value: state.tokens,
                                      onInput: (v) => { state.tokens = v; render(); } });
    const weightsToggle = toggle({ label: "Weights", value: state.weights,
                                   choices: [["bf16", "bf16"], ["fp8", "fp8"], ["q4_k_m", "Q4_K_M"]],
                                   onChange: (v) => { state.weights = v; render(); } });
    const actToggle = toggle({ label: "All-reduced activations", value: state.act,
                               choices: [["fp32", "fp32 (minfer)"], ["bf16", "bf16"]],
                               onChange: (v) => { state.act = v; render(); } });
    const readout = html("p", { class: "lk-readout", "aria-live": "polite" });
    const picture = drawing(WIDTH, HEIGHT, "A step's weight reads and all-reduces per GPU at 1, 2, 4 and 8 ranks");
    const key = (cls, text) => html("span", { class: "lk-legend-item" }, html("span", { class: `lk-swatch ${cls}` }), text);
    const legend = html("p", { class: "lk-legend" }, key("lk-pc-read-swatch", "reading this GPU's weights (HBM)"),
                        key("lk-pc-bytes-swatch", "all-reduces: bytes over the link"),
                        key("lk-pc-latency-swatch", "all-reduces: fixed latency"));
    const note = html("p", { class: "lk-fig-source" },
        "A step all-reduces 2L + 1 buffers of T × d activations (after each attention block and FFN, and after the ",
        "vocabulary-parallel embedding); a ring all-reduce sends 2(n − 1)/n of a buffer from each rank. ",
        `Weight reads at ${HBM_TBPS} TB/s (one H200); links at the vendors' bandwidth in one direction; `,
        "each all-reduce's fixed latency is estimated (8 µs on NVLink), not measured here. A MoE model's experts ",
        "are read as the batch reaches them, 1 − (1 − k/E)^T of them.");
    root.append(controls(modelSelect.element, linkSelect.element), controls(ranksSlider.element, tokensSlider.element),
                controls(weightsToggle.element, actToggle.element), readout, scroller(picture), legend, note);

    function render() {
        const actBytes = state.act === "fp32" ? 4 : 2, wb = WEIGHTS[state.weights];
        const costs = RANKS.map((n) => stepCosts(state.model, n, state.tokens, wb, actBytes, state.link));
        const c = costs[RANKS.indexOf(state.ranks)];
        const share = c.commUs / (c.commUs + c.readUs);
        const fits = c.memory <= GPU_BYTES;
        readout.replaceChildren(
            `At ${state.ranks} rank${state.ranks > 1 ? "s" : ""}, each GPU holds `,
            html("strong", {}, formatBytes(c.memory)), ` of weights${fits ? "" : " (more than an H200 has)"}`,
            state.ranks > 1
                ? ` and all-reduces ${c.reduces} buffers of ${formatBytes(c.buffer)} a step, sending `
                : ". With one rank nothing is all-reduced.",
            ...(state.ranks > 1 ? [
                html("strong", {}, formatBytes(c.sent)),
                `: ${formatSignificant(c.commUs)} µs (${formatSignificant(c.latencyUs)} µs of it latency) beside `,
                `${formatSignificant(c.readUs)} µs of weight reads, `,
                html("strong", {}, `${formatNumber(100 * share)}% of the step`), ".",
            ] : []));

        picture.replaceChildren();
        const top = Math.max(...costs.map((k) => k.readUs + k.commUs));
        const x = (v) => PLOT.left + v / top * (PLOT.right - PLOT.left);
        const band = (PLOT.bottom - PLOT.top) / RANKS.length;
        picture.append(svg("text", { x: PLOT.left, y: PLOT.top - 6, class: "lk-axis-label" },
                           "µs a step, per GPU (decode-bound by weights and links)"));
        costs.forEach((k, i) => {
            const n = RANKS[i], y = PLOT.top + i * band + band * 0.2, h = band * 0.6;
            const current = n === state.ranks;
            const g = svg("g", { class: current ? "lk-pc-row lk-pc-current" : "lk-pc-row", "data-ranks": n });
            g.append(svg("text", { x: PLOT.left - 8, y: y + h / 2 + 4, "text-anchor": "end", class: "lk-pc-label" },
                         `-tp ${n}`));
            const latency = k.latencyUs, bytes = k.commUs - k.latencyUs;
            let at = 0;
            for (const [value, cls] of [[k.readUs, "lk-pc-read"], [bytes, "lk-pc-bytes"], [latency, "lk-pc-latency"]]) {
                if (value <= 0) continue;
                g.append(svg("rect", { x: x(at), y, width: Math.max(0.5, x(at + value) - x(at)), height: h, class: cls }));
                at += value;
            }
            const memory = k.memory <= GPU_BYTES ? formatBytes(k.memory) : `${formatBytes(k.memory)}: does not fit`;
            g.append(svg("text", { x: x(at) + 6, y: y + h / 2 + 4, class: "lk-pc-value" },
                         `${formatSignificant(at)} µs · ${memory}`));
            picture.append(g);
        });
        picture.append(svg("line", { x1: PLOT.left, x2: PLOT.left, y1: PLOT.top, y2: PLOT.bottom, class: "lk-frame" }));
    }
    render();
}
