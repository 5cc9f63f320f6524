// Where the person writes: words (Enter sends, Shift+Enter is a new line), @mentions completed
// from their agents, a reply quoting a message, and a photo from the file picker or camera.
import { h, say } from "./dom.js";

export class Composer {
  constructor(view) {
    this.view = view;
    this.replying = null;
  }

  element() {
    this.text = h("textarea", {
      id: "say", rows: 1, placeholder: `Message ${this.view.title}`, "aria-label": `Message ${this.view.title}`,
      "aria-autocomplete": "list", "aria-controls": "mentions", autocomplete: "off",
    });
    this.list = h("ul", { id: "mentions", class: "mentions", role: "listbox", hidden: true, "aria-label": "Agents to mention" });
    this.bar = h("div", { class: "replying", hidden: true });
    this.file = h("input", { type: "file", accept: "image/*", capture: "environment", hidden: true, "aria-label": "Choose a photo", id: "photo" });
    this.file.addEventListener("change", () => this.sendPhoto());
    this.text.addEventListener("keydown", (event) => this.key(event));
    this.text.addEventListener("input", () => this.complete());
    const form = h("form", { class: "composer", "aria-label": "Write a message" },
      this.bar, this.list,
      h("div", { class: "compose-line" },
        h("button", { type: "button", class: "icon", "aria-label": "Send a photo", title: "Send a photo", onclick: () => this.file.click() }, "Photo"),
        this.file, this.text,
        h("button", { type: "submit", "aria-label": "Send" }, "Send")),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    return form;
  }

  focus() {
    this.text.focus();
  }

  quote(row) {
    this.replying = row;
    const words = row.meta?.reply_to?.quote || row.body.replace(/```yui[\s\S]*?(```|$)/g, "[screen]").slice(0, 120);
    this.bar.replaceChildren(
      h("span", {}, `Replying to: ${words}`),
      h("button", { type: "button", class: "link", "aria-label": "Cancel the reply", onclick: () => this.unquote() }, "✕"),
    );
    this.bar.hidden = false;
    this.focus();
  }

  unquote() {
    this.replying = null;
    this.bar.hidden = true;
  }

  async send() {
    const text = this.text.value.trim();
    if (!text) return;
    this.text.value = "";
    const replyTo = this.replying;
    this.unquote();
    this.list.hidden = true;
    try {
      await this.view.send(text, replyTo);
    } catch (error) {
      this.text.value = text;
      say(error.message);
    }
  }

  async sendPhoto() {
    const file = this.file.files[0];
    this.file.value = "";
    if (!file) return;
    try {
      await this.view.photo(file);
    } catch (error) {
      say(error.message);
    }
  }

  key(event) {
    if (!this.list.hidden && ["ArrowDown", "ArrowUp", "Tab", "Enter", "Escape"].includes(event.key)) {
      event.preventDefault();
      const options = [...this.list.children];
      let at = options.findIndex((o) => o.getAttribute("aria-selected") === "true");
      if (event.key === "Escape") this.list.hidden = true;
      else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        at = (at + (event.key === "ArrowDown" ? 1 : -1) + options.length) % options.length;
        options.forEach((o, i) => o.setAttribute("aria-selected", String(i === at)));
        this.text.setAttribute("aria-activedescendant", options[at].id);
      } else this.pick(options[Math.max(at, 0)].dataset.name);
      return;
    }
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      this.send();
    }
  }

  /** After an `@` and the start of a name, the person's agents that fit, to pick from. */
  complete() {
    const before = this.text.value.slice(0, this.text.selectionStart);
    const typed = /(?:^|[^\w@.])@([\p{L}\p{N} _-]{0,32})$/u.exec(before);
    const agents = this.view.group ? this.view.group.members : this.view.agents;
    const start = typed ? typed[1].toLowerCase() : null;
    const fits = start === null ? [] : agents.filter(
      (a) => a.name.toLowerCase().startsWith(start) || a.handle.startsWith(start),
    );
    this.list.replaceChildren(...fits.slice(0, 6).map((a, i) =>
      h("li", { id: `mention-${a.id}`, role: "option", "aria-selected": String(i === 0), "data-name": a.name,
        onmousedown: (event) => { event.preventDefault(); this.pick(a.name); } }, `${a.name} @${a.handle}`)));
    this.list.hidden = fits.length === 0;
  }

  pick(name) {
    const at = this.text.selectionStart;
    const before = this.text.value.slice(0, at).replace(/@[^@]*$/, `@${name} `);
    this.text.value = before + this.text.value.slice(at);
    this.text.selectionStart = this.text.selectionEnd = before.length;
    this.list.hidden = true;
    this.text.removeAttribute("aria-activedescendant");
    this.focus();
  }
}
