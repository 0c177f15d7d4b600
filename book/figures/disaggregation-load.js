// Colocated against disaggregated serving as the load's share of long
// prompts grows: the same requests on the same cores, once as one instance,
// once as a prefill and a decode instance of half the cores each behind
// `minfer router` (scripts/disagg_bench.py, which writes the data).
//
// A long prompt's prefill shares the colocated instance's steps with every
// running decode, so the decodes' time per output token (TPOT) grows with the
// share of long prompts; the split decode instance never runs a prefill, but
// has half the cores, and every request pays the KV transfer in its time to
// first token (TTFT). The figure plots one metric for both setups.
import { svg, html, figureRoot, drawing, scroller, select, toggle, controls, formatNumber, linearScale, loadJSON, showError,
         PALETTE } from "./kit.js";

const METRICS = {
    tpot_p99_ms: { label: "TPOT p99 (decode-heavy requests)", unit: "ms" },
    tpot_p50_ms: { label: "TPOT p50 (decode-heavy requests)", unit: "ms" },
    ttft_p99_ms: { label: "TTFT p99", unit: "ms" },
    ttft_p50_ms: { label: "TTFT p50", unit: "ms" },
    goodput_req_s: { label: "Goodput (requests/s meeting both objectives)", unit: "req/s" },
};
const SETUPS = { colocated: { name: "colocated: one instance", color: PALETTE[0] },
                 split: { name: "1 prefill + 1 decode behind the router", color: PALETTE[1] } };
const WIDTH = 640, HEIGHT = 300;
const PLOT = { left: 70, right: 600, top: 20, bottom: 250 };

export default function mount(element, options = {}) {
    const root = figureRoot(element, "disaggregation-load");
    loadJSON("/figures/data/disaggregation-cpu.json")
        .then((data) => build(root, data, options))
        .catch((error) => showError(root, `The measurements could not be loaded (${error.message}).`));
}

function build(root, data, options) {
    const rows = data.rows ?? [];
    const shares = [...new Set(rows.map((r) => r.long_share))].sort((a, b) => a - b);
    let metric = METRICS[options.metric] ? options.metric : "tpot_p99_ms";
    const picture = drawing(WIDTH, HEIGHT, "Colocated and disaggregated serving against the share of long prompts");
    const readout = html("p", { class: "lk-readout", "aria-live": "polite" });
    const chooser = select({
        label: "Metric",
        choices: Object.entries(METRICS).map(([id, m]) => [id, m.label]),
        value: metric,
        onChange: (v) => { metric = v; render(); },
    });
    let at = shares.includes(Number(options.share)) ? Number(options.share) : shares[shares.length - 1];
    const shareToggle = toggle({
        label: "Long prompts",
        choices: shares.map((s) => [String(s), `${formatNumber(s * 100)}%`]),
        value: String(at),
        onChange: (v) => { at = Number(v); render(); },
    });
    const load = data.load ?? {};
    const note = html("p", { class: "lk-fig-source" },
        `${data.machine ?? ""}, ${data.model ?? ""}, ${data.date ?? ""}: ${load.num_prompts} requests at `,
        `${load.rate}/s (Poisson); long prompts ${load.long_input} tokens in, ${load.long_output} out; the others `,
        `${load.short_input} in, ${load.short_output} out. Colocated: one instance of ${load.cores} threads; `,
        `split: ${Math.max(1, Math.floor(load.cores / 2))} thread(s) each. Goodput: TTFT ≤ ${load.slo_ttft} ms and `,
        `TPOT ≤ ${load.slo_tpot} ms. Command: `, html("code", {}, data.command ?? ""));
    root.append(controls(chooser.element, shareToggle.element), readout, scroller(picture), legend(), note);

    function value(setup, share) {
        return rows.find((r) => r.mode === setup && r.long_share === share)?.[metric];
    }

    function render() {
        const values = rows.map((r) => r[metric]).filter((v) => Number.isFinite(v));
        const top = Math.max(...values, 1e-9) * 1.15;
        const x = linearScale(shares[0], shares[shares.length - 1] || 1, PLOT.left + 40, PLOT.right - 40);
        const y = linearScale(0, top, PLOT.bottom, PLOT.top);
        picture.replaceChildren();
        const grid = svg("g", { class: "lk-grid" });
        picture.append(grid);
        for (let i = 0; i <= 4; i++) {
            const v = (top / 4) * i;
            grid.append(svg("line", { x1: PLOT.left, x2: PLOT.right, y1: y(v), y2: y(v) }));
            picture.append(
                svg("text", { x: PLOT.left - 8, y: y(v) + 4, "text-anchor": "end", class: "lk-tick" },
                    formatNumber(v, v < 10 ? 1 : 0)));
        }
        for (const s of shares)
            picture.append(svg("text", { x: x(s), y: PLOT.bottom + 20, "text-anchor": "middle", class: "lk-tick" },
                               `${formatNumber(s * 100)}%`));
        picture.append(
            svg("text", { x: (PLOT.left + PLOT.right) / 2, y: HEIGHT - 6, "text-anchor": "middle", class: "lk-axis-label" },
                "share of requests with a long prompt"),
            svg("text", { x: 14, y: (PLOT.top + PLOT.bottom) / 2, "text-anchor": "middle", class: "lk-axis-label",
                          transform: `rotate(-90 14 ${(PLOT.top + PLOT.bottom) / 2})` }, METRICS[metric].unit));
        for (const [setup, style] of Object.entries(SETUPS)) {
            const pts = shares.map((s) => [s, value(setup, s)]).filter(([, v]) => Number.isFinite(v));
            picture.append(svg("polyline", { points: pts.map(([s, v]) => `${x(s)},${y(v)}`).join(" "), fill: "none",
                                             stroke: style.color, "stroke-width": 2.5 }));
            for (const [s, v] of pts) {
                const dot = svg("circle", { cx: x(s), cy: y(v), r: 5, fill: style.color });
                dot.append(svg("title", {}, `${style.name}, ${formatNumber(s * 100)}% long prompts: ` +
                                            `${formatNumber(v, 2)} ${METRICS[metric].unit}`));
                picture.append(dot, svg("text", { x: x(s) + 8, y: y(v) - 8, "font-size": 12, fill: style.color },
                                        formatNumber(v, v < 100 ? 1 : 0)));
            }
        }
        const last = at;
        const split = rows.find((r) => r.mode === "split" && r.long_share === last);
        const transfer = split && Number.isFinite(split.kv_transfer_mean_ms)
            ? ` The KV transfer took ${formatNumber(split.kv_transfer_mean_ms, 1)} ms a request on average ` +
              `(${formatNumber(split.kv_bytes_per_request / 1e6, 1)} MB), ` +
              `${formatNumber(100 * split.kv_transfer_mean_ms / split.ttft_p50_ms)}% of the median TTFT.` : "";
        readout.textContent = `At ${formatNumber(last * 100)}% long prompts: colocated ` +
            `${formatNumber(value("colocated", last) ?? NaN, 1)}, split ${formatNumber(value("split", last) ?? NaN, 1)} ` +
            `${METRICS[metric].unit} (${METRICS[metric].label}).${transfer}`;
    }

    function legend() {
        return html("p", { class: "lk-legend" }, ...Object.values(SETUPS).map((s) =>
            html("span", { class: "lk-legend-item" }, html("span", { class: "lk-swatch", style: `background:${s.color}` }),
                 s.name)));
    }

    render();
}
