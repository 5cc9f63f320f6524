// The few DOM helpers every part of the page uses: make an element, clear one, say a time.

/** An element: `h("button", { class: "x", onclick }, "words", child)`. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key in el && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  el.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

export function clear(el, ...children) {
  el.replaceChildren(...children.flat().filter(Boolean));
  return el;
}

/** A row id made here, so a resend is the same row (crypto.randomUUID needs a secure page). */
export function newId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function clock(iso) {
  const when = new Date(iso);
  return when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

/** A line on the page that says what went wrong, for a moment. */
export function say(text) {
  const bar = document.getElementById("status");
  if (!bar) return;
  bar.textContent = text;
  clearTimeout(say.timer);
  say.timer = setTimeout(() => (bar.textContent = ""), 6000);
}
