// Numbers: chart (line, bar, area, scatter, pie, donut as SVG, with its values as a table for
// screen readers), stat (a big number, its change and sparkline), calc (live sliders).
import { fmt, h, list, num, put, str, svg, uid, unitText } from "./dom.js";
import { sending } from "./send.js";

const W = 320;
const H = 180;
const PAD = { l: 36, r: 22, t: 12, b: 28 };

function series(p) {
  const out = [];
  const names = list(p.names).map(str);
  for (let k = 1; k < 10; k += 1) {
    const key = k === 1 ? "y" : `y${k}`;
    if (p[key] === undefined) continue;
    out.push({ name: names[out.length] || (k === 1 ? "" : `Series ${k}`), values: list(p[key]).map((v) => num(v, 0)) });
  }
  return out;
}

function valuesTable(xs, all, unit) {
  return h(
    "table",
    { class: "yl-sr" },
    h("thead", {}, h("tr", {}, h("th", {}, "x"), all.map((s, i) => h("th", {}, s.name || `y${i + 1}`)))),
    h("tbody", {}, xs.map((x, i) => h("tr", {}, h("th", {}, str(x)), all.map((s) => h("td", {}, `${fmt(s.values[i])}${unit}`))))),
  );
}

function pie(xs, values, donut) {
  const total = values.reduce((a, b) => a + Math.max(0, b), 0) || 1;
  const g = svg("g", { transform: `translate(${W / 2},${H / 2})` });
  let angle = -Math.PI / 2;
  const r = H / 2 - 8;
  values.forEach((v, i) => {
    const share = Math.max(0, v) / total;
    const end = angle + share * Math.PI * 2;
    const large = share > 0.5 ? 1 : 0;
    const [x0, y0, x1, y1] = [Math.cos(angle) * r, Math.sin(angle) * r, Math.cos(end) * r, Math.sin(end) * r];
    const d = share >= 0.999 ? `M ${-r} 0 A ${r} ${r} 0 1 1 ${r} 0 A ${r} ${r} 0 1 1 ${-r} 0` : `M 0 0 L ${x0} ${y0} A ${r} ${r} 0 ${large} 1 ${x1} ${y1} Z`;
    put(g, svg("path", { d, class: `yl-s${i % 6}` }, svg("title", {}, `${str(xs[i])}: ${fmt(v)}`)));
    angle = end;
  });
  if (donut) put(g, svg("circle", { r: r * 0.55, class: "yl-hole" }));
  return g;
}

function chart(node) {
  const p = node.props;
  const type = ["line", "bar", "area", "scatter", "pie", "donut"].includes(p.type) ? p.type : "line";
  const all = series(p);
  const unit = unitText(p.unit);
  if (!all.length) return null;
  const xs = list(p.x).length ? list(p.x) : all[0].values.map((_, i) => i + 1);
  const label = `${str(p.title) || "Chart"}: a ${type} chart of ${all.length} series`;
  const box = h("figure", { class: "yl-card yl-chart" });
  if (p.title) put(box, h("figcaption", { class: "yl-title" }, str(p.title)));
  const plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label, class: "yl-plot" });
  if (type === "pie" || type === "donut") {
    put(plot, pie(xs, all[0].values, type === "donut"));
  } else {
    const flat = all.flatMap((s) => s.values);
    const lo = Math.min(num(p.min, Infinity), 0, ...flat);
    const hi = Math.max(num(p.max, -Infinity), ...flat, lo + 1);
    const iw = W - PAD.l - PAD.r;
    const ih = H - PAD.t - PAD.b;
    const n = Math.max(xs.length, 1);
    const xAt = (i) => PAD.l + (type === "bar" ? (i + 0.5) * (iw / n) : n === 1 ? iw / 2 : (i * iw) / (n - 1));
    const yAt = (v) => PAD.t + ih - ((v - lo) / (hi - lo)) * ih;
    for (const t of [lo, (lo + hi) / 2, hi]) {
      put(
        plot,
        svg("line", { x1: PAD.l, x2: W - PAD.r, y1: yAt(t), y2: yAt(t), class: "yl-grid" }),
        svg("text", { x: PAD.l - 4, y: yAt(t) + 3, class: "yl-axis", "text-anchor": "end" }, fmt(t, 1)),
      );
    }
    xs.forEach((x, i) => put(plot, svg("text", { x: xAt(i), y: H - 10, class: "yl-axis", "text-anchor": "middle" }, str(x).slice(0, 8))));
    all.forEach((s, k) => {
      const pts = s.values.map((v, i) => [xAt(i), yAt(v)]);
      if (type === "bar") {
        const bw = (iw / n / all.length) * 0.8;
        s.values.forEach((v, i) => {
          const bar = {
            x: xAt(i) - (bw * all.length) / 2 + k * bw,
            y: Math.min(yAt(v), yAt(0)),
            width: bw,
            height: Math.abs(yAt(0) - yAt(v)),
            class: `yl-s${k % 6}`,
          };
          put(plot, svg("rect", bar, svg("title", {}, `${str(xs[i])}: ${fmt(v)}${unit}`)));
        });
        return;
      }
      const path = pts.map(([x, y], i) => `${i ? "L" : "M"} ${x} ${y}`).join(" ");
      if (type === "area") put(plot, svg("path", { d: `${path} L ${pts.at(-1)[0]} ${yAt(lo)} L ${pts[0][0]} ${yAt(lo)} Z`, class: `yl-area yl-s${k % 6}` }));
      if (type !== "scatter") put(plot, svg("path", { d: path, class: `yl-line yl-stroke${k % 6}` }));
      pts.forEach(([x, y], i) => {
        const dot = { cx: x, cy: y, r: type === "scatter" ? 4 : 2.5, class: `yl-s${k % 6}` };
        put(plot, svg("circle", dot, svg("title", {}, `${str(xs[i])}: ${fmt(s.values[i])}${unit}`)));
      });
    });
  }
  put(box, plot);
  const named = all.filter((s) => s.name);
  if (named.length > 1 || type === "pie" || type === "donut") {
    const keys = type === "pie" || type === "donut" ? xs.map(str) : named.map((s) => s.name);
    put(box, h("ul", { class: "yl-legend", "aria-hidden": "true" }, keys.map((k, i) => h("li", {}, h("span", { class: `yl-key yl-s${i % 6}` }), k))));
  }
  put(box, valuesTable(xs, all, unit));
  return box;
}

function spark(values) {
  const vs = values.map((v) => num(v, 0));
  if (vs.length < 2) return null;
  const lo = Math.min(...vs);
  const hi = Math.max(...vs, lo + 1);
  const d = vs.map((v, i) => `${i ? "L" : "M"} ${(i * 100) / (vs.length - 1)} ${28 - ((v - lo) / (hi - lo)) * 26}`).join(" ");
  return svg("svg", { viewBox: "0 0 100 30", class: "yl-spark", "aria-hidden": "true", preserveAspectRatio: "none" }, svg("path", { d, class: "yl-line yl-stroke0" }));
}

function stat(node, ctx) {
  const p = node.props;
  const value = typeof p.value === "number" ? fmt(p.value) : str(p.value);
  const unit = unitText(p.unit);
  const money = /^[$€£¥]$/.test(p.unit || "");
  const box = h("section", { class: "yl-card yl-stat" });
  put(box, h("p", { class: "yl-big" }, money ? `${unit}${value}` : `${value}${unit ? (/^[%°]/.test(unit) ? "" : " ") + unit : ""}`));
  if (p.label) put(box, h("p", { class: "yl-sub" }, str(p.label)));
  if (p.delta !== undefined) {
    const d = str(p.delta);
    const up = !d.startsWith("-");
    const good = (p.good || "up") === "up" ? up : !up;
    const arrow = `${up ? "▲" : "▼"} ${d.replace(/^[+-]/, "")}`;
    const verdict = h("span", { class: "yl-sr" }, good ? " (good)" : " (bad)");
    put(box, h("p", { class: `yl-delta ${good ? "yl-good" : "yl-bad"}` }, arrow, verdict));
  }
  put(box, spark(list(p.spark)));
  if (p.sub) put(box, h("p", { class: "yl-sub" }, str(p.sub)));
  if (p.cta) {
    const b = h("button", { type: "button", class: "yl-option" }, str(p.cta));
    b.addEventListener("click", () => sending(b, box, () => ctx.answer(node, { cta: str(p.cta) })));
    put(box, b);
  }
  return box;
}

// --- calc: the spec's expression grammar, evaluated as the person moves a slider ------------

const FNS = {
  ...Object.fromEntries(["sin", "cos", "tan", "asin", "acos", "atan", "sqrt", "abs", "exp"].map((f) => [f, Math[f]])),
  ...Object.fromEntries(["min", "max", "floor", "ceil", "round"].map((f) => [f, Math[f]])),
  ln: Math.log,
  log: Math.log10,
};

/** Evaluate `expr` with `vars`: numbers, names, + - * / ^ (**), unary minus, parens, the
 * spec's functions, pi and e. Null when it can't be worked out. */
export function evaluate(expr, vars) {
  const tokens = String(expr).match(/\d+(?:\.\d+)?(?:e-?\d+)?|\*\*|[A-Za-z_]\w*|[-+*/^(),]|\S/g) || [];
  let at = 0;
  const peek = () => tokens[at];
  const take = (t) => (tokens[at] === t ? (at += 1, true) : false);
  const sum = () => {
    let v = product();
    for (;;) {
      if (take("+")) v += product();
      else if (take("-")) v -= product();
      else return v;
    }
  };
  const product = () => {
    let v = unary();
    for (;;) {
      if (take("*")) v *= unary();
      else if (take("/")) v /= unary();
      else return v;
    }
  };
  const unary = () => (take("-") ? -unary() : take("+") ? unary() : power());
  const power = () => {
    const base = atom();
    return take("^") || take("**") ? base ** unary() : base;
  };
  const atom = () => {
    const t = tokens[at++];
    if (t === undefined) throw new Error("end");
    if (/^\d/.test(t)) return Number(t);
    if (t === "(") {
      const v = sum();
      if (!take(")")) throw new Error(")");
      return v;
    }
    if (FNS[t] && peek() === "(") {
      at += 1;
      const args = [sum()];
      while (take(",")) args.push(sum());
      if (!take(")")) throw new Error(")");
      return FNS[t](...args);
    }
    if (t in vars) return vars[t];
    if (t === "pi") return Math.PI;
    if (t === "e") return Math.E;
    throw new Error(t);
  };
  try {
    const v = sum();
    return at === tokens.length && Number.isFinite(v) ? v : null;
  } catch {
    return null;
  }
}

const RESERVED = new Set(["title", "f", "plot", "unit", "digits"]);

function calc(node, ctx) {
  const p = node.props;
  const [out, expr] = String(p.f || "result = 0").split("=").map((s) => s.trim());
  const digits = num(p.digits, 3);
  const box = h("section", { class: "yl-card yl-calc" });
  if (p.title) put(box, h("h3", { class: "yl-title" }, str(p.title)));
  const vars = {};
  const result = h("output", { class: "yl-big", "aria-live": "polite" });
  const redo = () => {
    const r = evaluate(expr ?? out, vars);
    result.textContent = `${expr ? out : "Result"} = ${r === null ? "—" : fmt(r, digits)}${p.unit ? ` ${unitText(p.unit)}` : ""}`;
    return r;
  };
  for (const [name, spec] of Object.entries(p)) {
    if (RESERVED.has(name) || !spec || typeof spec !== "object" || Array.isArray(spec)) continue;
    const id = uid("var");
    const unit = unitText(spec.unit);
    vars[name] = num(spec.value, spec.min !== undefined ? (num(spec.min, 0) + num(spec.max, 1)) / 2 : 0);
    const shown = h("output", { for: id, class: "yl-range-value" }, `${fmt(vars[name])}${unit}`);
    const input = spec.min !== undefined
      ? h("input", { id, type: "range", min: num(spec.min, 0), max: num(spec.max, 1), step: "any", value: vars[name], class: "yl-range" })
      : h("input", { id, type: "number", step: "any", value: vars[name], class: "yl-input" });
    input.addEventListener("input", () => {
      vars[name] = Number(input.value);
      shown.textContent = `${fmt(vars[name])}${unit}`;
      redo();
    });
    put(box, h("div", { class: "yl-field" }, h("label", { for: id, class: "yl-field-label" }, name), h("div", { class: "yl-slide" }, input, shown)));
  }
  redo();
  const send = h("button", { type: "button", class: "yl-option" }, "Send");
  send.addEventListener("click", () => sending(send, box, () => ctx.answer(node, { values: { ...vars }, result: redo() })));
  put(box, result, h("div", { class: "yl-actions" }, send));
  return box;
}

export const DATA = { chart, stat, calc };
