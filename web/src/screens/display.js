// Things to look at: say, list, table, card, image, gallery, video, compare, storyboard,
// step, project, math, custom. Pictures come from signed links (ctx.media signs them afresh).
import { fmt, h, list, num, put, safeHref, str, uid, unitText, words } from "./dom.js";
import { sending } from "./send.js";

function say(node) {
  return h("div", { class: "yl-say" }, words(str(node.props.text) || " "));
}

function list_(node) {
  const p = node.props;
  const tid = uid("list");
  const box = h("section", { class: "yl-card yl-list", "aria-labelledby": p.title ? tid : null });
  if (p.title) put(box, h("h3", { class: "yl-title", id: tid }, str(p.title)));
  const items = h(p.num ? "ol" : "ul", { class: p.check ? "yl-checks" : "yl-items" });
  for (const item of list(p.items)) {
    if (p.check) {
      // A tick is a quiet event: it stays on the page and costs the agent no turn.
      const id = uid("item");
      const box2 = h("input", { type: "checkbox", id, class: "yl-check" });
      const li = h("li", {}, box2, h("label", { for: id }, str(item)));
      box2.addEventListener("change", () => li.classList.toggle("yl-ticked", box2.checked));
      put(items, li);
    } else put(items, h("li", {}, str(item)));
  }
  put(box, items);
  return box;
}

function cell(value) {
  if (value === true) return "✓";
  if (value === false) return "–";
  return typeof value === "number" ? fmt(value, 4) : str(value);
}

function table(node) {
  const p = node.props;
  const cols = list(p.cols).map(str);
  const units = list(typeof p.units === "string" ? p.units.split("|") : p.units).map(unitText);
  let rows = list(p.rows).map((r) => list(r));
  if (!cols.length) return null; // a bound agent table: this page has no tables of its own
  const body = h("tbody", {});
  const fill = () => {
    body.replaceChildren(...rows.map((r) => h("tr", {}, cols.map((_, i) => h("td", { class: typeof r[i] === "number" ? "yl-num" : null }, cell(r[i]))))));
  };
  const sortState = { col: -1, dir: "asc" };
  const headers = cols.map((c, i) => {
    const button = h("button", { type: "button", class: "yl-sort" }, c, units[i] ? ` (${units[i]})` : "");
    const numeric = rows.length > 0 && rows.every((r) => typeof r[i] === "number");
    const th = h("th", { scope: "col", "aria-sort": "none", class: numeric ? "yl-num" : null }, button);
    button.addEventListener("click", () => {
      sortState.dir = sortState.col === i && sortState.dir === "asc" ? "desc" : "asc";
      sortState.col = i;
      const sign = sortState.dir === "asc" ? 1 : -1;
      rows = [...rows].sort((a, b) => (a[i] > b[i] ? sign : a[i] < b[i] ? -sign : 0));
      for (const other of box.querySelectorAll("th")) other.setAttribute("aria-sort", "none");
      th.setAttribute("aria-sort", sortState.dir === "asc" ? "ascending" : "descending");
      fill();
    });
    return th;
  });
  fill();
  const caption = p.name ? h("caption", {}, str(p.name)) : null;
  const grid = h("table", { class: "yl-table" }, caption, h("thead", {}, h("tr", {}, headers)), body);
  const box = h("div", { class: "yl-card yl-table-wrap" }, grid);
  return box;
}

/** An <img> whose signed link is fetched afresh; `alt` always set. */
export function picture(ctx, src, alt, cls = "yl-img") {
  const img = h("img", { class: cls, alt: alt || "", decoding: "async" });
  if (src) ctx.media(String(src)).then((url) => (img.src = url));
  return img;
}

function card(node, ctx) {
  const p = node.props;
  const tid = uid("card");
  const inner = [
    p.img ? picture(ctx, p.img, str(p.title), "yl-card-img") : null,
    p.tag ? h("span", { class: "yl-tag" }, str(p.tag)) : null,
    h("h3", { class: "yl-title", id: tid }, str(p.title) || " "),
    p.sub ? h("p", { class: "yl-sub" }, str(p.sub)) : null,
    p.body ? words(str(p.body), "yl-body") : null,
  ];
  const actions = h("div", { class: "yl-actions" });
  const box = h("article", { class: "yl-card yl-card-plain", "aria-labelledby": tid });
  const href = safeHref(p.url);
  if (p.cta && !href) {
    const button = h("button", { type: "button", class: "yl-primary" }, str(p.cta));
    button.addEventListener("click", () => sending(button, box, () => ctx.answer(node, { cta: str(p.cta) })));
    put(actions, button);
  } else if (href) {
    put(actions, h("a", { class: "yl-primary yl-link", href, target: "_blank", rel: "noopener noreferrer" }, str(p.cta) || "Open"));
  }
  if (p.fold) {
    const details = h("details", { class: "yl-fold" }, h("summary", {}, str(p.title) || "More"), ...inner.slice(3), actions);
    put(box, ...inner.slice(0, 2), details);
  } else put(box, ...inner, actions.childElementCount ? actions : null);
  return box;
}

function image(node, ctx) {
  const p = node.props;
  const alt = str(p.alt || p.caption || p.prompt) || "A picture";
  const fig = h("figure", { class: "yl-figure" });
  if (p.src) {
    const img = picture(ctx, p.src, alt);
    if (p.fit === "cover") img.classList.add("yl-cover");
    put(fig, img);
  } else put(fig, h("div", { class: "yl-placeholder", role: "img", "aria-label": alt }, str(p.prompt) || "A picture is on its way"));
  if (p.caption) put(fig, h("figcaption", {}, str(p.caption)));
  if (p.edit && p.src) put(fig, editor(node, ctx, fig));
  return fig;
}

/** `image +edit`: drag a box on the picture (the whole of it by default), say what to change;
 * sends `{edit: {box: [x, y, w, h], instruction}}` in percent of the picture. */
function editor(node, ctx, fig) {
  const frame = h("div", { class: "yl-mark-box", hidden: true });
  const img = fig.querySelector("img");
  const holder = h("div", { class: "yl-edit-area" });
  img.replaceWith(holder);
  put(holder, img, frame);
  let box = [0, 0, 100, 100];
  let start = null;
  const pct = (e) => {
    const r = holder.getBoundingClientRect();
    return [((e.clientX - r.left) / r.width) * 100, ((e.clientY - r.top) / r.height) * 100].map((v) => Math.max(0, Math.min(100, Math.round(v))));
  };
  holder.addEventListener("pointerdown", (e) => {
    start = pct(e);
    holder.setPointerCapture(e.pointerId);
  });
  holder.addEventListener("pointermove", (e) => {
    if (!start) return;
    const [x, y] = pct(e);
    box = [Math.min(x, start[0]), Math.min(y, start[1]), Math.abs(x - start[0]), Math.abs(y - start[1])];
    Object.assign(frame.style, { left: `${box[0]}%`, top: `${box[1]}%`, width: `${box[2]}%`, height: `${box[3]}%` });
    frame.hidden = false;
  });
  holder.addEventListener("pointerup", () => (start = null));
  const id = uid("edit");
  const input = h("input", { id, type: "text", class: "yl-input", placeholder: "What should change?" });
  const send = h("button", { type: "button", class: "yl-option" }, "Send");
  const go = () => {
    const instruction = input.value.trim();
    if (!instruction) return input.focus();
    return sending(send, fig, () => ctx.answer(node, { edit: { box: box[2] && box[3] ? box : [0, 0, 100, 100], instruction } }));
  };
  send.addEventListener("click", go);
  input.addEventListener("keydown", (e) => e.key === "Enter" && go());
  return h("div", { class: "yl-other" }, h("label", { for: id, class: "yl-sr" }, "What should change in the picture"), input, send);
}

function gallery(node, ctx) {
  const p = node.props;
  const items = list(p.items);
  const caps = list(p.caps);
  const layout = ["row", "feed", "grid", "row3d"].includes(p.layout) ? p.layout : "row";
  const tid = uid("gallery");
  const box = h("section", { class: `yl-gallery yl-${layout}`, "aria-labelledby": p.title ? tid : null });
  if (p.title) put(box, h("h3", { class: "yl-title", id: tid }, str(p.title)));
  const strip = h("div", { class: "yl-strip", role: "list" });
  const chosen = [];
  items.forEach((src, i) => {
    const alt = str(caps[i]) || `Picture ${i + 1} of ${items.length}`;
    const fig = h("figure", { class: "yl-tile", role: "listitem" }, picture(ctx, src, alt), caps[i] ? h("figcaption", {}, str(caps[i])) : null);
    if (p.pick) {
      const toggle = h("button", { type: "button", class: "yl-tile-pick", "aria-pressed": "false", "aria-label": `Pick ${alt}` }, "✓");
      toggle.addEventListener("click", () => {
        const at = chosen.indexOf(i);
        if (at >= 0) chosen.splice(at, 1);
        else if (chosen.length < num(p.max, Infinity)) chosen.push(i);
        toggle.setAttribute("aria-pressed", String(chosen.includes(i)));
      });
      put(fig, toggle);
    }
    put(strip, fig);
  });
  put(box, strip);
  if (p.pick) {
    const done = h("button", { type: "button", class: "yl-primary" }, str(p.submit) || "Done");
    done.addEventListener("click", () => chosen.length && sending(done, box, () => ctx.answer(node, { picked: [...chosen] })));
    put(box, h("div", { class: "yl-actions" }, done));
  }
  return box;
}

function video(node, ctx) {
  const p = node.props;
  const fig = h("figure", { class: "yl-figure" });
  if (!p.src) {
    put(fig, h("div", { class: "yl-placeholder", role: "img", "aria-label": str(p.prompt) || "A video" }, str(p.prompt) || "A video is on its way"));
  } else {
    const el = h("video", {
      class: "yl-video",
      controls: true,
      playsInline: true,
      loop: p.loop === true,
      muted: p.auto === true || p.mute === true, // playing by itself, it plays muted
      autoplay: p.auto === true,
      preload: "metadata",
      "aria-label": str(p.caption) || "A video",
    });
    ctx.media(String(p.src)).then((url) => (el.src = url));
    if (p.poster) ctx.media(String(p.poster)).then((url) => (el.poster = url));
    put(fig, el);
  }
  if (p.caption) put(fig, h("figcaption", {}, str(p.caption)));
  return fig;
}

function compare(node, ctx) {
  const p = node.props;
  const labels = list(p.labels).length ? list(p.labels).map(str) : ["Before", "After"];
  const mode = ["side", "toggle"].includes(p.mode) ? p.mode : "slider";
  const box = h("section", { class: `yl-card yl-compare yl-${mode}` });
  if (p.title) put(box, h("h3", { class: "yl-title" }, str(p.title)));
  const before = picture(ctx, p.before, labels[0]);
  const after = picture(ctx, p.after, labels[1]);
  if (mode === "side") {
    put(box, h("div", { class: "yl-pair" }, h("figure", {}, before, h("figcaption", {}, labels[0])), h("figure", {}, after, h("figcaption", {}, labels[1]))));
  } else if (mode === "toggle") {
    after.hidden = true;
    const flip = h("button", { type: "button", class: "yl-option", "aria-pressed": "false" }, `Show ${labels[1]}`);
    flip.addEventListener("click", () => {
      after.hidden = !after.hidden;
      before.hidden = !after.hidden;
      flip.setAttribute("aria-pressed", String(!after.hidden));
      flip.textContent = `Show ${after.hidden ? labels[1] : labels[0]}`;
    });
    put(box, h("div", { class: "yl-stack" }, before, after), flip);
  } else {
    const id = uid("cmp");
    const top = h("div", { class: "yl-over" }, after);
    const range = h("input", { id, type: "range", min: 0, max: 100, value: 50, class: "yl-range" });
    range.addEventListener("input", () => top.style.setProperty("--cut", `${range.value}%`));
    top.style.setProperty("--cut", "50%");
    put(box, h("div", { class: "yl-stack" }, before, top), h("label", { for: id, class: "yl-sr" }, `${labels[0]} and ${labels[1]}`), range);
  }
  if (list(p.notes).length) put(box, h("p", { class: "yl-sub" }, list(p.notes).map(str).join(" · ")));
  if (p.pick) {
    const row = h("div", { class: "yl-options" });
    for (const choice of labels) {
      const b = h("button", { type: "button", class: "yl-option" }, choice);
      b.addEventListener("click", () => sending(b, box, () => ctx.answer(node, { choice })));
      put(row, b);
    }
    put(box, row);
  }
  return box;
}

function storyboard(node, ctx) {
  const p = node.props;
  const frames = list(p.frames);
  const notes = list(p.notes);
  const box = h("section", { class: "yl-card yl-storyboard" });
  if (p.title) put(box, h("h3", { class: "yl-title" }, str(p.title)));
  let order = frames.map((_, i) => i);
  const strip = h("ol", { class: "yl-frames" });
  const fill = () => {
    strip.replaceChildren(
      ...order.map((i, at) => {
        const src = frames[i];
        const isPic = /^(https?:|\/|data:)/.test(String(src));
        const shown = isPic ? picture(ctx, src, str(notes[i]) || `Frame ${i + 1}`) : h("div", { class: "yl-placeholder" }, str(src));
        const li = h("li", { class: "yl-frame" }, shown, notes[i] ? h("p", { class: "yl-sub" }, str(notes[i])) : null);
        if (p.reorder) {
          const up = h("button", { type: "button", class: "yl-mini", "aria-label": `Move frame ${i + 1} earlier`, disabled: at === 0 }, "←");
          up.addEventListener("click", () => {
            [order[at - 1], order[at]] = [order[at], order[at - 1]];
            fill();
          });
          put(li, up);
        }
        return li;
      }),
    );
  };
  fill();
  put(box, strip);
  if (p.reorder) {
    const send = h("button", { type: "button", class: "yl-primary" }, "Send order");
    send.addEventListener("click", () => sending(send, box, () => ctx.answer(node, { order: [...order] })));
    put(box, h("div", { class: "yl-actions" }, send));
  }
  return box;
}

/** Consecutive steps, one stepper: numbered, the current one marked; Done on a step sends
 * `{done, index[, last]}` under the first step's id (the stepper's) and moves on. */
export function stepper(nodes, ctx) {
  const box = h("section", { class: "yl-card yl-steps", "aria-label": "Steps" });
  const ol = h("ol", { class: "yl-stepper" });
  let current = 0;
  const items = nodes.map((node, index) => {
    const p = node.props;
    const done = h("button", { type: "button", class: "yl-option", hidden: index !== 0 }, "Done");
    const li = h(
      "li",
      { "aria-current": index === 0 ? "step" : null, class: index === 0 ? "yl-current" : null },
      h("span", { class: "yl-step-n", "aria-hidden": "true" }, String(index + 1)),
      h(
        "div",
        {},
        p.title ? h("h3", { class: "yl-title" }, str(p.title)) : null,
        h("div", { class: "yl-step-text" }, words(str(p.text) || " ", "yl-body")),
        p.tex ? h("p", { class: "yl-math", role: "math", "aria-label": str(p.tex) }, texNodes(p.tex)) : null,
        p.img ? picture(ctx, p.img, str(p.text)) : null,
        p.time ? h("p", { class: "yl-sub" }, `About ${Math.round(num(p.time, 0) / 60) || 1} min`) : null,
        h("div", { class: "yl-actions" }, done),
      ),
    );
    done.addEventListener("click", async () => {
      const last = index === nodes.length - 1;
      const value = { done: true, index, ...(last ? { last: true } : {}) };
      const ok = await sending(done, box, () => ctx.send(nodes[0].id, "step", value));
      if (!ok) return;
      li.classList.add("yl-ticked");
      done.hidden = true;
      current = Math.max(current, index + 1);
      items.forEach((other, k) => {
        other.classList.toggle("yl-current", k === current);
        if (k === current) other.querySelector("button").hidden = false;
        if (k === current) other.setAttribute("aria-current", "step");
        else other.removeAttribute("aria-current");
      });
    });
    return li;
  });
  put(ol, items);
  put(box, ol);
  return box;
}

function project(node, ctx) {
  const p = node.props;
  const box = h("article", { class: "yl-card yl-project" });
  if (p.img) put(box, picture(ctx, p.img, str(p.title), "yl-card-img"));
  put(box, h("h3", { class: "yl-title" }, str(p.title) || "Project"), p.status ? h("span", { class: "yl-tag" }, str(p.status)) : null);
  if (p.body) put(box, words(str(p.body), "yl-body"));
  if (p.progress !== undefined) {
    const value = Math.max(0, Math.min(100, num(p.progress, 0)));
    put(box, h("progress", { class: "yl-progress", max: 100, value, "aria-label": `${value}% done` }));
  }
  const facts = list(typeof p.facts === "string" ? p.facts.split("|") : p.facts);
  const fact = ([k, ...v]) => [h("dt", {}, k.trim()), h("dd", {}, v.join(":").trim())];
  if (facts.length) put(box, h("dl", { class: "yl-facts" }, facts.map((f) => fact(str(f).split(":")))));
  if (list(p.next).length) put(box, h("p", { class: "yl-sub" }, "Next"), h("ul", { class: "yl-items" }, list(p.next).map((n) => h("li", {}, str(n)))));
  if (p.cta) {
    const b = h("button", { type: "button", class: "yl-primary" }, str(p.cta));
    b.addEventListener("click", () => sending(b, box, () => ctx.answer(node, { cta: str(p.cta) })));
    put(box, h("div", { class: "yl-actions" }, b));
  }
  return box;
}

const TEX = {
  "\\alpha": "α", "\\beta": "β", "\\gamma": "γ", "\\delta": "δ", "\\theta": "θ", "\\lambda": "λ",
  "\\mu": "µ", "\\pi": "π", "\\sigma": "σ", "\\omega": "ω", "\\Delta": "Δ", "\\Sigma": "Σ",
  "\\infty": "∞", "\\cdot": "·", "\\times": "×", "\\pm": "±", "\\leq": "≤", "\\geq": "≥",
  "\\neq": "≠", "\\approx": "≈", "\\to": "→", "\\sum": "Σ", "\\int": "∫", "\\partial": "∂",
  "\\,": " ", "\\;": " ", "\\left": "", "\\right": "",
};

/** TeX drawn as far as plain HTML goes: fractions stacked, roots, powers and indices raised
 * and lowered, Greek letters and signs as themselves; anything else as written. */
export function texNodes(tex) {
  const text = String(tex);
  let at = 0;
  const group = () => {
    // One argument: {…} or a single character.
    if (text[at] === "{") {
      at += 1;
      const out = seq("}");
      at += 1;
      return out;
    }
    return text[at] === undefined ? [] : [text[at++]];
  };
  const seq = (stop) => {
    const out = [];
    while (at < text.length && text[at] !== stop) {
      const ch = text[at];
      if (ch === "\\") {
        const name = text.slice(at).match(/^\\([A-Za-z]+|.)/)[0];
        at += name.length;
        if (name === "\\frac") out.push(h("span", { class: "yl-frac" }, h("span", {}, group()), h("span", {}, group())));
        else if (name === "\\sqrt") out.push("√", h("span", { class: "yl-root" }, group()));
        else out.push(TEX[name] ?? name.slice(1));
      } else if (ch === "^" || ch === "_") {
        at += 1;
        out.push(h(ch === "^" ? "sup" : "sub", {}, group()));
      } else if (ch === "{") {
        out.push(...group());
      } else {
        out.push(ch);
        at += 1;
      }
    }
    return out;
  };
  return seq(undefined);
}

function math(node) {
  const p = node.props;
  const size = ["sm", "lg"].includes(p.size) ? p.size : "md";
  const formula = h("p", { class: "yl-math", role: "math", "aria-label": str(p.tex) }, texNodes(p.tex));
  const caption = p.caption ? h("figcaption", {}, str(p.caption)) : null;
  return h("figure", { class: `yl-card yl-mathbox yl-${size}` }, formula, caption);
}

function customPart(spec, node, ctx, box) {
  if (!spec || typeof spec !== "object" || Array.isArray(spec)) return h("pre", { class: "yl-code" }, JSON.stringify(spec, null, 2));
  const kids = () => list(spec.children).map((c) => customPart(c, node, ctx, box));
  switch (spec.type) {
    case "stack":
      return h("div", { class: "yl-cstack" }, kids());
    case "row":
      return h("div", { class: "yl-crow" }, kids());
    case "text":
      return h("p", { class: spec.size === "lg" ? "yl-title" : "yl-body" }, str(spec.text));
    case "badge":
      return h("span", { class: "yl-tag" }, str(spec.text));
    case "stat":
      return h("div", { class: "yl-stat-mini" }, h("strong", {}, str(spec.value)), h("span", {}, str(spec.label)));
    case "image":
      return picture(ctx, spec.src, str(spec.alt));
    case "divider":
      return h("hr", { class: "yl-divider" });
    case "button": {
      const b = h("button", { type: "button", class: "yl-option" }, str(spec.text) || "OK");
      b.addEventListener("click", () => sending(b, box, () => ctx.send(node.id, "custom", { action: str(spec.action || spec.text) })));
      return b;
    }
    default:
      return h("pre", { class: "yl-code" }, JSON.stringify(spec, null, 2));
  }
}

function custom(node, ctx) {
  const box = h("section", { class: "yl-card yl-custom" });
  put(box, customPart(node.props.spec, node, ctx, box));
  return box;
}

export const DISPLAY = { say, list: list_, table, card, image, gallery, video, compare, storyboard, project, math, custom };
