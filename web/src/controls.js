// An agent's Controls screens: the sections its host serves, each section's items, one item's
// text to read and change. Each request is a control row; the host answers with one row naming
// it (`meta.for`), as for `yui app controls` (people/person.py control).
import { h, clear, newId, say } from "./dom.js";

const WAIT_MS = 10000;

async function ask(person, agent, op, section, id, fields = {}) {
  const meta = { v: 1, req: `c-${newId().replaceAll("-", "").slice(0, 12)}`, op, section, ...fields };
  if (id) meta.id = id;
  const body = ["controls:", op, section, id].filter(Boolean).join(" ").slice(0, 200);
  const row = await person.insert(agent.id, body, "control", meta);
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    const { data } = await person.db.from("yui_messages").select("meta")
      .eq("kind", "control").eq("sender", "agent").eq("meta->>for", row.id);
    if (data?.length) return data[0].meta;
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error("the agent's computer didn't answer: is its bridge running?");
}

export async function showControls(root, person, agent) {
  const sections = agent.controls?.sections || {};
  const names = Object.keys(sections);
  const detail = h("div", { class: "controls-detail", "aria-live": "polite" });
  clear(root, h("section", { class: "panel", "aria-label": `Controls of ${agent.name}` },
    h("h2", {}, `Controls · ${agent.name}`),
    names.length
      ? h("ul", { class: "plain" }, ...names.map((name) => h("li", {},
        h("button", { type: "button", onclick: () => openSection(detail, person, agent, name, sections[name]) }, `${name} (${sections[name]})`))))
      : h("p", {}, "Its computer serves no Controls: the agent does what its messages say."),
    detail));
}

async function openSection(root, person, agent, section, mode) {
  clear(root, h("p", {}, "Asking its computer…"));
  try {
    const answer = await ask(person, agent, "list", section);
    if (!answer.ok) throw new Error(answer.message || answer.error);
    clear(root, h("h3", {}, section), h("ul", { class: "plain" }, ...answer.items.map((item) => h("li", {},
      h("button", { type: "button", onclick: () => openItem(root, person, agent, section, item.id, mode) }, item.title || item.id)))));
  } catch (error) {
    clear(root, h("p", { role: "alert" }, error.message));
  }
}

async function openItem(root, person, agent, section, id, mode) {
  try {
    const answer = await ask(person, agent, "get", section, id);
    if (!answer.ok) throw new Error(answer.message || answer.error);
    const item = answer.item;
    const text = typeof item.text === "string" ? item.text : JSON.stringify(item, null, 1);
    const box = h("textarea", { rows: 12, "aria-label": `${id} in ${section}`, readOnly: item.read_only || !mode.includes("w") }, text);
    const save = h("button", { type: "button", hidden: item.read_only || !mode.includes("w"), onclick: async () => {
      const put = await ask(person, agent, "put", section, id, { rev: answer.rev, value: { text: box.value } });
      say(put.ok ? "Saved." : put.message || put.error);
    } }, "Save");
    clear(root, h("h3", {}, `${section} · ${id}`), box, save);
  } catch (error) {
    clear(root, h("p", { role: "alert" }, error.message));
  }
}
