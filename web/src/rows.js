// One row of a thread as the person sees it: their own words (with ✓ delivered, ✓✓ handled),
// an agent's message (its screen drawn by ./screens, else its words), "Stopped.", a reaction.
import { h, clock, say } from "./dom.js";
import { REACTIONS, words } from "./api.js";
import * as screens from "./screens/index.js";

/** The build this page draws for (gating), as the screens say: undefined without them. */
export const BUILD = screens.SCREENS_BUILD;

/** Whether a row shows in the thread at all: control rows are the bridges' business, except
 * the quiet "Stopped." a Stop gets; a reaction shows on the message it is on. */
export function shown(row) {
  if (row.kind === "control") return row.sender === "agent" && row.meta?.op === "stop";
  return !(row.kind === "event" && row.meta?.react);
}

function ticks(row) {
  if (row.sender !== "user") return null;
  const [mark, label] = row.handled_at ? ["✓✓", "handled"] : row.delivered_at ? ["✓", "delivered"] : ["", "sent"];
  return h("span", { class: `tick ${label}`, "data-tick": label, title: label, "aria-label": label, role: "img" }, mark);
}

/** What a row of the person's says: its echo for a tap, its words without the first line the
 * app adds for a reply or a mention. */
function personText(row) {
  if (row.kind === "event") {
    const meta = row.meta || {};
    return meta.echo || row.body.replace(/^\[yui\] /, "");
  }
  const group = row.meta?.group || {};
  if (group.control) return group.control === "stop" ? "Stop" : "Let it";
  return (group.words ?? row.body.replace(/^\[yui\] group [^\n]*\n/, "")).replace(/^\[yui\] (reply|mention) [^\n]*\n/, "");
}

async function photoOf(row, person) {
  const path = row.meta?.value?.photo;
  const img = h("img", { class: "photo", alt: "Your photo" });
  person.signedUrl(path).then((url) => (img.src = url)).catch(() => img.replaceWith("[photo]"));
  return img;
}

async function agentBody(row, actions, person) {
  if (row.kind === "control") return h("p", { class: "stopped" }, row.body);
  if (typeof screens.drawMessage === "function") {
    try {
      const drawn = await screens.drawMessage(person.db, row, actions);
      if (drawn) return drawn;
    } catch (error) {
      console.warn("drawing a message failed", error);
    }
  }
  return h("p", { class: "words" }, words(row.body).trim() || row.body);
}

/** The element for `row`; `view` gives the actions (reply, react, the screens' actions). */
export async function drawRow(row, view) {
  const mine = row.sender === "user";
  const quote = row.meta?.reply_to?.quote;
  const body = mine
    ? row.kind === "event" && row.meta?.preset === "camera"
      ? await photoOf(row, view.person)
      : h("p", { class: "words" }, personText(row))
    : await agentBody(row, view.actions, view.person);
  const el = h(
    "article",
    { class: `msg ${mine ? "mine" : "theirs"} ${row.kind}`, "data-id": row.id, "data-sender": row.sender, "aria-label": mine ? "You" : view.title },
    quote ? h("blockquote", { class: "quote" }, quote) : null,
    body,
    row.meta?.group?.guard?.state === "held" ? held(row, view) : null,
    h("footer", {},
      h("time", { datetime: row.created_at }, clock(row.created_at)),
      ticks(row),
      row.reaction ? h("span", { class: "reaction", "aria-label": `reacted ${row.reaction}` }, row.reaction) : null,
      row.kind !== "control" ? h("button", { class: "link", type: "button", "aria-label": "Reply to this message", onclick: () => view.replyTo(row) }, "Reply") : null,
      !mine && row.kind !== "control" ? reactButton(row, view) : null,
    ),
  );
  return el;
}

/** A group's ask held past its budget: Let it (a fresh budget) or Stop. */
function held(row, view) {
  return h("div", { class: "held", role: "group", "aria-label": "Held" },
    h("button", { type: "button", onclick: () => view.groupControl("continue", row.id) }, "Let it"),
    h("button", { type: "button", onclick: () => view.groupControl("stop") }, "Stop"));
}

function reactButton(row, view) {
  const menu = h("div", { class: "reactions", role: "menu", hidden: true, onkeydown: (event) => {
    if (event.key === "Escape") {
      menu.hidden = true;
      open.focus();
    }
  } },
    ...REACTIONS.map((emoji) => h("button", { type: "button", role: "menuitem", "aria-label": `React ${emoji}`, onclick: () => pick(emoji) }, emoji)),
    h("button", { type: "button", role: "menuitem", "aria-label": "Take the reaction back", onclick: () => pick(null) }, "✕"),
  );
  const open = h("button", { class: "link", type: "button", "aria-haspopup": "menu", "aria-label": "React to this message", onclick: () => {
    menu.hidden = !menu.hidden;
    if (!menu.hidden) menu.querySelector("button").focus();
  } }, "React");
  async function pick(emoji) {
    menu.hidden = true;
    try { await view.person.react(row, emoji); } catch (error) { say(error.message); }
  }
  return h("span", { class: "react" }, open, menu);
}

/** Only the parts of a row that change after it lands: its ticks and its reaction. */
export function refreshRow(el, row) {
  const held = el.querySelector(".held");
  if (held) held.hidden = row.meta?.group?.guard?.state !== "held"; // let through or stopped
  const old = el.querySelector(".tick");
  const fresh = ticks(row);
  if (old && fresh) old.replaceWith(fresh);
  const footer = el.querySelector("footer");
  el.querySelector(".reaction")?.remove();
  if (row.reaction) footer.querySelector("time").after(h("span", { class: "reaction", "aria-label": `reacted ${row.reaction}` }, row.reaction));
}
