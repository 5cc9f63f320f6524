// One ```yui screen: its ops made into a tree (groups hold their members, patches folded into
// what they patch) and each top-level node drawn by its preset's drawer.
import { h, put, str, words } from "./dom.js";
import { DATA } from "./data.js";
import { DISPLAY, stepper } from "./display.js";
import { GROUPS } from "./groups.js";
import { PLAY } from "./play.js";
import { QUESTIONS } from "./questions.js";
import * as live from "./live.js";

export const DRAWERS = { ...QUESTIONS, ...DISPLAY, ...DATA, ...GROUPS, ...PLAY };

/** The ops of one fence as top-level nodes `{id, preset, props, children, ctx}` in line
 * order: group members inside their head, patches folded into what they patch in this reply,
 * `show name` bringing back what an earlier reply saved. `loose` are the patches meant for
 * earlier replies. */
export function tree(ops, ctx) {
  const byId = new Map();
  const roots = [];
  const all = [];
  const loose = [];
  const add = (op, nodeCtx) => {
    const node = { id: op.id, preset: op.preset, screen: op.screen, props: { ...op.props }, children: [], ctx: nodeCtx };
    byId.set(op.id, node);
    all.push(node);
    const parent = op.in ? byId.get(op.in) : null;
    (parent ? parent.children : roots).push(node);
  };
  const patch = (op) => {
    const node = byId.get(op.target) || all.findLast((n) => n.preset === op.target);
    if (node) Object.assign(node.props, op.props || {});
    return Boolean(node);
  };
  ops.forEach((op, index) => {
    if (op.op === "add") add(op, ctx);
    else if (op.op === "patch") {
      if (!patch(op)) loose.push({ index, op });
    } else if (op.op === "save") {
      live.save(ctx.row, op.name, ctx.place, ops.slice(0, index).filter((o) => o.op === "add" || o.op === "patch"));
    } else if (op.op === "show") {
      const earlier = live.saved(ctx.row, op.name);
      if (earlier) {
        const restored = ctx.restored(earlier.place, op.name);
        for (const old of earlier.ops) {
          if (old.op === "add") add(old, restored);
          else patch(old);
        }
      }
    }
  });
  return { roots, loose };
}

/** A node drawn by its preset, or its words when no drawer knows it (never nothing). */
export function drawNode(node, ctx) {
  const drawer = DRAWERS[node.preset];
  let el = null;
  if (drawer) {
    try {
      el = drawer(node, ctx);
    } catch (err) {
      console.error("yui screens: drawing", node.preset, err);
      el = null;
    }
  }
  if (!el) el = fallback(node);
  el.classList.add("yl-node");
  el.dataset.preset = node.preset;
  el.dataset.id = node.id;
  return el;
}

/** What a preset says, as words: its title or text, then its members. */
export function fallback(node) {
  const p = node.props;
  const title = str(p.title || p.q || p.text || p.label || p.caption || p.prompt || p.name);
  const lines = [title ? `**${title}**` : `There's a ${node.preset} here.`];
  for (const key of ["body", "sub", "items", "options", "points"]) if (p[key]) lines.push(str(p[key]));
  for (const child of node.children) lines.push(`- ${str(child.props.text || child.props.title || child.props.label || child.preset)}`);
  return h("div", { class: "yl-card yl-fallback" }, words(lines.join("\n")));
}

/** A whole screen: its nodes in order, one column. Each top-level node is remembered, so a
 * later reply's patch can reach it. */
export function drawScreen(ops, ctx) {
  const screen = h("div", { class: "yl-screen" });
  const { roots, loose } = tree(ops, ctx);
  for (const { index, op } of loose) live.patchLater(ctx.row, index, op);
  for (let i = 0; i < roots.length; i += 1) {
    const node = roots[i];
    if (node.preset !== "step") {
      const el = drawNode(node, node.ctx);
      live.remember(ctx.row, node, el, (n) => drawNode(n, n.ctx));
      put(screen, el);
      continue;
    }
    // Consecutive steps are one stepper.
    let end = i;
    while (end + 1 < roots.length && roots[end + 1].preset === "step") end += 1;
    const el = stepper(roots.slice(i, end + 1), node.ctx);
    el.classList.add("yl-node");
    el.dataset.preset = "step";
    el.dataset.id = node.id;
    put(screen, el);
    i = end;
  }
  if (!screen.childElementCount) put(screen, h("p", { class: "yl-sub yl-quiet" }, quietLine(ops, loose)));
  return screen;
}

/** One quiet line for a screen that draws nothing in the thread (never nothing at all). */
function quietLine(ops, loose) {
  if (loose.length) return "Updated above."; // patches change what is already there
  const menu = ops.filter((op) => op.op === "menu" && op.props?.label).map((op) => str(op.props.label));
  if (menu.length) return `Added to the menu: ${menu.join(", ")}`;
  if (ops.some((op) => op.op === "theme")) return "A new look.";
  return "Nothing to show here.";
}
