// The page: sign in (a one-time link or a password), then the person's agents with presence on
// the side and one thread at a time beside them; on a phone-width window, one or the other.
import "./app.css";
import { h, clear, say } from "./dom.js";
import { connect, passwordForm, redeemLink } from "./session.js";
import { Person } from "./api.js";
import { ThreadView, emptyThread } from "./thread.js";
import { BUILD } from "./rows.js";
import { showControls } from "./controls.js";
import * as panels from "./panels.js";

const PRESENCE_MS = 10000; // presence is read again this often (and when the page is back)
const PRESENCE = { online: "online", asleep: "asleep", not_listening: "not listening", offline: "offline", pending: "not paired yet" };

const root = document.getElementById("app");

class Shell {
  constructor(person) {
    this.person = person;
    this.agents = [];
    this.groups = [];
    this.view = null;
    this.selected = null;
    this.chosen = false;
  }

  mount() {
    this.list = h("ul", { class: "agents", "aria-label": "Your agents" });
    this.groupList = h("ul", { class: "agents", "aria-label": "Your groups" });
    this.main = h("main", { class: "pane", id: "pane" });
    const nav = h("nav", { class: "side", "aria-label": "Agents and groups" },
      h("header", {}, h("h1", {}, "Yui"), h("span", { class: "who" }, this.person.user.user_metadata?.name || "")),
      this.list,
      h("h2", { class: "small" }, "Groups"), this.groupList,
      h("div", { class: "side-buttons" },
        h("button", { type: "button", onclick: () => this.panel((r) => panels.addAgent(r, this.person, () => this.refresh())) }, "Add an agent"),
        h("button", { type: "button", onclick: () => this.panel((r) => panels.newGroup(r, this.person, this.agents, async (id) => { await this.refresh(); this.openGroup(id); })) }, "New group"),
        h("button", { type: "button", onclick: () => this.panel((r) => panels.hosts(r, this.person)) }, "Computers"),
        h("button", { type: "button", onclick: () => this.panel((r) => panels.notifications(r, this.person)) }, "Notifications"),
        h("button", { type: "button", onclick: () => this.panel((r) => panels.account(r, this.person, () => this.deleted())) }, "Account"),
        h("button", { type: "button", onclick: () => this.signOut() }, "Sign out")));
    clear(root, h("div", { class: "shell" }, nav, this.main), h("p", { id: "status", role: "status", class: "status" }));
    emptyThread(this.main, "Pick an agent to talk to.");
    // On a wide window the first agent's thread opens, unless the person already chose something.
    this.refresh().then(() => !this.chosen && this.agents[0] && window.innerWidth > 700 && this.openAgent(this.agents[0].id));
    setInterval(() => this.refresh(), PRESENCE_MS);
    document.addEventListener("visibilitychange", () => document.hidden || this.refresh());
  }

  async refresh() {
    try {
      this.agents = await this.person.agents();
      this.groups = await panels.groups(this.person, this.agents);
    } catch (error) {
      return say(error.message);
    }
    this.drawList();
    if (this.view) this.view.agents = this.agents;
  }

  drawList() {
    clear(this.list, this.agents.map((a) => {
      const presence = PRESENCE[a.presence] || PRESENCE[a.status] || a.presence || a.status;
      return h("li", { "data-agent": a.handle },
        h("button", { type: "button", class: "agent", "aria-current": this.selected === a.id ? "page" : null, onclick: () => this.openAgent(a.id) },
          h("span", { class: `dot ${a.presence || a.status}`, role: "img", "aria-label": presence }),
          h("span", { class: "name" }, a.name), h("span", { class: "presence" }, presence)),
        h("button", { type: "button", class: "link", "aria-label": `Controls of ${a.name}`, onclick: () => this.panel((r) => showControls(r, this.person, a)) }, "Controls"));
    }));
    clear(this.groupList, this.groups.map((g) => h("li", {},
      h("button", { type: "button", class: "agent", "aria-current": this.selected === g.id ? "page" : null, onclick: () => this.openGroup(g.id) },
        h("span", { class: "name" }, g.title), h("span", { class: "presence" }, g.members.map((m) => m.name).join(", "))))));
  }

  close() {
    this.view?.close();
    this.view = null;
    root.classList.remove("reading");
  }

  panel(draw) {
    this.chosen = true;
    this.close();
    this.selected = null;
    this.drawList();
    root.classList.add("reading");
    draw(this.main);
  }

  async openAgent(id) {
    const agent = this.agents.find((a) => a.id === id);
    if (agent) this.openView({ agent }, id);
  }

  async openGroup(id) {
    const group = this.groups.find((g) => g.id === id);
    if (group) this.openView({ group }, id);
  }

  async openView(target, id) {
    this.chosen = true;
    this.close();
    this.selected = id;
    this.drawList();
    root.classList.add("reading");
    this.view = new ThreadView(this.person, { ...target, agents: this.agents });
    clear(this.main, h("button", { type: "button", class: "back link", onclick: () => { this.close(); this.selected = null; this.drawList(); } }, "‹ Agents"), this.view.element());
    await this.view.open();
  }

  /** The account is gone: this browser forgets its session and says so. */
  async deleted() {
    this.close();
    await this.person.db.auth.signOut({ scope: "local" });
    clear(root, h("p", { role: "status" }, "Your account is deleted, with everything of yours on this relay."));
  }

  async signOut() {
    this.close();
    await this.person.db.auth.signOut({ scope: "local" });
    location.reload();
  }
}

async function start() {
  const supabase = await connect();
  const problem = await redeemLink(supabase);
  let { data } = await supabase.auth.getSession();
  if (!data.session) {
    await passwordForm(root, supabase, problem);
    ({ data } = await supabase.auth.getSession());
  }
  const person = new Person(supabase, data.session.user);
  // Bridges gate replies for the oldest build among the person's apps: this page is one.
  if (BUILD) person.call("yui-web", { action: "seen", build: BUILD }).catch((error) => say(error.message));
  const shell = new Shell(person);
  window.yui = shell; // for people poking at it from the console
  shell.mount();
  performance.mark("yui-ready");
}

start().catch((error) => {
  clear(root, h("p", { role: "alert" }, `The page couldn't start: ${error.message}`));
});
