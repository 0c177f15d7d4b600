// Small helpers the book's figures share: SVG and HTML element creation,
// labelled controls, log scales and number formatting. No libraries.

const SVG_NS = "http://www.w3.org/2000/svg";

// An SVG element with attributes; `text` becomes its text content.
export function svg(tag, attrs = {}, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
    if (text !== undefined) node.textContent = String(text);
    return node;
}

// An HTML element with attributes (`class` and the rest) and children
// (nodes or strings).
export function html(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
    for (const child of children) node.append(child);
    return node;
}

// The figure's own container, placed before the caption the site wrote into
// the <figure> (so the caption stays underneath). Mounting twice replaces it.
export function figureRoot(element, name) {
    element.querySelector(":scope > .lk-fig")?.remove();
    const root = html("div", { class: `lk-fig lk-fig-${name}` });
    const caption = element.querySelector(":scope > figcaption");
    element.insertBefore(root, caption);
    return root;
}

// A scalable drawing area: width fixed in user units, height as given; the
// CSS stretches it to the column's width.
export function drawing(width, height, label) {
    return svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "lk-svg", role: "img", "aria-label": label });
}

// Wraps a drawing so that on a narrow screen it keeps a legible minimum width
// (figures.css) and scrolls sideways instead of shrinking its text away.
export function scroller(picture) {
    return html("div", { class: "lk-scroll" }, picture);
}

let nextControlId = 0;
function controlId(prefix) {
    nextControlId += 1;
    return `lk-${prefix}-${nextControlId}`;
}

// A labelled range input that shows its value: show(v) gives the text after
// the label. onInput receives the numeric value; set(v) moves it from code.
export function slider({ label, min, max, step = 1, value, onInput, show = String }) {
    const id = controlId("slider");
    const input = html("input", { type: "range", id, min, max, step, value });
    const output = html("output", { for: id });
    const wrap = html("div", { class: "lk-control lk-slider" }, html("label", { for: id }, `${label}: `, output), input);
    const update = () => { output.textContent = show(Number(input.value)); };
    input.addEventListener("input", () => { update(); onInput(Number(input.value)); });
    update();
    return { element: wrap, input, set(v) { input.value = v; update(); } };
}

// A slider whose stops are a list of numbers: it shows the number at the stop
// and gives onInput the number, not the stop's index.
export function listSlider({ label, values, value, onInput }) {
    return slider({
        label, min: 0, max: values.length - 1, value: values.indexOf(value),
        show: (i) => formatNumber(values[i]),
        onInput: (i) => onInput(values[i]),
    });
}

// A labelled <select>; choices are [value, text] pairs. onChange gets the value string.
export function select({ label, choices, value, onChange }) {
    const id = controlId("select");
    const input = html("select", { id });
    for (const [v, text] of choices) {
        const option = html("option", { value: v }, text);
        if (String(v) === String(value)) option.selected = true;
        input.append(option);
    }
    input.addEventListener("change", () => onChange(input.value));
    const wrap = html("div", { class: "lk-control lk-select" }, html("label", { for: id }, label), input);
    return { element: wrap, input };
}

// A group of buttons of which one is pressed (a toggle such as bf16 / fp8).
export function toggle({ label, choices, value, onChange }) {
    const buttons = [];
    const group = html("div", { class: "lk-toggle", role: "group", "aria-label": label });
    const press = (v) => {
        for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.value === String(v)));
    };
    for (const [v, text] of choices) {
        const b = html("button", { type: "button", "data-value": v }, text);
        b.addEventListener("click", () => { press(v); onChange(v); });
        buttons.push(b);
        group.append(b);
    }
    press(value);
    return { element: html("div", { class: "lk-control" }, html("span", { class: "lk-label" }, label), group) };
}

export function button(text, onClick, attrs = {}) {
    const b = html("button", { type: "button", ...attrs }, text);
    b.addEventListener("click", onClick);
    return b;
}

// A row of controls.
export function controls(...items) {
    return html("div", { class: "lk-controls" }, ...items);
}

// A log10 scale from [lo, hi] (data) to [a, b] (pixels).
export function logScale(lo, hi, a, b) {
    const l0 = Math.log10(lo), l1 = Math.log10(hi);
    return (v) => a + ((Math.log10(v) - l0) / (l1 - l0)) * (b - a);
}

// A linear scale from [lo, hi] (data) to [a, b] (pixels).
export function linearScale(lo, hi, a, b) {
    return (v) => a + ((v - lo) / (hi - lo)) * (b - a);
}

// 1234567 -> "1,234,567"; digits after the point as asked.
export function formatNumber(value, digits = 0) {
    return value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

// Three significant digits at most, grouped thousands: 0.0123, 4.19, 749, 1,419.
export function formatSignificant(value) {
    if (value === 0) return "0";
    const digits = Math.max(0, 2 - Math.floor(Math.log10(Math.abs(value))));
    return formatNumber(Number(value.toPrecision(3)), Math.min(digits, 6));
}

// Axis ticks of a log scale: 0.1, 1, 10, 100, 1,000, 10,000.
export function formatTick(value) {
    return value < 1 ? String(Number(value.toPrecision(1))) : formatNumber(value);
}

// Bytes in binary units: 512 B, 64.0 KiB, 1.50 MiB, 15.0 GiB.
export function formatBytes(bytes) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(bytes) >= 1024 && i < units.length - 1) {
        bytes /= 1024;
        i += 1;
    }
    return i === 0 ? `${formatNumber(bytes)} B` : `${formatSignificant(bytes)} ${units[i]}`;
}

// Fetches JSON from the site (figures read only /figures/data/...).
export async function loadJSON(path) {
    const response = await fetch(path);
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    return response.json();
}

// A message inside the figure when its data cannot be loaded (instead of the console).
export function showError(root, message) {
    root.replaceChildren(html("p", { class: "lk-error" }, message));
}

// Distinct, colour-blind-friendly colours for up to eight series (Okabe-Ito order).
export const PALETTE = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"];
