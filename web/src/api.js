// What the person reads and writes, through supabase-js: the same rows, in the same shapes, as
// the phone and `yui app` (people/person.py, people/groups.py) write them.
import { newId } from "./dom.js";

export const BUCKET = "yui-media";
export const THREAD_COLUMNS =
  "id,agent_id,thread_id,sender,kind,body,meta,reaction,created_at,delivered_at,handled_at";
const AGENT_COLUMNS =
  "id,name,handle,color,kind,connector_id,connector_name,remote_ref,is_default,status,presence,last_seen_at,controls,created_at";
export const REACTIONS = ["👍", "👎", "🤔", "❤️", "⏳", "🔥"];
const THREAD_ROWS = 200; // a thread opens at its newest rows
const QUOTE_CHARS = 120;
const REACTED_CHARS = 200;
const PHOTO_TYPES = { "image/jpeg": "jpg", "image/png": "png", "image/gif": "gif", "image/webp": "webp", "image/heic": "heic" };

function checked({ data, error }, what) {
  if (error) throw new Error(`${what}: ${error.message || error}`);
  return data;
}

/** A value in a `[yui] …` line, always in quotes. */
function quoted(text) {
  return `"${text.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

/** A message's words without its screens: what a quote of it shows. */
export function words(body) {
  return body
    .replace(/```yui[\s\S]*?(```|$)/g, " ")
    .split("\n")
    .filter((line) => !line.startsWith("[yui] "))
    .join("\n");
}

function firstLine(row) {
  const text = row.meta?.group?.words || row.body;
  const line = words(text).split("\n").map((l) => l.split(/\s+/).join(" ").trim()).find(Boolean);
  return (line || "[screen]").slice(0, QUOTE_CHARS);
}

export class Person {
  constructor(supabase, user) {
    this.db = supabase;
    this.id = user.id;
    this.user = user;
  }

  async agents() {
    return checked(
      await this.db.from("yui_agent_list").select(AGENT_COLUMNS).order("sort").order("created_at"),
      "reading your agents",
    );
  }

  /** The thread's newest rows (from `since` on, when given), oldest first. */
  async thread(agentId, groupId, since = null) {
    let query = this.db.from("yui_messages").select(THREAD_COLUMNS);
    query = groupId ? query.eq("thread_id", groupId) : query.eq("agent_id", agentId).is("thread_id", null);
    if (since) query = query.gte("created_at", since);
    query = query.order("created_at", { ascending: false }).order("id", { ascending: false }).limit(THREAD_ROWS);
    return checked(await query, "reading the thread").reverse();
  }

  /** One row of the person's, written as given; the relay's policies check it. */
  async insert(agentId, body, kind = "text", meta = {}, threadId = null) {
    const row = { id: newId(), user_id: this.id, agent_id: agentId, sender: "user", kind, body, meta };
    if (threadId) row.thread_id = threadId;
    const rows = checked(await this.db.from("yui_messages").insert(row).select(THREAD_COLUMNS), "sending");
    return rows[0];
  }

  /** Words to an agent; an @ of another of the person's agents makes it a mention. */
  async say(agent, text, agents, replyTo = null) {
    if (replyTo) return this.reply(replyTo, text);
    const other = namedAt(text, agents).find((a) => a.id !== agent.id);
    if (!other) return this.insert(agent.id, text);
    const mention = { to: other.id, handle: other.handle, name: other.name };
    return this.insert(agent.id, `[yui] mention to=${other.handle}\n${text}`, "text", { mention });
  }

  async reply(row, text) {
    const from = row.sender === "agent" ? "agent" : "user";
    const quote = firstLine(row);
    const line = `[yui] reply to=${row.id} from=${from} quote=${quoted(quote)}`;
    const meta = { reply_to: { msg: row.id, from, quote } };
    return this.insert(row.agent_id, `${line}\n${text}`, "text", meta, row.thread_id);
  }

  async react(row, emoji) {
    const line = `[yui] react msg=${row.id} emoji=${emoji || "none"}`;
    const quote = words(row.body).split(/\s+/).join(" ").trim().slice(0, REACTED_CHARS);
    const meta = { react: { msg: row.id, emoji } };
    return this.insert(row.agent_id, `${line}\n> ${quote}`, "event", meta, row.thread_id);
  }

  /** A photo from the file picker or the camera, as the phone sends it: stored on the person's
   * side of the thread, then the event row naming it (`[yui] c1 camera photo=<path>`). */
  async photo(agentId, file, elementId = "c1") {
    const ext = PHOTO_TYPES[file.type];
    if (!ext) throw new Error(`${file.name} is not a picture Yui takes (JPEG, PNG, GIF, WebP or HEIC)`);
    const path = `${this.id}/${agentId}/user/${newId()}.${ext}`;
    checked(
      await this.db.storage.from(BUCKET).upload(path, file, { contentType: file.type, upsert: false }),
      "storing the photo",
    );
    const value = { photo: path };
    return this.insert(agentId, `[yui] ${elementId} camera photo=${path}`, "event", { id: elementId, preset: "camera", value });
  }

  async stop(agentId) {
    return this.insert(agentId, "stop", "control", { op: "stop" });
  }

  async signedUrl(path, seconds = 3600) {
    const data = checked(await this.db.storage.from(BUCKET).createSignedUrl(path, seconds), "signing a link");
    return data.signedUrl;
  }

  async call(name, body) {
    const { data, error } = await this.db.functions.invoke(name, { body });
    if (error) {
      let code = error.message;
      try { code = (await error.context.json()).error || code; } catch { /* not JSON */ }
      throw new Error(code);
    }
    return data;
  }

  addAgent(name) {
    return this.call("yui-agents", { action: "create", name, pair: true });
  }

  async hosts() {
    return checked(
      await this.db.from("yui_connectors").select("id,name,kind,created_at,last_seen_at,stopped_at,revoked_at").order("created_at"),
      "reading your computers",
    );
  }

  removeHost(id) {
    return this.call("yui-agents", { action: "connector_revoke", id });
  }

  async notifications() {
    return checked(
      await this.db.from("yui_notifications").select("id,agent_id,message_id,title,body,status,created_at")
        .order("created_at", { ascending: false }).limit(30),
      "reading notifications",
    );
  }
}

/** The agents `text` @s, in order, each once: `@Name` (the longest that fits) or `@handle`
 * (people/person.py named_at). */
export function namedAt(text, agents) {
  const byLength = [...agents].sort((a, b) => b.name.length - a.name.length);
  const found = [];
  const at = /(?<![\w@.])@/g;
  for (let m = at.exec(text); m; m = at.exec(text)) {
    const rest = text.slice(m.index + 1);
    let agent = byLength.find(
      (a) => rest.toLowerCase().startsWith(a.name.toLowerCase()) && !/^[\p{L}\p{N}]/u.test(rest.slice(a.name.length)),
    );
    if (!agent) {
      const handle = /^([a-z0-9][a-z0-9-]{0,31})(?![\w@])/i.exec(rest);
      if (handle) agent = agents.find((a) => a.handle === handle[1].toLowerCase().replace(/-+$/, ""));
    }
    if (agent && !found.includes(agent)) found.push(agent);
  }
  return found;
}
