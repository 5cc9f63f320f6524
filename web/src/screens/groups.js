// Groups: deck and plan as pages (one at a time, Back / Next), narrate, timeline, sketch,
// shapes and map as pictures. Members are drawn by their own drawers (draw.js).
import { h, list, num, put, safeHref, str, svg, uid, words } from "./dom.js";
import { drawNode } from "./draw.js";
import { picture } from "./display.js";
import { sending } from "./send.js";

const PICTURES = new Set(["sketch", "shapes", "diagram", "mock", "draw", "map", "math", "chart", "stat", "calc"]);

function page(node, ctx) {
  const p = node.props;
  const layout = ["cover", "split", "text"].includes(p.layout) ? p.layout : "text";
  const box = h("section", { class: `yl-page yl-${layout}` });
  if (p.img) put(box, picture(ctx, p.img, str(p.title), "yl-card-img"));
  put(box, h("h3", { class: "yl-title" }, str(p.title) || " "));
  if (p.body) put(box, words(str(p.body), "yl-body"));
  if (list(p.points).length) put(box, h("ul", { class: "yl-items" }, list(p.points).map((x) => h("li", {}, str(x)))));
  const link = safeHref(p.url);
  if (link) put(box, h("a", { href: link, target: "_blank", rel: "noopener noreferrer" }, link));
  for (const child of node.children) put(box, drawNode(child, ctx));
  return box;
}

/** A group's members as pages: a picture right after a page belongs to that page. */
function pagesOf(node) {
  const pages = [];
  for (const child of node.children) {
    const last = pages.at(-1);
    if (PICTURES.has(child.preset) && last && last.preset === "page" && !last.children.length) last.children.push(child);
    else pages.push(child.preset === "page" ? { ...child, children: [...child.children] } : child);
  }
  return pages;
}

/** Pages one at a time with Back, Next and where you are; `finish` gives the last page's
 * button (Done or Send). */
function paged(node, ctx, pages, finish) {
  const p = node.props;
  const tid = uid("pages");
  const box = h("section", { class: "yl-card yl-deck", "aria-roledescription": "slides", "aria-labelledby": tid });
  put(box, h("h3", { class: "yl-title", id: tid }, str(p.title) || (node.preset === "plan" ? "Plan" : "Slides")));
  const drawn = pages.map((pg, i) => {
    const slide = h("div", { class: "yl-slide-page", role: "group", "aria-roledescription": "slide", "aria-label": `${i + 1} of ${pages.length}` }, drawNode(pg, ctx));
    slide.hidden = i > 0;
    return slide;
  });
  put(box, ...drawn);
  let at = 0;
  const where = h("span", { class: "yl-where", "aria-live": "polite" });
  const back = h("button", { type: "button", class: "yl-option" }, "Back");
  const next = h("button", { type: "button", class: "yl-option" }, "Next");
  const last = finish(box);
  const show = (i) => {
    at = Math.max(0, Math.min(pages.length - 1, i));
    drawn.forEach((d, k) => (d.hidden = k !== at));
    where.textContent = `${at + 1} / ${pages.length}`;
    back.disabled = at === 0;
    next.hidden = at === pages.length - 1;
    last.hidden = at !== pages.length - 1;
  };
  back.addEventListener("click", () => show(at - 1));
  next.addEventListener("click", () => show(at + 1));
  box.addEventListener("keydown", (e) => {
    if (e.target.closest("input, textarea, select")) return;
    if (e.key === "ArrowRight") show(at + 1);
    if (e.key === "ArrowLeft") show(at - 1);
  });
  put(box, h("div", { class: "yl-pager" }, back, where, next, last));
  show(0);
  if (p.layout === "scroll") {
    drawn.forEach((d) => (d.hidden = false));
    box.querySelector(".yl-pager").replaceChildren(last);
    last.hidden = false;
  }
  return box;
}

function deck(node, ctx) {
  const pages = pagesOf(node);
  const answers = {};
  const questions = pages.filter((pg) => pg.props && pg.props.answer !== undefined);
  const inner = {
    ...ctx,
    answer(member, value) {
      if (value.correct !== undefined) answers[member.id] = value.correct;
      return ctx.answer(member, value);
    },
  };
  return paged(node, inner, pages, (box) => {
    const done = h("button", { type: "button", class: "yl-primary" }, "Done");
    done.addEventListener("click", () => {
      const score = Object.values(answers).filter(Boolean).length;
      const value = { done: true, pages: pages.length, ...(questions.length ? { score, of: questions.length } : {}) };
      sending(done, box, () => ctx.send(node.id, "deck", value));
    });
    return done;
  });
}

// What a plan keeps of each step's answer (the value key its event would carry).
const PLAN_KEYS = { ask: "answer", choose: "choice", pick: "picked", slide: "value", form: "form", mic: "transcript", camera: "photo" };

function plan(node, ctx) {
  const answers = {};
  const inner = {
    ...ctx,
    // Plan members send nothing of their own: their answers wait for the plan's Send.
    answer(member, value) {
      const key = PLAN_KEYS[member.preset];
      answers[member.id] = key ? value[key] : value;
      return Promise.resolve();
    },
  };
  return paged(node, inner, pagesOf(node), (box) => {
    const send = h("button", { type: "button", class: "yl-primary" }, str(node.props.submit) || "Send");
    send.addEventListener("click", () => sending(send, box, () => ctx.send(node.id, "plan", { plan: { ...answers } })));
    return send;
  });
}

function narrate(node, ctx) {
  const steps = node.children;
  const box = paged(node, ctx, steps, (b) => {
    const done = h("button", { type: "button", class: "yl-primary" }, "Done");
    done.addEventListener("click", () => sending(done, b, () => ctx.send(node.id, "narrate", { done: true, steps: steps.length })));
    return done;
  });
  box.classList.add("yl-narrate");
  if (window.speechSynthesis && node.props.voice !== "off") {
    const play = h("button", { type: "button", class: "yl-option" }, "▶ Play");
    play.addEventListener("click", () => {
      const text = steps.map((s) => [s.props.title, s.props.body, s.props.caption, s.props.text].filter(Boolean).join(". ")).join(". ");
      window.speechSynthesis.speak(new SpeechSynthesisUtterance(text));
    });
    play.classList.add("yl-narrate-play");
    box.querySelector(".yl-pager").before(play);
  }
  return box;
}

// --- timeline --------------------------------------------------------------------------------

const MARKS = { done: "✓", now: "●", next: "○" };

function rowItem(node) {
  const p = node.props;
  const link = safeHref(p.url);
  return h(
    "li",
    { class: `yl-when yl-${node.preset}` },
    h("span", { class: "yl-mark", "aria-hidden": "true" }, MARKS[node.preset] || "•"),
    h("span", { class: "yl-sr" }, `${node.preset}: `),
    h("span", { class: "yl-when-text" }, link ? h("a", { href: link, target: "_blank", rel: "noopener noreferrer" }, str(p.text)) : str(p.text)),
    p.tag ? h("span", { class: "yl-tag" }, str(p.tag)) : null,
    p.at ? h("span", { class: "yl-at" }, str(p.at)) : null,
    p.sub ? h("span", { class: "yl-sub" }, str(p.sub)) : null,
  );
}

function timeline(node, ctx) {
  const p = node.props;
  const box = h("section", { class: "yl-card yl-timeline" });
  if (p.title) put(box, h("h3", { class: "yl-title" }, str(p.title)));
  let rows = [...node.children];
  const ol = h("ol", { class: "yl-whens" });
  const fill = () => {
    const items = rows.map((r, i) => {
      const li = rowItem(r);
      if (r.preset === "now" && (i === 0 || rows[i - 1].preset !== "now")) li.prepend(h("span", { class: "yl-now-mark" }, str(p.mark) || "Now"));
      if (p.reorder) {
        const up = h("button", { type: "button", class: "yl-mini", "aria-label": `Move ${str(r.props.text)} up`, disabled: i === 0 }, "↑");
        up.addEventListener("click", () => {
          [rows[i - 1], rows[i]] = [rows[i], rows[i - 1]];
          fill();
        });
        put(li, up);
      }
      return li;
    });
    const fold = num(p.fold, 5);
    const done = items.filter((_, i) => rows[i].preset === "done");
    if (done.length > fold) {
      const hidden = done.slice(0, done.length - fold);
      const more = h("li", {}, h("details", { class: "yl-fold" }, h("summary", {}, `${hidden.length} earlier`), h("ol", { class: "yl-whens" }, hidden)));
      ol.replaceChildren(more, ...items.filter((li) => !hidden.includes(li)));
    } else ol.replaceChildren(...items);
  };
  fill();
  put(box, ol);
  if (p.reorder) {
    const send = h("button", { type: "button", class: "yl-primary" }, "Send order");
    send.addEventListener("click", () => {
      const order = rows.map((r) => str(r.props.key || r.props.tag || r.props.text));
      sending(send, box, () => ctx.send(node.id, "timeline", { order, ...(p.board ? { board: str(p.board) } : {}) }));
    });
    put(box, h("div", { class: "yl-actions" }, send));
  }
  return box;
}

// --- sketch: a wireframe of rows, before and after -----------------------------------------

function sketchRow(node) {
  const p = node.props;
  const cls = ["yl-row", p.x && "yl-x", p.hi && "yl-hi", p.dim && "yl-dim", p.button && "yl-row-button"].filter(Boolean).join(" ");
  return h("li", { class: cls }, p.x ? h("s", {}, str(p.text)) : str(p.text), p.note ? h("span", { class: "yl-note" }, str(p.note)) : null);
}

function sketch(node) {
  const p = node.props;
  const frame = ["window", "phone", "bubble"].includes(p.frame) ? p.frame : "window";
  const frames = [{ label: null, rows: [] }];
  for (const child of node.children) {
    if (child.preset === "after") {
      if (frames.length === 1) {
        frames[0].label = str(p.before) || "Before";
        frames.push({ label: str(child.props.label) || "After", rows: [] });
      }
    } else frames.at(-1).rows.push(child);
  }
  const box = h("figure", { class: "yl-card yl-sketch" });
  if (p.title) put(box, h("figcaption", { class: "yl-title" }, str(p.title)));
  const drawn = frames.map((f) =>
    h("div", { class: `yl-frame-box yl-${frame}` }, f.label ? h("p", { class: "yl-sub" }, f.label) : null, h("ul", { class: "yl-rows" }, f.rows.map(sketchRow))),
  );
  put(box, h("div", { class: "yl-frames-row" }, drawn));
  return box;
}

// --- shapes and map: SVG pictures ------------------------------------------------------------

/** An arrowhead marker for lines and routes. */
function arrowHead(id, cls) {
  const marker = { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 5, markerHeight: 5, orient: "auto" };
  return svg("defs", {}, svg("marker", marker, svg("path", { d: "M0 0 L10 5 L0 10 Z", class: cls })));
}

function xy(text) {
  const [x, y] = String(text ?? "").split(",").map(Number);
  return Number.isFinite(x) && Number.isFinite(y) ? [x, y] : null;
}

function shapes(node) {
  const p = node.props;
  const w = Math.max(4, Math.min(24, num(p.w, 10)));
  const hh = Math.max(2, Math.min(16, num(p.h, 6)));
  const art = svg("svg", { viewBox: `0 0 ${w} ${hh}`, class: "yl-shapes", role: "img", "aria-label": str(p.title || p.caption) || "A picture of shapes" });
  put(art, arrowHead(`arrow-${node.id}`, "yl-ink-fill"));
  const names = [];
  for (const child of node.children) {
    const s = child.props;
    const at = xy(s.at) || [w / 2, hh / 2];
    const size = num(s.size, 1.6);
    const cls = `yl-shape ${s.fill ? "yl-filled" : ""} ${s.dash ? "yl-dash" : ""} yl-tone-${str(s.tone) || "ink"}`;
    const kind = String(s.kind || "box").toLowerCase();
    if (s.label) names.push(str(s.label));
    if (kind === "line" || kind === "arrow" || kind === "swipe") {
      const a = xy(s.from) || at;
      const b = xy(s.to) || [at[0] + 2, at[1]];
      put(art, svg("line", { x1: a[0], y1: a[1], x2: b[0], y2: b[1], class: cls, "marker-end": kind === "line" ? null : `url(#arrow-${node.id})` }));
    } else if (kind === "circle" || kind === "dot" || kind === "tap") {
      put(art, svg("circle", { cx: at[0], cy: at[1], r: kind === "dot" ? 0.2 : size / 2, class: cls }));
    } else if (kind !== "text") {
      const rx = kind === "pill" || kind === "blob" ? size / 2 : 0.15;
      put(art, svg("rect", { x: at[0] - size, y: at[1] - size / 2, width: size * 2, height: size, rx, class: cls }));
    }
    const middle = { "text-anchor": "middle", "dominant-baseline": "middle" };
    const y = kind === "text" ? at[1] : at[1] + 0.12;
    if (s.label) put(art, svg("text", { x: at[0], y, class: "yl-shape-label", ...middle }, str(s.label)));
  }
  const fig = h("figure", { class: "yl-card yl-picture" });
  if (p.title) put(fig, h("figcaption", { class: "yl-title" }, str(p.title)));
  put(fig, art);
  if (names.length) art.setAttribute("aria-label", `${art.getAttribute("aria-label")}: ${names.join(", ")}`);
  if (p.caption) put(fig, h("p", { class: "yl-sub" }, str(p.caption)));
  return fig;
}

/** A map without tiles: pins, routes and outlines on a plain projection, fitted to them. */
function map(node) {
  const p = node.props;
  const pins = new Map();
  const points = [];
  for (const child of node.children) {
    if (child.preset === "pin") {
      const at = xy(child.props.at);
      if (at) {
        pins.set(child.id, at);
        points.push(at);
      }
    }
  }
  const stops = (value) => list(value).map((s) => pins.get(str(s)) || xy(s)).filter(Boolean);
  for (const child of node.children) if (child.preset !== "pin") points.push(...stops(child.props.pts || child.props.stops));
  const center = xy(p.center);
  if (!points.length && center) points.push(center);
  const lats = points.map((q) => q[0]);
  const lons = points.map((q) => q[1]);
  const world = p.fit === "world" || !points.length;
  const [s, n] = world ? [-60, 75] : [Math.min(...lats), Math.max(...lats)];
  const [wst, e] = world ? [-170, 180] : [Math.min(...lons), Math.max(...lons)];
  const padLat = Math.max((n - s) * 0.2, 0.5);
  const padLon = Math.max((e - wst) * 0.3, 0.5);
  const box = [s - padLat, n + padLat, wst - padLon, e + padLon];
  const W = 320;
  const H = 200;
  const X = (lon) => ((lon - box[2]) / (box[3] - box[2])) * W;
  const Y = (lat) => H - ((lat - box[0]) / (box[1] - box[0])) * H;
  const art = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "yl-map", role: "img", "aria-label": str(p.title || p.caption) || "A map" });
  put(art, arrowHead(`route-${node.id}`, "yl-route-head"));
  put(art, svg("rect", { x: 0, y: 0, width: W, height: H, class: "yl-sea" }));
  for (let g = 1; g < 4; g += 1) {
    put(art, svg("line", { x1: (W * g) / 4, x2: (W * g) / 4, y1: 0, y2: H, class: "yl-grid" }));
    put(art, svg("line", { y1: (H * g) / 4, y2: (H * g) / 4, x1: 0, x2: W, class: "yl-grid" }));
  }
  const svgPoints = (pts) => pts.map(([la, lo]) => `${X(lo)},${Y(la)}`).join(" ");
  const names = [];
  for (const child of node.children) {
    const c = child.props;
    if (child.preset === "area") {
      const outline = stops(c.pts);
      const cls = `yl-area-shape ${c.dash ? "yl-dash" : ""}`;
      if (outline.length > 2) put(art, svg("polygon", { points: svgPoints(outline), class: cls }));
      for (const code of list(c.codes)) names.push(str(code));
    } else if (child.preset === "route") {
      const line = stops(c.pts || c.stops);
      const head = c.arrow ? `url(#route-${node.id})` : null;
      const cls = `yl-route ${c.dash ? "yl-dash" : ""}`;
      if (line.length > 1) put(art, svg("polyline", { points: svgPoints(line), class: cls, "marker-end": head }));
    }
  }
  for (const child of node.children) {
    if (child.preset !== "pin" || !pins.get(child.id)) continue;
    const [la, lo] = pins.get(child.id);
    const label = str(child.props.label);
    names.push(label || `${la}, ${lo}`);
    put(art, svg("circle", { cx: X(lo), cy: Y(la), r: 5, class: `yl-pin ${child.props.pulse ? "yl-pulse" : ""}` }));
    const left = X(lo) > W * 0.6; // near the right edge the label sits left of its pin
    if (label) put(art, svg("text", { x: X(lo) + (left ? -8 : 8), y: Y(la) + 4, class: "yl-pin-label", "text-anchor": left ? "end" : "start" }, label));
  }
  const fig = h("figure", { class: "yl-card yl-picture" });
  if (p.title) put(fig, h("figcaption", { class: "yl-title" }, str(p.title)));
  put(fig, art);
  if (names.length) put(fig, h("p", { class: "yl-sub" }, names.join(" · ")));
  if (p.caption) put(fig, h("p", { class: "yl-sub" }, str(p.caption)));
  return fig;
}

function member(node) {
  if (MARKS[node.preset]) return h("ul", { class: "yl-whens" }, rowItem(node));
  if (node.preset === "row") return h("ul", { class: "yl-rows" }, sketchRow(node));
  return null;
}

export const GROUPS = {
  page,
  deck,
  plan,
  narrate,
  timeline,
  sketch,
  shapes,
  map,
  done: member,
  now: member,
  next: member,
  row: member,
};
