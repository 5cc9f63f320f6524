// Small DOM helpers for the screens: elements from plain data, words with a little markdown.
// Nothing here ever writes HTML from a message: every agent string goes in as text.

let counter = 0;

/** A fresh id for labels and aria links ("yl-label-7"). */
export function uid(prefix = "yl") {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** An element: h("button", {class: "yl-btn", onclick}, "Walk"). Attributes starting with
 * "on" are listeners; null/false attributes are left out; children may be strings or arrays. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key in el && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element with attributes (numbers written as they are). */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined && value !== false) el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

/** Text the agent wrote for a prop: strings, numbers and lists as words, anything else "". */
export function str(value) {
  if (value === null || value === undefined || value === true || value === false) return "";
  if (Array.isArray(value)) return value.map(str).join(", ");
  if (typeof value === "object") return "";
  return String(value);
}

/** A list prop as a list (a lone value is a list of one). */
export function list(value) {
  if (value === null || value === undefined || value === "") return [];
  return Array.isArray(value) ? value : [value];
}

/** A number prop, or `fallback` when it isn't one. */
export function num(value, fallback) {
  const n = typeof value === "number" ? value : Number.parseFloat(value);
  return Number.isFinite(n) ? n : fallback;
}

/** A quantity's unit as the spec shows it: ^2 superscripts, deg → °, ohm → Ω, u → µ, * → ·. */
export function unitText(unit) {
  if (!unit) return "";
  const sup = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };
  return String(unit)
    .replace(/degC/g, "°C")
    .replace(/degF/g, "°F")
    .replace(/deg/g, "°")
    .replace(/ohm/g, "Ω")
    .replace(/\bu(L|g|m|s|mol)\b/g, "µ$1")
    .replace(/\*/g, "·")
    .replace(/\^(-?\d+)/g, (_, d) => [...d].map((c) => sup[c]).join(""));
}

/** A number as a person reads it: at most `digits` decimals, no trailing zeros. */
export function fmt(value, digits = 2) {
  if (typeof value !== "number" || !Number.isFinite(value)) return str(value);
  return String(Number(value.toFixed(digits)));
}

/** Links the page may open: web links only (no javascript:, no yui:, no data:). */
export function safeHref(url) {
  return typeof url === "string" && /^https?:\/\//i.test(url) ? url : null;
}

// --- words: the small markdown subset the spec lists -----------------------------------------

const INLINE = /(\*\*[^*]+\*\*|\*[^*\s][^*]*\*|_[^_\s][^_]*_|`[^`]+`|\[[^\]]+\]\([^)\s]+\)|~~[^~]+~~)/;

/** Inline marks: **bold**, *italic* / _italic_, `code`, ~~struck~~, [text](https://link).
 * An unclosed marker stays as written. */
export function inline(text) {
  const out = [];
  for (const piece of String(text).split(INLINE)) {
    if (!piece) continue;
    if (/^\*\*.+\*\*$/.test(piece)) out.push(h("strong", {}, piece.slice(2, -2)));
    else if (/^~~.+~~$/.test(piece)) out.push(h("s", {}, piece.slice(2, -2)));
    else if (/^(\*.+\*|_.+_)$/.test(piece)) out.push(h("em", {}, piece.slice(1, -1)));
    else if (/^`.+`$/.test(piece)) out.push(h("code", {}, piece.slice(1, -1)));
    else if (/^\[.+\]\(.+\)$/.test(piece)) {
      const [, label, href] = piece.match(/^\[(.+)\]\((.+)\)$/);
      const safe = safeHref(href);
      out.push(safe ? h("a", { href: safe, target: "_blank", rel: "noopener noreferrer" }, label) : piece);
    } else out.push(leadIn(piece, out.length === 0));
  }
  return out;
}

// `Label: value` lead-ins (up to four capitalised words and a colon) read in the accent.
function leadIn(piece, first) {
  const m = first && piece.match(/^((?:[A-Z][\w'-]*\s?){1,4}:)(\s.*)?$/s);
  return m ? [h("strong", { class: "yl-lead" }, m[1]), m[2] || ""] : piece;
}

/** A block of words: paragraphs, `#` headings, `-` and `1.` lists, ``` code blocks. */
export function words(text, cls = "yl-words") {
  const box = h("div", { class: cls });
  const lines = String(text).replace(/\r/g, "").split("\n");
  let para = [];
  let items = null;
  const flush = () => {
    if (para.length) box.append(h("p", {}, inline(para.join(" "))));
    para = [];
  };
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    const fence = line.match(/^\s{0,3}(`{3,}|~{3,})/);
    if (fence) {
      flush();
      items = null;
      const code = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) {
        code.push(lines[i]);
        i += 1;
      }
      box.append(h("pre", { class: "yl-code" }, h("code", {}, code.join("\n"))));
      continue;
    }
    const heading = line.match(/^(#{1,3})\s+(.*)$/);
    const bullet = line.match(/^\s*[-*]\s+(.*)$/);
    const numbered = line.match(/^\s*\d+[.)]\s+(.*)$/);
    if (heading) {
      flush();
      items = null;
      box.append(h(`h${heading[1].length + 2}`, { class: "yl-heading" }, inline(heading[2])));
    } else if (bullet || numbered) {
      flush();
      const tag = bullet ? "ul" : "ol";
      if (!items || items.tagName.toLowerCase() !== tag) {
        items = h(tag, {});
        box.append(items);
      }
      items.append(h("li", {}, inline((bullet || numbered)[1])));
    } else if (!line.trim()) {
      flush();
      items = null;
    } else {
      items = null;
      para.push(line.trim());
    }
  }
  flush();
  return box;
}

/** A visually hidden text for screen readers only. */
export function hidden(text) {
  return h("span", { class: "yl-sr" }, text);
}

/** Append children to `el`, leaving out null, undefined and false (as `h` does). */
export function put(el, ...children) {
  append(el, children);
  return el;
}
