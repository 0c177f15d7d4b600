// The H200 roofline: attainable FLOP/s against arithmetic intensity on log
// axes, with the ceilings measured on the machine and llama3-8b's measured
// prefill and decode. A slider sets the decode batch size: the weights are
// read once per step whatever the batch, so the intensity grows with it; but
// each sequence reads its own K/V, so the intensity levels off below
// FLOPs / K/V bytes per token, which the context length and the K/V dtype set.
import {
    svg, html, figureRoot, drawing, scroller, listSlider, toggle, controls, logScale,
    formatNumber, formatSignificant, formatTick, loadJSON, showError,
} from "./kit.js";

const WIDTH = 680, HEIGHT = 400;  // user units; the page scales the drawing
const PLOT = { left: 66, right: 650, top: 14, bottom: 344 };
const X_RANGE = [0.1, 1e4];      // FLOP per byte
const Y_RANGE = [0.5, 3000];     // TFLOP/s
const TERA = 1e12;

// Slider stops (roughly logarithmic).
const BATCHES = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048];
const CONTEXTS = [64, 128, 256, 576, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072];

export default function mount(element, options = {}) {
    const root = figureRoot(element, "roofline");
    loadJSON("/figures/data/h200.json")
        .then((data) => build(root, data, options))
        .catch((error) => showError(root, `The roofline's data could not be loaded (${error.message}).`));
}

// One decode step of `batch` sequences at `context` tokens each: FLOPs and
// bytes (the weights once, every sequence's own K/V).
function decodeStep(model, precision, kvDtype, batch, context) {
    const flopPerToken = model.decode_flop_per_token + model.attention_flop_per_context_token * context;
    return {
        flops: batch * flopPerToken,
        weightBytes: model.weight_bytes[precision],
        kvBytes: batch * context * model.kv_bytes_per_token[kvDtype],
        flopPerToken,
        // With a huge batch the weights vanish from the count: attention's own intensity.
        limit: flopPerToken / (context * model.kv_bytes_per_token[kvDtype]),
    };
}

function build(root, data, options) {
    const model = data.model;
    const state = {
        precision: options.precision === "fp8" ? "fp8" : "bf16",
        kvDtype: Object.hasOwn(model.kv_bytes_per_token, options.kv_dtype ?? "") ? options.kv_dtype : model.kv_dtype,
        batch: BATCHES.includes(Number(options.batch)) ? Number(options.batch) : 64,
        context: CONTEXTS.includes(Number(options.context)) ? Number(options.context) : model.bench_context,
    };
    const x = logScale(...X_RANGE, PLOT.left, PLOT.right);
    const y = logScale(...Y_RANGE, PLOT.bottom, PLOT.top);
    const bandwidth = data.ceilings.bandwidth_bytes_per_s;
    const peak = (precision) => data.ceilings[`${precision}_flop_per_s`];
    const roof = (precision, intensity) => Math.min(peak(precision), intensity * bandwidth);

    const picture = drawing(WIDTH, HEIGHT, "Roofline of the H200: attainable FLOP/s against arithmetic intensity");
    drawAxes(picture, x, y);
    const dynamic = svg("g");
    picture.append(dynamic);

    const readout = html("p", { class: "lk-readout", "aria-live": "polite" });
    const batchSlider = listSlider({
        label: "Decode batch size", values: BATCHES, value: state.batch,
        onInput: (batch) => { state.batch = batch; render(); },
    });
    const contextSlider = listSlider({
        label: "Context per sequence (tokens)", values: CONTEXTS, value: state.context,
        onInput: (context) => { state.context = context; render(); },
    });
    const precisionToggle = toggle({
        label: "Weights and GEMMs", choices: [["bf16", "bf16"], ["fp8", "FP8"]], value: state.precision,
        onChange: (precision) => { state.precision = precision; render(); },
    });
    const kvToggle = toggle({
        label: "K/V cache", choices: [["fp32", "fp32"], ["bf16", "bf16 (minfer)"]], value: state.kvDtype,
        onChange: (dtype) => { state.kvDtype = dtype; render(); },
    });
    const legend = html("p", { class: "lk-legend" },
        legendItem("lk-key-roof", "ceiling (the other precision dashed)"),
        legendItem("lk-key-measured", `llama3-8b measured on minfer at ${data.workloads_version} (dotted: gap to its ceiling)`),
        legendItem("lk-key-batch", "decode ceiling at the chosen batch"),
        legendItem("lk-key-limit", "where large batches level off"));
    root.append(controls(precisionToggle.element, kvToggle.element),
                controls(batchSlider.element, contextSlider.element), readout, scroller(picture), legend,
                html("p", { class: "lk-fig-source" }, `Ceilings: ${data.ceilings.source}. Points: ${data.workloads_source}.`));

    function render() {
        dynamic.replaceChildren();
        const other = state.precision === "bf16" ? "fp8" : "bf16";
        drawRoof(dynamic, x, y, bandwidth, peak(other), other, false);
        drawRoof(dynamic, x, y, bandwidth, peak(state.precision), state.precision, true);

        for (const w of data.workloads.filter((w) => w.precision === state.precision)) {
            const point = measuredPoint(model, w);
            drawMeasured(dynamic, x, y, point, roof(w.precision, point.intensity));
        }

        const step = decodeStep(model, state.precision, state.kvDtype, state.batch, state.context);
        const intensity = step.flops / (step.weightBytes + step.kvBytes);
        const attainable = roof(state.precision, intensity);

        // Where the intensity levels off as the batch grows (off the chart for short contexts).
        if (step.limit < X_RANGE[1]) {
            const lx = x(step.limit);
            dynamic.append(
                svg("line", { x1: lx, x2: lx, y1: PLOT.top, y2: PLOT.bottom, class: "lk-limit-line" }),
                svg("text", { x: lx - 5, y: PLOT.top + 16, "text-anchor": "end", class: "lk-limit-label" },
                    `batch → ∞: ${formatSignificant(step.limit)} FLOP/byte`),
            );
        }
        // The slider's point sits on the roof: the best this batch can do.
        const px = x(intensity), py = y(attainable / TERA);
        dynamic.append(
            svg("line", { x1: px, x2: px, y1: PLOT.bottom, y2: py, class: "lk-batch-guide" }),
            svg("path", { d: `M${px} ${py - 8}L${px + 8} ${py}L${px} ${py + 8}L${px - 8} ${py}Z`, class: "lk-batch-point" }),
        );
        readout.textContent = describe(state, step, intensity, attainable, peak(state.precision), bandwidth) +
            (step.weightBytes + step.kvBytes > data.ceilings.memory_bytes
                ? ` (That much K/V does not fit in the H200's ${formatSignificant(data.ceilings.memory_bytes / 2 ** 30)} GiB.)` : "");
    }
    render();
}

// The intensity and achieved rate of one measured workload, at the bench's
// shapes: decode at batch 1 over its average context; prefill of 512 tokens,
// which writes their K/V.
function measuredPoint(model, w) {
    const kv = model.kv_bytes_per_token[model.kv_dtype];
    if (w.kind === "prefill") {
        const tokens = 512;
        return {
            label: w.label,
            intensity: tokens * model.prefill_flop_per_token / (model.weight_bytes[w.precision] + tokens * kv),
            flops: w.tokens_per_s * model.prefill_flop_per_token,
        };
    }
    const step = decodeStep(model, w.precision, model.kv_dtype, 1, model.bench_context);
    return {
        label: w.label,
        intensity: step.flops / (step.weightBytes + step.kvBytes),
        flops: w.tokens_per_s * step.flopPerToken,
    };
}

function describe(state, step, intensity, attainable, peak, bandwidth) {
    const bound = intensity * bandwidth < peak ? "memory-bound" : "compute-bound";
    const tokensPerSecond = state.batch * attainable / step.flops;
    const sequences = state.batch === 1 ? "1 sequence" : `${formatNumber(state.batch)} sequences`;
    return `${sequences} of ${formatNumber(state.context)} tokens: each step reads the ${formatSignificant(step.weightBytes / 1e9)} GB ` +
        `of ${state.precision} weights once and ${formatSignificant(step.kvBytes / 1e9)} GB of ${state.kvDtype} K/V, ` +
        `${formatSignificant(intensity)} FLOP/byte, ${bound}. ` +
        `Ceiling ${formatSignificant(attainable / TERA)} TFLOP/s (${formatSignificant(100 * attainable / peak)}% of peak), ` +
        `at most ${formatNumber(Math.round(tokensPerSecond))} tokens/s in all.`;
}

function drawAxes(picture, x, y) {
    const grid = svg("g", { class: "lk-grid" });
    for (let v = X_RANGE[0]; v <= X_RANGE[1] * 1.001; v *= 10) {
        grid.append(svg("line", { x1: x(v), x2: x(v), y1: PLOT.top, y2: PLOT.bottom }));
        grid.append(svg("text", { x: x(v), y: PLOT.bottom + 18, class: "lk-tick", "text-anchor": "middle" }, formatTick(v)));
    }
    for (let v = 10 ** Math.ceil(Math.log10(Y_RANGE[0])); v <= Y_RANGE[1]; v *= 10) {
        grid.append(svg("line", { x1: PLOT.left, x2: PLOT.right, y1: y(v), y2: y(v) }));
        grid.append(svg("text", { x: PLOT.left - 8, y: y(v) + 4, class: "lk-tick", "text-anchor": "end" }, formatTick(v)));
    }
    grid.append(
        svg("rect", { x: PLOT.left, y: PLOT.top, width: PLOT.right - PLOT.left, height: PLOT.bottom - PLOT.top, class: "lk-frame" }),
        svg("text", { x: (PLOT.left + PLOT.right) / 2, y: HEIGHT - 16, class: "lk-axis-label", "text-anchor": "middle" },
            "arithmetic intensity (FLOP per byte read, log scale)"),
        svg("text", { x: 16, y: (PLOT.top + PLOT.bottom) / 2, class: "lk-axis-label", "text-anchor": "middle",
                      transform: `rotate(-90 16 ${(PLOT.top + PLOT.bottom) / 2})` }, "attainable TFLOP/s (log scale)"),
    );
    picture.append(grid);
}

// One roof: the bandwidth slope up to the ridge, then the flat compute ceiling.
function drawRoof(group, x, y, bandwidth, peak, precision, selected) {
    const ridge = peak / bandwidth;
    const start = Math.max(X_RANGE[0], (Y_RANGE[0] * TERA) / bandwidth);
    const points = [[start, start * bandwidth], [ridge, peak], [X_RANGE[1], peak]];
    const d = points.map(([i, f], k) => `${k ? "L" : "M"}${x(i).toFixed(1)} ${y(f / TERA).toFixed(1)}`).join("");
    group.append(svg("path", { d, class: selected ? "lk-roof" : "lk-roof lk-roof-other" }));
    const name = `${precision === "fp8" ? "FP8" : "bf16"} GEMM ${formatNumber(peak / TERA)} TFLOP/s`;
    group.append(svg("text", { x: PLOT.right - 6, y: y(peak / TERA) - 7, "text-anchor": "end",
                               class: selected ? "lk-roof-label" : "lk-roof-label lk-roof-label-other" }, name));
    if (!selected) return;

    group.append(
        svg("circle", { cx: x(ridge), cy: y(peak / TERA), r: 4, class: "lk-ridge" }),
        // Left of the point, above the slope: right of it, under the roof, is where prefill lands.
        svg("text", { x: x(ridge) - 12, y: y(peak / TERA) + 4, "text-anchor": "end", class: "lk-roof-label" },
            `ridge: ${formatSignificant(ridge)} FLOP/byte`),
    );
    // The bandwidth label runs along the slope, just above it.
    const at = 3;  // FLOP/byte
    const angle = Math.atan2(y(at * 10 * bandwidth / TERA) - y(at * bandwidth / TERA), x(at * 10) - x(at)) * 180 / Math.PI;
    group.append(svg("text", { x: 0, y: -7, class: "lk-roof-label",
                               transform: `translate(${x(at).toFixed(1)} ${y(at * bandwidth / TERA).toFixed(1)}) rotate(${angle.toFixed(1)})` },
        `copy bandwidth ${bandwidth / TERA} TB/s`));
}

// A measured workload: a dot, a dotted line up to its ceiling, and its label
// on the right (three short lines: there is little room right of prefill).
function drawMeasured(group, x, y, point, ceiling) {
    const cx = x(point.intensity), cy = y(point.flops / TERA);
    const share = formatSignificant(100 * point.flops / ceiling);
    group.append(
        svg("line", { x1: cx, x2: cx, y1: cy, y2: y(ceiling / TERA), class: "lk-gap" }),
        svg("circle", { cx, cy, r: 5, class: "lk-measured" }),
        svg("text", { x: cx + 10, y: cy + 4, class: "lk-point-label" }, point.label),
        svg("text", { x: cx + 10, y: cy + 19, class: "lk-point-note" }, `${formatSignificant(point.flops / TERA)} TFLOP/s,`),
        svg("text", { x: cx + 10, y: cy + 33, class: "lk-point-note" }, `${share}% of its ceiling`),
    );
}

function legendItem(kind, text) {
    return html("span", { class: "lk-legend-item" }, html("span", { class: `lk-swatch ${kind}`, "aria-hidden": "true" }), text);
}
