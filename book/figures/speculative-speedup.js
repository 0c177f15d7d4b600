// Speculative decoding's expected speedup against the acceptance rate α
// (Leviathan et al. 2023): each of k drafts is accepted independently with
// probability α, so a verification step yields
//
//   E(α, k) = (1 − α^(k+1)) / (1 − α) tokens   (k + 1 when α = 1),
//
// and costs (1 + c·k)(1 + v·k) plain decode steps, c being the proposer's cost
// per draft and v the extra cost of each verification row, both relative to
// one decode step of the target. S = E / ((1 + c·k)(1 + v·k)). The speedups
// minfer measured are drawn on top (data/spec-measured.json).
import {
    svg, html, figureRoot, drawing, scroller, slider, controls, linearScale,
    formatNumber, loadJSON, showError,
} from "./kit.js";

const WIDTH = 680, HEIGHT = 420;  // user units; the page scales the drawing
const PLOT = { left: 56, right: 618, top: 16, bottom: 364 };
const COMPARE = [1, 2, 4, 8];     // the fainter curves
const K_MAX = 16;
const SAMPLES = 200;              // points per curve
let mounted = 0;                  // each mount's clip path has an id of its own

// Tokens a verification step yields with k drafts each accepted with probability alpha.
function expectedTokens(alpha, k) {
    return alpha >= 1 ? k + 1 : (1 - alpha ** (k + 1)) / (1 - alpha);
}

// A verification step's cost in plain decode steps.
function stepCost(k, cost, verify) {
    return (1 + cost * k) * (1 + verify * k);
}

function speedup(alpha, k, cost, verify) {
    return expectedTokens(alpha, k) / stepCost(k, cost, verify);
}

// A number from the figure block's options, within [lo, hi] and on the slider's
// step; the default when it is missing or not a number.
function option(value, lo, hi, step, fallback) {
    const v = Number(value);
    if (value === undefined || value === "" || !Number.isFinite(v)) return fallback;
    return Math.min(hi, Math.max(lo, Number((Math.round(v / step) * step).toFixed(2))));
}

const two = (v) => v.toFixed(2);

export default function mount(element, options = {}) {
    const root = figureRoot(element, "speculative-speedup");
    loadJSON("/figures/data/spec-measured.json")
        .then((data) => build(root, data, options))
        .catch((error) => showError(root, `The measured speedups could not be loaded (${error.message}).`));
}

function build(root, data, options) {
    const state = {
        k: option(options.k, 1, K_MAX, 1, 4),
        alpha: option(options.alpha, 0, 1, 0.01, 0.6),
        cost: option(options.cost, 0, 0.5, 0.01, 0),
        verify: option(options.verify, 0, 0.3, 0.01, 0),
    };
    const which = options.points === "cpu" ? "cpu" : "all";
    const points = (data.points ?? []).filter((p) => which === "all" || String(p.machine ?? "").startsWith("CPU"));
    const date = (data.source ?? "").match(/\d{4}-\d{2}-\d{2}/)?.[0];
    mounted += 1;
    const clipId = `lk-spec-clip-${mounted}`;

    const picture = drawing(WIDTH, HEIGHT, "Expected speedup of speculative decoding against the acceptance rate, with measured points");
    const readout = html("p", { class: "lk-readout", "aria-live": "polite" });
    const sliders = {
        k: slider({ label: "Drafts per step k", min: 1, max: K_MAX, step: 1, value: state.k,
                    onInput: (v) => { state.k = v; render(); } }),
        alpha: slider({ label: "Acceptance rate α", min: 0, max: 1, step: 0.01, value: state.alpha, show: two,
                        onInput: (v) => { state.alpha = v; render(); } }),
        cost: slider({ label: "Proposer cost per draft c", min: 0, max: 0.5, step: 0.01, value: state.cost, show: two,
                       onInput: (v) => { state.cost = v; render(); } }),
        verify: slider({ label: "Cost of a verification row v", min: 0, max: 0.3, step: 0.01, value: state.verify, show: two,
                         onInput: (v) => { state.verify = v; render(); } }),
    };
    const legend = html("p", { class: "lk-legend" },
        legendItem("lk-spec-key-current", "the chosen k"),
        legendItem("lk-spec-key-compare", `k = ${COMPARE.join(", ")}`),
        legendItem("lk-spec-key-point", "measured, the chosen k"),
        legendItem("lk-spec-key-point-other", "measured, another k"),
        legendItem("lk-spec-key-marker", "the chosen α"));
    const note = html("p", { class: "lk-fig-source lk-spec-note" },
        "E(α, k) = (1 − α", html("sup", {}, "k+1"), ") / (1 − α) tokens per verification step (k + 1 when α = 1); ",
        "a step costs (1 + c·k)(1 + v·k) decode steps; expected speedup S = E / ((1 + c·k)(1 + v·k)) ",
        "(Leviathan et al. 2023). c is 0 for n-gram lookup and about 0.05 to 0.3 for a draft model; ",
        "v is near 0 on a GPU at batch 1, where decode is memory-bound, and larger on the CPU. ",
        "Dots: ", data.source ?? "measured", " (hover a dot for its machine, model and command). ",
        "Their α is vLLM's acceptance rate, accepted / draft tokens, which is not exactly the α of the ",
        "independent model, so a dot need not lie on a curve; its mean acceptance length is E directly.");
    root.append(controls(sliders.k.element, sliders.alpha.element), controls(sliders.cost.element, sliders.verify.element),
                readout, scroller(picture), legend, note);

    function render() {
        const { k, alpha, cost, verify } = state;
        const top = Math.max(2, speedup(1, k, cost, verify), ...points.map((p) => p.speedup));
        const step = [0.5, 1, 2, 5, 10].find((s) => top / s <= 9) ?? 10;
        const yMax = Math.ceil(top / step - 1e-9) * step;
        const x = linearScale(0, 1, PLOT.left, PLOT.right);
        const y = linearScale(0, yMax, PLOT.bottom, PLOT.top);

        picture.replaceChildren();
        drawAxes(picture, x, y, yMax, step);
        const clip = svg("clipPath", { id: clipId });
        clip.append(svg("rect", { x: PLOT.left, y: PLOT.top, width: PLOT.right - PLOT.left, height: PLOT.bottom - PLOT.top }));
        const defs = svg("defs");
        defs.append(clip);
        picture.append(defs);

        // y = 1: speculation that does not pay.
        picture.append(
            svg("line", { x1: PLOT.left, x2: PLOT.right, y1: y(1), y2: y(1), class: "lk-spec-one" }),
            svg("text", { x: PLOT.right - 6, y: y(1) + 15, "text-anchor": "end", class: "lk-spec-one-label" }, "no speedup"),
        );

        // Curves: the comparison ks faint, the chosen one on top; labels right of
        // the plot, or along its top where a curve leaves through it.
        const curves = svg("g", { "clip-path": `url(#${clipId})` });
        picture.append(curves);
        const ends = [];
        const nearCurves = [];  // boxes along the curves: labels had better miss them
        for (const kk of [...COMPARE.filter((c) => c !== k), k]) {
            const current = kk === k;
            const pts = [];
            for (let i = 0; i <= SAMPLES; i++) {
                const a = i / SAMPLES, v = speedup(a, kk, cost, verify);
                pts.push([x(a), y(Math.min(v, yMax * 1.05))]);
                if (i % 4 === 0) nearCurves.push(box(x(a) - 3, y(v) - 3, 6, 6));
            }
            curves.append(svg("path", {
                d: pts.map(([px, py], i) => `${i ? "L" : "M"}${px.toFixed(1)} ${py.toFixed(1)}`).join(""),
                class: current ? "lk-spec-curve" : "lk-spec-curve lk-spec-curve-other",
                "data-k": kk,
            }));
            const end = speedup(1, kk, cost, verify);
            if (end <= yMax * 1.001) ends.push({ y: y(end), text: `k = ${kk}`, current });
            else {
                let a = 1;
                while (a > 0 && speedup(a, kk, cost, verify) > yMax) a -= 0.002;
                ends.push({ y: PLOT.top + 10, x: x(a) - 4, text: `k = ${kk}`, current, inside: true });
            }
        }
        const fixed = drawCurveLabels(picture, ends);

        // The chosen α: a marker line, the point on the chosen curve, and E and S
        // at the bottom or the top of the line, wherever they hide nothing.
        const e = expectedTokens(alpha, k), s = speedup(alpha, k, cost, verify);
        const mx = x(alpha), my = y(s);
        const label = `α = ${two(alpha)}: E = ${two(e)}, S = ${two(s)}×`;
        const width = label.length * 7.2;
        const spots = [];
        for (const ty of [PLOT.bottom - 9, PLOT.top + 18])
            for (const side of alpha <= 0.62 ? [1, -1] : [-1, 1])
                spots.push({ ty, side, box: box(side > 0 ? mx + 6 : mx - 6 - width, ty - 14, width, 18) });
        const fits = (spot, extra) => spot.box.x0 >= PLOT.left + 2 && spot.box.x1 <= PLOT.right - 2 &&
            !overlaps(spot.box, box(mx - 10, my - 10, 20, 20)) && ![...fixed, ...extra].some((t) => overlaps(spot.box, t));
        const spot = spots.find((t) => fits(t, nearCurves)) ?? spots.find((t) => fits(t, [])) ?? spots[0];
        picture.append(
            svg("line", { x1: mx, x2: mx, y1: PLOT.top, y2: PLOT.bottom, class: "lk-spec-marker" }),
            svg("circle", { cx: mx, cy: my, r: 5.5, class: "lk-spec-marker-point" }),
            svg("text", { x: mx + spot.side * 8, y: spot.ty, "text-anchor": spot.side > 0 ? "start" : "end",
                          class: "lk-spec-marker-label" }, label),
        );
        fixed.push(spot.box, box(mx - 6, my - 6, 12, 12), box(PLOT.right - 80, y(1) + 3, 76, 16));

        drawPoints(picture, x, y, k, fixed, nearCurves);

        const costText = `(1 + ${two(cost)} × ${k})(1 + ${two(verify)} × ${k}) = ${two(stepCost(k, cost, verify))}`;
        let best = 1;
        for (let kk = 2; kk <= K_MAX; kk++) if (speedup(alpha, kk, cost, verify) > speedup(alpha, best, cost, verify) + 1e-12) best = kk;
        readout.textContent =
            `k = ${k} drafts, each accepted with probability α = ${two(alpha)}: a verification step yields E = ${two(e)} tokens ` +
            `and costs ${costText} decode steps, so S = ${two(s)}× ` +
            (s < 0.995 ? "(slower than plain decoding). " : "the tokens per second of plain decoding. ") +
            `Of k = 1 to ${K_MAX}, k = ${best} does best at this α, c and v (${two(speedup(alpha, best, cost, verify))}×).`;
    }

    // The measured points: a dot at (acceptance rate, speedup), its label placed
    // where it hides nothing, and a tooltip with where it comes from.
    function drawPoints(picture, x, y, k, fixed, obstacles) {
        const group = svg("g", { class: "lk-spec-points" });
        picture.append(group);
        const dots = points.map((p) => ({
            p, cx: x(p.acceptance_rate), cy: y(p.speedup),
            text: p.label ?? `${p.method} k=${p.k}, batch ${p.batch}`,
        }));
        const taken = [...fixed, ...dots.map((d) => box(d.cx - 6, d.cy - 6, 12, 12))];
        for (const cluster of clusters(dots)) taken.push(...placeLabels(cluster, taken, obstacles));
        for (const d of dots) {
            const p = d.p;
            const g = svg("g", { class: p.k === k ? "lk-spec-point lk-spec-point-current" : "lk-spec-point", "data-label": d.text });
            g.append(svg("title", {},
                `${d.text}: ${p.machine}, ${p.model}, batch ${p.batch}\n` +
                `acceptance rate ${p.acceptance_rate}, mean acceptance length ${p.mean_acceptance_length}, speedup ${p.speedup}×\n` +
                `${p.command}${p.date ?? date ? `\n${p.date ?? date}` : ""}`));
            if (d.leader) g.append(svg("line", { x1: d.cx, y1: d.cy, x2: d.leader[0], y2: d.leader[1], class: "lk-spec-leader" }));
            g.append(
                svg("circle", { cx: d.cx, cy: d.cy, r: 5, class: "lk-spec-dot" }),
                svg("text", { x: d.lx, y: d.ly, "text-anchor": d.anchor, class: "lk-spec-point-label" }, d.text),
            );
            group.append(g);
        }
    }

    render();
}

function box(x, y, w, h) {
    return { x0: x, y0: y, x1: x + w, y1: y + h };
}

function overlaps(a, b) {
    return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

// Dots at (nearly) the same α, top to bottom: their labels go in one column.
function clusters(dots) {
    const out = [];
    for (const d of [...dots].sort((a, b) => a.cx - b.cx)) {
        const last = out.at(-1);
        if (last && d.cx - last.at(-1).cx < 8) last.push(d);
        else out.push([d]);
    }
    return out.map((c) => c.sort((a, b) => a.cy - b.cy));
}

// A column of labels beside its dots, in their order: right or left of them,
// shifted up or down (with leader lines) as little as it takes to stay inside
// the plot and cover no dot or other label. Sets each dot's lx, ly, anchor and
// leader; returns the labels' boxes.
function placeLabels(cluster, taken, soft) {
    const row = 15, height = 14;
    const middle = cluster.reduce((sum, d) => sum + d.cy, 0) / cluster.length;
    const inside = (b) => b.x0 >= PLOT.left + 2 && b.x1 <= PLOT.right - 2 && b.y0 >= PLOT.top + 2 && b.y1 <= PLOT.bottom - 2;
    const candidates = [];
    for (const shift of [0, -1, 1, -2, 2, -3, 3, -4, 4, -5, 5, -6, 6, -8, 8]) {
        for (const side of [1, -1]) {
            const edge = side > 0 ? Math.max(...cluster.map((d) => d.cx)) + 9 : Math.min(...cluster.map((d) => d.cx)) - 9;
            candidates.push({ side, edge, shift, labels: cluster.map((d, i) => {
                const cy = cluster.length === 1 ? d.cy + shift * row : middle + (i - (cluster.length - 1) / 2) * row + shift * row;
                const width = d.text.length * 6.4 + 4;
                return { cy, box: box(side > 0 ? edge : edge - width, cy - height / 2 - 1, width, height) };
            }) });
        }
    }
    // Among the spots that cover no dot or label, the nearest, a label crossing a
    // curve counting as one row further.
    const free = (c) => c.labels.every(({ box: b }) => inside(b) && !taken.some((t) => overlaps(b, t)));
    const score = (c) => Math.abs(c.shift) + (c.side < 0 ? 0.25 : 0) +
        c.labels.filter(({ box: b }) => soft.some((t) => overlaps(b, t))).length;
    const chosen = candidates.filter(free).sort((a, b) => score(a) - score(b))[0] ?? candidates[0];
    cluster.forEach((d, i) => {
        const { cy } = chosen.labels[i];
        d.lx = chosen.edge;
        d.ly = cy + 4;
        d.anchor = chosen.side > 0 ? "start" : "end";
        d.leader = Math.abs(cy - d.cy) < 3 ? null : [chosen.edge - chosen.side * 2, cy];
    });
    return chosen.labels.map((l) => l.box);
}

// Curve names right of the plot, pushed apart where the curves end close
// together, or along its top; returns the boxes of those inside the plot.
function drawCurveLabels(picture, ends) {
    const outside = ends.filter((e) => !e.inside).sort((a, b) => a.y - b.y);
    for (let i = 1; i < outside.length; i++) outside[i].y = Math.max(outside[i].y, outside[i - 1].y + 14);
    const boxes = [];
    for (const e of ends.filter((e) => e.inside).sort((a, b) => a.x - b.x)) {
        const width = e.text.length * 7;
        while (boxes.some((b) => overlaps(b, box(e.x - width, e.y - 9, width, 14)))) e.y += 14;
        boxes.push(box(e.x - width, e.y - 9, width, 14));
    }
    for (const e of ends) {
        picture.append(svg("text", {
            x: e.inside ? e.x : PLOT.right + 6, y: e.y + 4, "text-anchor": e.inside ? "end" : "start",
            class: e.current ? "lk-spec-curve-label" : "lk-spec-curve-label lk-spec-curve-label-other",
        }, e.text));
    }
    return boxes;
}

function drawAxes(picture, x, y, yMax, step) {
    const grid = svg("g", { class: "lk-grid" });
    for (let i = 0; i <= 10; i += 2) {
        const a = i / 10;
        grid.append(svg("line", { x1: x(a), x2: x(a), y1: PLOT.top, y2: PLOT.bottom }));
        grid.append(svg("text", { x: x(a), y: PLOT.bottom + 18, class: "lk-tick", "text-anchor": "middle" }, formatNumber(a, 1)));
    }
    for (let v = 0; v <= yMax + 1e-9; v += step) {
        grid.append(svg("line", { x1: PLOT.left, x2: PLOT.right, y1: y(v), y2: y(v) }));
        grid.append(svg("text", { x: PLOT.left - 8, y: y(v) + 4, class: "lk-tick", "text-anchor": "end" },
                        `${formatNumber(v, step < 1 ? 1 : 0)}×`));
    }
    grid.append(
        svg("rect", { x: PLOT.left, y: PLOT.top, width: PLOT.right - PLOT.left, height: PLOT.bottom - PLOT.top, class: "lk-frame" }),
        svg("text", { x: (PLOT.left + PLOT.right) / 2, y: HEIGHT - 16, class: "lk-axis-label", "text-anchor": "middle" },
            "acceptance rate α (each draft accepted independently)"),
        svg("text", { x: 14, y: (PLOT.top + PLOT.bottom) / 2, class: "lk-axis-label", "text-anchor": "middle",
                      transform: `rotate(-90 14 ${(PLOT.top + PLOT.bottom) / 2})` }, "expected speedup S"),
    );
    picture.append(grid);
}

function legendItem(kind, text) {
    return html("span", { class: "lk-legend-item" }, html("span", { class: `lk-swatch ${kind}`, "aria-hidden": "true" }), text);
}
