// A thread, live: an agent's (or a group's) rows as they land and change over Realtime, the
// typing dots from the person's send until the agent's next row (or 3 minutes), and the Stop
// square while a turn runs.
import { h, clear, say } from "./dom.js";
import { BUILD, drawRow, refreshRow, shown } from "./rows.js";
import { Composer } from "./composer.js";
import { namedAt } from "./api.js";

const TYPING_MS = 3 * 60 * 1000;
const MAX_ADDRESSEES = 3; // the relay refuses more
const CATCH_UP_MS = 20000; // a read now and then, for whatever the socket missed
const OVERLAP_MS = 10000; // a row that commits late still shows up

function key(row) {
  return `${row.created_at}|${row.id}`;
}

export class ThreadView {
  constructor(person, { agent = null, group = null, agents }) {
    this.person = person;
    this.agent = agent;
    this.group = group;
    this.agents = agents;
    this.title = group ? group.title : agent.name;
    this.rows = new Map();
    this.slots = new Map();
    this.echoes = new Map();
    this.actions = {
      insertEvent: ({ body, meta, echo }) => this.insertEvent(body, meta, echo),
      signedUrl: (path) => person.signedUrl(path),
      buildNumber: BUILD,
    };
  }

  get agentId() {
    return this.group ? this.group.lead : this.agent.id;
  }

  element() {
    this.log = h("section", { class: "log", role: "log", "aria-live": "polite", "aria-label": `Messages with ${this.title}` });
    this.typing = h("p", { class: "typing", hidden: true, "aria-label": `${this.title} is working` }, h("span"), h("span"), h("span"));
    this.stopButton = h("button", { class: "stop", type: "button", hidden: true, "aria-label": "Stop", title: "Stop", onclick: () => this.stop() }, "■");
    this.composer = new Composer(this);
    this.heading = h("h2", {}, this.title);
    return h("div", { class: "thread" },
      h("header", { class: "thread-head" }, this.heading, this.group ? this.groupButtons() : null),
      this.log, this.typing,
      h("div", { class: "compose-row" }, this.composer.element(), this.stopButton),
    );
  }

  groupButtons() {
    return h("span", { class: "group-buttons" },
      h("button", { type: "button", onclick: () => this.groupControl("stop") }, "Stop the group"));
  }

  async open() {
    await this.catchUp();
    if (this.closed) return;
    const change = { event: "*", schema: "public", table: "yui_messages" };
    change.filter = this.group ? `thread_id=eq.${this.group.id}` : `agent_id=eq.${this.agent.id}`;
    this.channel = this.person.db
      .channel(`thread-${this.group?.id || this.agent.id}`)
      .on("postgres_changes", change, (payload) => this.heard(payload))
      .subscribe((status) => {
        if (status === "SUBSCRIBED") this.catchUp();
      });
    this.timer = setInterval(() => this.catchUp(), CATCH_UP_MS);
    this.tick = setInterval(() => this.refreshState(), 5000);
    this.composer.focus();
  }

  close() {
    this.closed = true;
    clearInterval(this.timer);
    clearInterval(this.tick);
    if (this.channel) this.person.db.removeChannel(this.channel);
  }

  /** Where a catch-up read starts: a little before the newest row, or at the oldest of the
   * person's rows still waiting for its ticks, whichever is older. */
  since() {
    let newest = null;
    let waiting = null;
    for (const row of this.rows.values()) {
      if (!newest || row.created_at > newest) newest = row.created_at;
      const open = row.sender === "user" && row.kind !== "control" && !row.handled_at;
      if (open && (!waiting || row.created_at < waiting)) waiting = row.created_at;
    }
    if (!newest) return null;
    const overlap = new Date(Date.parse(newest) - OVERLAP_MS).toISOString();
    return waiting && waiting < overlap ? waiting : overlap;
  }

  async catchUp() {
    if (this.closed) return;
    try {
      for (const row of await this.person.thread(this.agent?.id, this.group?.id, this.since())) this.put(row);
    } catch (error) {
      say(error.message);
    }
  }

  heard(payload) {
    if (payload.eventType === "DELETE") return this.remove(payload.old?.id);
    const row = payload.new;
    if (!row?.id) return;
    if (!this.group && row.thread_id) return; // a group's row: shown in the group
    this.put(row);
  }

  belongs(row) {
    return this.group ? row.thread_id === this.group.id : row.agent_id === this.agent.id && !row.thread_id;
  }

  /** A row, new or changed: drawn in its place, or only its ticks and reaction updated. */
  put(row) {
    if (!this.belongs(row)) return;
    const known = this.rows.get(row.id);
    this.rows.set(row.id, { ...known, ...row });
    if (known) {
      const slot = this.slots.get(row.id);
      if (slot?.firstChild) refreshRow(slot.firstChild, this.rows.get(row.id));
    } else if (shown(row)) {
      const slot = h("div", { class: "slot", "data-key": key(row) });
      this.slots.set(row.id, slot);
      const after = [...this.log.children].find((s) => s.dataset.key > key(row));
      this.log.insertBefore(slot, after || null);
      const echo = this.echoes.get(row.id);
      const drawnRow = echo && !row.meta?.echo ? { ...row, meta: { ...row.meta, echo } } : row;
      drawRow(drawnRow, this).then((el) => {
        slot.replaceChildren(el);
        refreshRow(el, this.rows.get(row.id));
        if (!after) this.log.scrollTop = this.log.scrollHeight;
      });
    }
    this.refreshState();
  }

  remove(id) {
    this.rows.delete(id);
    this.slots.get(id)?.remove();
    this.slots.delete(id);
    this.refreshState();
  }

  /** Typing dots and the Stop square, from the rows as they are now. */
  refreshState() {
    let lastMine = null;
    let lastTheirs = null;
    let running = false;
    for (const row of this.rows.values()) {
      if (row.sender === "user" && row.kind !== "control") {
        if (!lastMine || row.created_at > lastMine) lastMine = row.created_at;
        if (!row.handled_at) running = true;
      } else if (row.sender === "agent") {
        if (!lastTheirs || row.created_at > lastTheirs) lastTheirs = row.created_at;
      }
    }
    const waiting = lastMine && (!lastTheirs || lastMine > lastTheirs) && Date.now() - Date.parse(lastMine) < TYPING_MS;
    this.typing.hidden = !waiting;
    this.stopButton.hidden = !(running || waiting) || Boolean(this.group);
  }

  async send(text, replyTo) {
    if (!this.group) return this.put(await this.person.say(this.agent, text, this.agents, replyTo));
    if (replyTo) return this.put(await this.person.reply(replyTo, text));
    // To the members it @s (three at most), else to the lead (people/groups.py say).
    const to = namedAt(text, this.group.members).slice(0, MAX_ADDRESSEES).map((a) => a.id);
    const meta = to.length ? { group: { to } } : {};
    this.put(await this.person.insert(this.group.lead, text, "text", meta, this.group.id));
  }

  async insertEvent(body, meta, echo) {
    const row = await this.person.insert(this.agentId, body, "event", meta, this.group?.id);
    if (echo) this.echoes.set(row.id, echo);
    this.put(row);
  }

  async photo(file) {
    this.put(await this.person.photo(this.agentId, file));
  }

  async stop() {
    try {
      this.put(await this.person.stop(this.agentId));
    } catch (error) {
      say(error.message);
    }
  }

  async groupControl(control, guard) {
    const meta = { group: guard ? { control, guard } : { control } };
    const body = control === "stop" ? "[yui] group stop" : `[yui] group continue guard=${guard}`;
    try {
      this.put(await this.person.insert(this.group.lead, body, "text", meta, this.group.id));
    } catch (error) {
      say(error.message);
    }
  }

  replyTo(row) {
    this.composer.quote(row);
  }
}

export function emptyThread(root, words) {
  clear(root, h("p", { class: "empty" }, words));
}
