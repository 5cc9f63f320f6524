// Signing in: a one-time link (`yui app web`) or an e-mail address and a password (/auth/v1),
// both ending in a supabase-js session the page keeps in this browser's storage.
import { createClient } from "@supabase/supabase-js";
import { h, clear } from "./dom.js";

/** The relay's client for this page: the same origin serves the API. */
export async function connect() {
  const answer = await fetch("config.json", { cache: "no-store" });
  const config = await answer.json();
  return createClient(location.origin, config.anon_key, {
    auth: { storageKey: "yui-web", persistSession: true, autoRefreshToken: true, detectSessionInUrl: false },
  });
}

/** Trade a `#signin=` secret in the address for a session, once; the secret leaves the
 * address (and the history) before anything else happens. */
export async function redeemLink(supabase) {
  const found = /(?:^#|&)signin=([^&]+)/.exec(location.hash);
  if (!found) return null;
  const secret = decodeURIComponent(found[1]);
  history.replaceState(null, "", location.pathname + location.search);
  const { data, error } = await supabase.functions.invoke("yui-web", {
    body: { action: "redeem", secret },
  });
  if (error || !data?.access_token) return "This sign-in link has been used or has expired: make another with `yui app web`.";
  const set = await supabase.auth.setSession({
    access_token: data.access_token,
    refresh_token: data.refresh_token,
  });
  return set.error ? `Signing in failed: ${set.error.message}` : null;
}

/** The password form; resolves once signed in. */
export function passwordForm(root, supabase, note) {
  return new Promise((done) => {
    const email = h("input", { id: "email", type: "email", autocomplete: "username", required: true });
    const password = h("input", {
      id: "password", type: "password", autocomplete: "current-password", required: true,
    });
    const problem = h("p", { class: "problem", role: "alert" }, note || "");
    const form = h(
      "form",
      { class: "signin", "aria-label": "Sign in" },
      h("h1", {}, "Yui"),
      h("p", {}, "Sign in with the e-mail address and password set by `yui app set-password`, or open a link from `yui app web`."),
      h("label", { for: "email" }, "E-mail address"), email,
      h("label", { for: "password" }, "Password"), password,
      h("button", { type: "submit" }, "Sign in"),
      problem,
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      problem.textContent = "";
      const { error } = await supabase.auth.signInWithPassword({
        email: email.value, password: password.value,
      });
      if (error) problem.textContent = error.message;
      else done();
    });
    clear(root, form);
    email.focus();
    performance.mark("yui-ready"); // the page is usable: `make bench` times this
  });
}
