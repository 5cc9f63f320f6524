// Sending a tap: its control busy while the relay builds the row and the shell writes it.
import { h, put } from "./dom.js";

/** Run `send` with `control` disabled; on failure say so in `box` (a status line). */
export async function sending(control, box, send) {
  let status = box.querySelector(":scope > .yl-status");
  if (!status) {
    status = h("p", { class: "yl-status", role: "status" });
    put(box, status);
  }
  status.textContent = "";
  const focused = control && document.activeElement === control;
  if (control) control.disabled = true;
  try {
    await send();
    return true;
  } catch (err) {
    console.error("yui screens: sending", err);
    status.textContent = "Couldn't send that. Try again.";
    return false;
  } finally {
    if (control) control.disabled = false;
    if (focused) control.focus(); // a busy button loses focus; the keyboard keeps its place
  }
}

/** Keeps an answer live: the same answer again isn't resent, a new one says `changed`. */
export function liveAnswer() {
  let last = null;
  return (value) => {
    const key = JSON.stringify(value);
    if (key === last) return null;
    const out = last === null ? value : { ...value, changed: true };
    last = key;
    return out;
  };
}
