// An agent's message as the person sees it: its words, and each ```yui screen drawn.
//
// The page never parses Yui Lines itself: the relay's `yui-screens` function reads the row as
// this person, gates it for this browser's build and answers the ops; a tap asks the same
// function for the event row (`yui app tap`'s own builder), which the shell then writes.
import "./screens.css";
import { h, put, words } from "./dom.js";
import { drawScreen } from "./draw.js";
import * as live from "./live.js";

// The first app build whose presets this page draws: below 414 a flow arrives as a plan of its
// steps, and agent tables and SVG drawings (450, 466) arrive as words.
export const SCREENS_BUILD = 413;
const FUNCTION = "yui-screens";
const FENCE = /^ {0,3}(`{3,}|~{3,})/m;

const ANSWER_MS = 15000; // a relay that doesn't answer by then: the words as they are

async function invoke(supabase, body) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("the relay didn't answer")), ANSWER_MS);
  });
  try {
    const { data, error } = await Promise.race([supabase.functions.invoke(FUNCTION, { body }), late]);
    if (error) throw error;
    return data;
  } finally {
    clearTimeout(timer);
  }
}

/** The element for one agent message row: never empty (its words when nothing draws). */
export function drawMessage(supabase, row, actions = {}) {
  return live.inTurn(row, () => draw(supabase, row, actions));
}

async function draw(supabase, row, actions) {
  // Gate for what both the browser and this module draw: the older of the two builds.
  const build = Number.isInteger(actions.buildNumber) ? Math.min(actions.buildNumber, SCREENS_BUILD) : SCREENS_BUILD;
  const root = h("div", { class: "yl-message", "data-message": row.id });
  if (!FENCE.test(row.body || "")) {
    // No fence, no screen: nothing to ask the relay.
    put(root, words(plainBody(row.body)));
    return root;
  }
  let parts = null;
  try {
    parts = (await invoke(supabase, { action: "screen", message: row.id, build, known: live.known(row) })).parts;
  } catch {
    parts = null; // the relay couldn't answer: the words as they are
  }
  if (!parts || !parts.length) {
    put(root, words(plainBody(row.body)));
    return root;
  }
  parts.forEach((part, at) => {
    if (part.kind === "words") put(root, words(part.text));
    else put(root, drawScreen(part.ops, context(supabase, row, actions, build, { row, part: at })));
  });
  live.settle(row);
  if (!root.childElementCount) put(root, words(plainBody(row.body)));
  return root;
}

function plainBody(body) {
  return String(body || "").replace(/^\[yui\] [^\n]*\n?/gm, "") || " ";
}

// What every drawer gets: how to send an answer, sign a picture, store a photo. `place` is
// the row and part whose screen holds the element (each screen counts its own n1, n2…);
// `extra` rides on every value (a restored screen's `saved: <name>`).
function context(supabase, row, actions, build, place, extra = {}) {
  const ctx = {
    supabase,
    row,
    build,
    /** Write the event row for a tap: the relay builds body, meta and echo. */
    async send(id, preset, value) {
      const sent = { ...value, ...extra };
      const body = { action: "event", message: place.row.id, part: place.part, build, id, preset, value: sent };
      const event = await invoke(supabase, body);
      await actions.insertEvent({ body: event.body, meta: event.meta, echo: event.echo });
      return event;
    },
    /** An answer to a question on the screen: sent at once (a plan collects them instead). */
    answer(node, value) {
      return ctx.send(node.id, node.preset, value);
    },
    /** The context for components a `show name` brought back from an earlier row. */
    restored(savedPlace, name) {
      return context(supabase, row, actions, build, savedPlace, { saved: name });
    },
    /** Where this screen sits: its row and its place among the row's parts. */
    place,
    /** A picture's link: a link to this relay's bucket is signed afresh with the person's
     * own token (a 7-day link may have run out); anything else is used as it is. */
    async media(url) {
      const path = bucketPath(url);
      if (path && actions.signedUrl) {
        try {
          return await actions.signedUrl(path);
        } catch {
          return url;
        }
      }
      return url;
    },
    /** Store a photo the person chose on their side of the thread; its bucket path. */
    async storePhoto(file) {
      const { data } = await supabase.auth.getUser();
      const blob = await asJpeg(file);
      const path = `${data.user.id}/${row.agent_id}/user/${crypto.randomUUID()}.jpg`;
      const { error } = await supabase.storage.from("yui-media").upload(path, blob, { contentType: "image/jpeg" });
      if (error) throw error;
      return path;
    },
  };
  return ctx;
}

function bucketPath(url) {
  try {
    const parsed = new URL(url, window.location.href);
    const m = parsed.pathname.match(/\/storage\/v1\/object\/(?:sign|authenticated|public)\/yui-media\/(.+)$/);
    return m ? decodeURIComponent(m[1]) : null;
  } catch {
    return null;
  }
}

const LONG_SIDE = 2048;

// A photo as the phone sends it: JPEG, at most 2048 px on its long side.
async function asJpeg(file) {
  try {
    const bitmap = await createImageBitmap(file);
    const scale = Math.min(1, LONG_SIDE / Math.max(bitmap.width, bitmap.height));
    const canvas = document.createElement("canvas");
    canvas.width = Math.round(bitmap.width * scale);
    canvas.height = Math.round(bitmap.height * scale);
    canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    return await new Promise((resolve) => canvas.toBlob(resolve, "image/jpeg", 0.9));
  } catch {
    return file;
  }
}
