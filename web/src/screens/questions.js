// Questions: ask, choose, pick, slide, form, camera, mic. Each answer goes through ctx.answer
// (an event row at once; inside a plan, one step of the plan's answer).
import { fmt, h, list, num, put, str, uid, unitText, words } from "./dom.js";
import { liveAnswer, sending } from "./send.js";

/** The pill, heading and paragraph a question may carry, then the question itself. */
function head(p, fallbackQ, qid) {
  return [
    p.tag ? h("span", { class: "yl-tag" }, str(p.tag)) : null,
    p.title ? h("h3", { class: "yl-title" }, str(p.title)) : null,
    p.body ? words(str(p.body), "yl-body") : null,
    h("p", { class: "yl-q", id: qid }, str(p.q) || fallbackQ),
  ];
}

/** A quiz's verdict under the question, when the agent gave `answer=`. */
function graded(p, box, correct) {
  if (p.answer === undefined) return {};
  let verdict = box.querySelector(".yl-verdict");
  if (!verdict) {
    verdict = h("p", { class: "yl-verdict", role: "status" });
    put(box, verdict);
  }
  verdict.textContent = correct ? "Right." : "Not quite.";
  verdict.classList.toggle("yl-wrong", !correct);
  if (p.why) put(verdict, " ", str(p.why));
  return { correct };
}

function optionButtons(node, ctx, key, fallbackOptions, fallbackQ) {
  const p = node.props;
  const qid = uid("q");
  const box = h("section", { class: "yl-card yl-question", "aria-labelledby": qid });
  put(box, ...head(p, fallbackQ, qid));
  const row = h("div", { class: "yl-options", role: "group", "aria-labelledby": qid });
  const next = liveAnswer();
  const choose = async (choice, button, other = false) => {
    const grade = graded(p, box, str(choice) === str(p.answer));
    const value = next({ [key]: choice, ...grade, ...(other ? { other: true } : {}) });
    if (!value) return;
    const ok = await sending(button, box, () => ctx.answer(node, value));
    if (ok) for (const b of row.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === button));
  };
  const options = list(p.options).length ? list(p.options) : fallbackOptions;
  for (const option of options) {
    const button = h("button", { type: "button", class: "yl-option", "aria-pressed": "false", disabled: p.lock === true }, str(option));
    button.addEventListener("click", () => choose(option, button));
    put(row, button);
  }
  put(box, row);
  if (p.other) put(box, otherField((text, button) => choose(text, button, true), p.lock === true));
  return box;
}

// "Type your own": a text box and its own send button.
function otherField(send, locked) {
  const id = uid("other");
  const input = h("input", { id, type: "text", class: "yl-input", disabled: locked, placeholder: "Type your own" });
  const button = h("button", { type: "button", class: "yl-option", disabled: locked }, "Send");
  const go = () => input.value.trim() && send(input.value.trim(), button);
  button.addEventListener("click", go);
  input.addEventListener("keydown", (e) => e.key === "Enter" && go());
  return h("div", { class: "yl-other" }, h("label", { for: id, class: "yl-sr" }, "Your own answer"), input, button);
}

function ask(node, ctx) {
  return optionButtons(node, ctx, "answer", ["Yes", "No"], "Continue?");
}

function choose(node, ctx) {
  return optionButtons(node, ctx, "choice", [], "Pick one");
}

function pick(node, ctx) {
  const p = node.props;
  const qid = uid("q");
  const box = h("section", { class: "yl-card yl-question", "aria-labelledby": qid });
  put(box, ...head(p, "Pick any", qid));
  const max = num(p.max, Infinity);
  const chosen = [];
  const row = h("div", { class: "yl-options", role: "group", "aria-labelledby": qid });
  const toggle = (option, button) => {
    const at = chosen.indexOf(option);
    if (at >= 0) chosen.splice(at, 1);
    else if (chosen.length < max) chosen.push(option);
    button.setAttribute("aria-pressed", String(chosen.includes(option)));
  };
  for (const option of list(p.options)) {
    const button = h("button", { type: "button", class: "yl-option", "aria-pressed": "false", disabled: p.lock === true }, str(option));
    button.addEventListener("click", () => toggle(option, button));
    put(row, button);
  }
  put(box, row);
  let otherInput = null;
  if (p.other) {
    const id = uid("other");
    otherInput = h("input", { id, type: "text", class: "yl-input", placeholder: "Type your own", disabled: p.lock === true });
    put(box, h("div", { class: "yl-other" }, h("label", { for: id, class: "yl-sr" }, "Your own answer"), otherInput));
  }
  const next = liveAnswer();
  const submit = h("button", { type: "button", class: "yl-primary", disabled: p.lock === true }, str(p.submit) || "Done");
  submit.addEventListener("click", async () => {
    const picked = [...chosen];
    if (otherInput && otherInput.value.trim()) picked.push(otherInput.value.trim());
    const answer = list(p.answer).map(str);
    const correct = answer.length === picked.length && picked.every((x) => answer.includes(str(x)));
    const value = next({ picked, ...graded(p, box, correct) });
    if (value) await sending(submit, box, () => ctx.answer(node, value));
  });
  put(box, h("div", { class: "yl-actions" }, submit));
  return box;
}

function slide(node, ctx) {
  const p = node.props;
  const min = num(p.min, 1);
  const max = num(p.max, 5);
  const step = num(p.step, 1);
  const id = uid("slide");
  const unit = unitText(p.unit);
  const start = num(p.value, min + Math.round((max - min) / 2 / step) * step);
  const input = h("input", { id, type: "range", min, max, step, value: start, class: "yl-range", disabled: p.lock === true });
  const shown = h("output", { for: id, class: "yl-range-value" }, `${fmt(start)}${unit}`);
  const ends = list(p.lo ? [p.lo, p.hi] : []);
  const box = h(
    "section",
    { class: "yl-card yl-question" },
    h("label", { for: id, class: "yl-q" }, str(p.label) || "How much?"),
    h("div", { class: "yl-slide" }, input, shown),
    ends.length ? h("div", { class: "yl-ends", "aria-hidden": "true" }, h("span", {}, str(ends[0])), h("span", {}, str(ends[1]))) : null,
  );
  input.setAttribute("aria-valuetext", `${fmt(start)}${unit}`);
  input.addEventListener("input", () => {
    shown.textContent = `${fmt(Number(input.value))}${unit}`;
    input.setAttribute("aria-valuetext", shown.textContent);
  });
  const next = liveAnswer();
  input.addEventListener("change", () => {
    const value = next({ value: Number(input.value) });
    if (value) sending(null, box, () => ctx.answer(node, value));
  });
  return box;
}

// --- the form ------------------------------------------------------------------------------

const INPUT_TYPES = { email: "email", phone: "tel", date: "date", time: "time", url: "url", number: "number" };

function label(field) {
  return str(field.label) || str(field.key).replace(/_/g, " ");
}

function fieldControl(field, ctx, locked) {
  const id = uid(`f-${field.key}`);
  const type = field.type || "text";
  const common = { id, name: field.key, required: field.required === true, disabled: locked, class: "yl-input" };
  const caption = h("label", { for: id, class: "yl-field-label" }, label(field), field.required ? h("span", { "aria-hidden": "true" }, " *") : null);
  if (type === "choice") {
    const group = h("fieldset", { class: "yl-field yl-choice" }, h("legend", { class: "yl-field-label" }, label(field)));
    list(field.options).forEach((option, i) => {
      const oid = `${id}-${i}`;
      const required = field.required === true && i === 0; // one required radio: pick one
      const radio = h("input", { type: "radio", id: oid, name: field.key, value: str(option), required, disabled: locked });
      put(group, h("span", { class: "yl-radio" }, radio, h("label", { for: oid }, str(option))));
    });
    return { el: group, read: () => group.querySelector("input:checked")?.value ?? "" };
  }
  if (type === "yes") {
    const input = h("input", { ...common, type: "checkbox", class: "yl-check" });
    return { el: h("div", { class: "yl-field yl-yes" }, input, caption), read: () => input.checked };
  }
  if (type === "range") {
    const min = num(field.min, 1);
    const max = num(field.max, 5);
    const input = h("input", { ...common, type: "range", min, max, step: 1, value: Math.round((min + max) / 2), class: "yl-range" });
    const out = h("output", { for: id, class: "yl-range-value" }, String(input.value));
    input.addEventListener("input", () => (out.textContent = input.value));
    return { el: h("div", { class: "yl-field" }, caption, h("div", { class: "yl-slide" }, input, out)), read: () => Number(input.value) };
  }
  if (type === "long" || type === "voice") {
    const input = h("textarea", { ...common, rows: 3, placeholder: type === "voice" ? "Say it or type it" : null });
    return { el: h("div", { class: "yl-field" }, caption, input), read: () => input.value.trim() };
  }
  if (type === "photo") {
    const input = h("input", { ...common, type: "file", accept: "image/*", class: "yl-file" });
    const read = async () => (input.files && input.files[0] ? ctx.storePhoto(input.files[0]) : "");
    return { el: h("div", { class: "yl-field" }, caption, input), read };
  }
  const input = h("input", { ...common, type: INPUT_TYPES[type] || "text", step: type === "number" ? "any" : null });
  const read = () => (type === "number" && input.value !== "" ? Number(input.value) : input.value.trim());
  return { el: h("div", { class: "yl-field" }, caption, input), read };
}

function form(node, ctx) {
  const p = node.props;
  const tid = uid("form");
  const locked = p.lock === true;
  const el = h("form", { class: "yl-card yl-form", "aria-labelledby": tid, novalidate: false });
  put(el, h("h3", { class: "yl-title", id: tid }, str(p.title) || "Form"));
  const fields = list(p.fields).filter((f) => f && typeof f === "object").map((f) => ({ field: f, ...fieldControl(f, ctx, locked) }));
  for (const f of fields) put(el, f.el);
  const submit = h("button", { type: "submit", class: "yl-primary", disabled: locked }, str(p.submit) || "Submit");
  put(el, h("div", { class: "yl-actions" }, submit));
  el.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!el.reportValidity()) return;
    await sending(submit, el, async () => {
      const answers = {};
      for (const f of fields) {
        const value = await f.read();
        if (value !== "" && value !== null && value !== undefined) answers[f.field.key] = value;
      }
      await ctx.answer(node, { form: answers });
    });
  });
  return el;
}

// --- camera and mic --------------------------------------------------------------------------

function camera(node, ctx) {
  const p = node.props;
  const id = uid("camera");
  const input = h("input", { id, type: "file", accept: "image/*", capture: p.facing === "front" ? "user" : "environment", class: "yl-file" });
  const box = h("section", { class: "yl-card yl-camera" }, h("label", { for: id, class: "yl-q" }, str(p.prompt) || "Take a photo"), input);
  let said = null;
  if (p.say) {
    const sid = uid("say");
    said = h("input", { id: sid, type: "text", class: "yl-input", placeholder: "Say something about it" });
    put(box, h("label", { for: sid, class: "yl-sr" }, "Words with the photo"), said);
  }
  const send = h("button", { type: "button", class: "yl-primary" }, "Send photo");
  send.addEventListener("click", () => {
    if (!input.files || !input.files[0]) return input.focus();
    return sending(send, box, async () => {
      const photo = await ctx.storePhoto(input.files[0]);
      await ctx.answer(node, said ? { photo, words: said.value.trim() } : { photo });
    });
  });
  put(box, h("div", { class: "yl-actions" }, send));
  return box;
}

function mic(node, ctx) {
  const p = node.props;
  const id = uid("mic");
  const input = h("textarea", { id, rows: 2, class: "yl-input", placeholder: "Say it or type it", lang: p.lang ? str(p.lang) : null });
  const box = h("section", { class: "yl-card yl-mic" }, h("label", { for: id, class: "yl-q" }, str(p.prompt) || "Tap and talk"), input);
  const send = h("button", { type: "button", class: "yl-primary" }, "Send");
  send.addEventListener("click", () => input.value.trim() && sending(send, box, () => ctx.answer(node, { transcript: input.value.trim() })));
  put(box, h("div", { class: "yl-actions" }, send));
  return box;
}

export const QUESTIONS = { ask, choose, pick, slide, form, camera, mic };
