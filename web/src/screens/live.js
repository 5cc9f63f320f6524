// What lives on across an agent's replies: a patch (`~card cta=Go`, `~timer 30`) in a later
// reply changes the newest matching component already on screen, and `save name` keeps a
// screen that a later `show name` brings back fresh.
//
// Rows are drawn concurrently and in any order, so patches are kept and settled again each
// time something is drawn: every patch goes to the newest component before it (by the row's
// time) whose id or preset it names, and a component whose props changed is drawn again.

const threads = new Map();

function thread(row) {
  const key = row.thread_id || row.agent_id;
  if (!threads.has(key)) threads.set(key, { parts: new Map(), patches: new Map(), saved: new Map() });
  return threads.get(key);
}

/** Where a row sits in its thread, as a sortable key. */
export function at(row) {
  return `${row.created_at || ""}|${row.id}`;
}

/** A top-level component drawn for `row`: patches of later rows may reach it. */
export function remember(row, node, el, redraw) {
  const parts = thread(row).parts;
  parts.set(`${row.id}/${node.id}`, { at: at(row), node, base: { ...node.props }, el, redraw, shown: JSON.stringify(node.props) });
}

/** A patch in `row` that found nothing to change in its own reply. */
export function patchLater(row, index, op) {
  thread(row).patches.set(`${row.id}/${index}`, { at: at(row), target: op.target, props: op.props || {} });
}

/** Keep a reply's components under a name (`save name`). */
export function save(row, name, place, ops) {
  thread(row).saved.set(name, { at: at(row), place, ops });
}

/** What was saved under `name` before this row (`{place, ops}`), or null. */
export function saved(row, name) {
  const found = thread(row).saved.get(name);
  return found && found.at < at(row) ? found : null;
}

/** Apply every patch to the newest component it names, and draw again what changed. */
export function settle(row) {
  const { parts, patches } = thread(row);
  const entries = [...parts.values()].sort((a, b) => (a.at < b.at ? -1 : 1));
  const props = new Map(entries.map((e) => [e, { ...e.base }]));
  for (const patch of [...patches.values()].sort((a, b) => (a.at < b.at ? -1 : 1))) {
    const before = entries.filter((e) => e.at < patch.at);
    const target = before.findLast((e) => e.node.id === patch.target) || before.findLast((e) => e.node.preset === patch.target);
    if (target) Object.assign(props.get(target), patch.props);
  }
  for (const entry of entries) {
    const next = JSON.stringify(props.get(entry));
    if (next === entry.shown || !entry.el.parentNode) continue;
    entry.node.props = props.get(entry);
    entry.shown = next;
    const fresh = entry.redraw(entry.node);
    entry.el.replaceWith(fresh);
    entry.el = fresh;
  }
}

const AUTO_ID = /^[nc]\d+$/;
const PAGE = /^([2-9]|1[0-2])$/;

/** Ids that last into `row` (`{id: preset}`): an agent's own @id on a page (screens 2..12)
 * of an earlier reply, which a later reply may patch by that id. */
export function known(row) {
  const lasting = {};
  const parts = [...thread(row).parts.values()].filter((e) => e.at < at(row)).sort((a, b) => (a.at < b.at ? -1 : 1));
  for (const { node } of parts) if (!AUTO_ID.test(node.id) && PAGE.test(node.screen || "")) lasting[node.id] = node.preset;
  return lasting;
}

/** Draw a thread's rows one after another (in the order they are asked for), so an earlier
 * reply is remembered before a later one asks which ids last. */
export function inTurn(row, draw) {
  const key = row.thread_id || row.agent_id;
  const mine = (turns.get(key) || Promise.resolve()).then(draw);
  turns.set(key, mine.catch(() => null));
  return mine;
}

const turns = new Map();
