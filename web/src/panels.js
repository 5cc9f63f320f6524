// The side panels: add an agent (its pairing code), the person's computers (remove one), the
// notifications their phones were sent, making a group, and deleting the account.
import { h, clear, clock, newId, say } from "./dom.js";

export function addAgent(root, person, onAdded) {
  const name = h("input", { id: "agent-name", required: true, maxlength: 60, autocomplete: "off" });
  const result = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "panel", "aria-label": "Add an agent" },
    h("h2", {}, "Add an agent"),
    h("label", { for: "agent-name" }, "Its name"), name,
    h("button", { type: "submit" }, "Add"), result);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const made = await person.addAgent(name.value.trim());
      clear(result,
        h("p", {}, "On the computer that runs it:"),
        h("pre", { class: "code", "aria-label": "Pairing code" }, `yui pair ${made.pairing.code}`),
        h("p", {}, "The code works once, for a few minutes."));
      onAdded();
    } catch (error) {
      clear(result, h("p", { role: "alert" }, error.message));
    }
  });
  clear(root, form);
  name.focus();
}

export async function hosts(root, person) {
  const list = await person.hosts();
  const live = list.filter((c) => !c.revoked_at);
  clear(root, h("section", { class: "panel", "aria-label": "Your computers" },
    h("h2", {}, "Your computers"),
    live.length ? h("ul", { class: "plain" }, ...live.map((c) => h("li", {},
      h("span", {}, `${c.name} · last seen ${c.last_seen_at ? clock(c.last_seen_at) : "never"}`),
      h("button", { type: "button", "aria-label": `Remove ${c.name}`, onclick: async () => {
        if (!confirm(`Remove ${c.name}? Its agents go offline at once.`)) return;
        try { await person.removeHost(c.id); } catch (error) { say(error.message); }
        hosts(root, person);
      } }, "Remove")))) : h("p", {}, "No computer is paired.")));
}

/** Deleting the account (`yui-delete`, as `yui app delete-account` does): everything of the
 * person's goes, for good, so the box must be ticked first. */
export function account(root, person, onDeleted) {
  const sure = h("input", { id: "delete-sure", type: "checkbox" });
  const result = h("p", { role: "alert" });
  const form = h("form", { class: "panel", "aria-label": "Your account" },
    h("h2", {}, "Your account"),
    h("p", {}, "Deleting your account removes every agent and thread, computer, picture, session and phone of yours on this relay, then you. It can't be undone; your computers are cut off at their next call."),
    h("p", {}, sure, h("label", { for: "delete-sure" }, " Delete everything of mine")),
    h("button", { type: "submit", class: "danger" }, "Delete my account"), result);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!sure.checked) return clear(result, "Tick the box first: this can't be undone.");
    try {
      await person.call("yui-delete", {});
      onDeleted();
    } catch (error) {
      clear(result, error.message);
    }
  });
  clear(root, form);
}

export async function notifications(root, person) {
  const list = await person.notifications();
  clear(root, h("section", { class: "panel", "aria-label": "Notifications" },
    h("h2", {}, "Notifications"),
    list.length ? h("ul", { class: "plain" }, ...list.map((n) => h("li", {},
      h("strong", {}, n.title), " ", h("span", {}, n.body), " ", h("time", { datetime: n.created_at }, clock(n.created_at))))) : h("p", {}, "None yet.")));
}

export function newGroup(root, person, agents, onMade) {
  const title = h("input", { id: "group-title", required: true, maxlength: 80 });
  const boxes = agents.map((a) => h("label", { class: "check" }, h("input", { type: "checkbox", value: a.id }), ` ${a.name}`));
  const problem = h("p", { role: "alert" });
  const form = h("form", { class: "panel", "aria-label": "New group" },
    h("h2", {}, "New group"),
    h("label", { for: "group-title" }, "Title"), title,
    h("fieldset", {}, h("legend", {}, "Agents (the first is the lead)"), ...boxes),
    h("button", { type: "submit" }, "Make the group"), problem);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const chosen = boxes.map((b) => b.firstChild).filter((c) => c.checked).map((c) => c.value);
    if (chosen.length < 2) return (problem.textContent = "A group needs two agents or more.");
    try {
      onMade(await makeGroup(person, title.value.trim(), chosen));
    } catch (error) {
      problem.textContent = error.message;
    }
  });
  clear(root, form);
  title.focus();
}

async function makeGroup(person, title, agentIds) {
  const id = newId();
  const [lead, ...others] = agentIds;
  const made = await person.db.from("yui_threads").insert({ id, user_id: person.id, title, lead });
  if (made.error) throw new Error(made.error.message);
  for (const agent of others) {
    const seat = await person.db.from("yui_thread_members").insert({ thread_id: id, agent_id: agent, user_id: person.id });
    if (seat.error) throw new Error(seat.error.message);
  }
  return id;
}

export async function groups(person, agents) {
  const [threads, seats] = await Promise.all([
    person.db.from("yui_threads").select("id,title,lead,stopped_at,archived_at,created_at").is("archived_at", null).order("created_at", { ascending: false }),
    person.db.from("yui_thread_members").select("thread_id,agent_id").is("left_at", null),
  ]);
  if (threads.error) return [];
  const byId = new Map(agents.map((a) => [a.id, a]));
  return threads.data.map((g) => ({
    ...g,
    members: (seats.data || []).filter((s) => s.thread_id === g.id).map((s) => byId.get(s.agent_id)).filter(Boolean),
  }));
}
