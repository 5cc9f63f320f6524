// Bundles the page into dist/: main.js and main.css (every stylesheet the scripts import),
// and the HTML copied as it is.
import { build } from "esbuild";
import { cpSync, existsSync, mkdirSync } from "node:fs";

const here = new URL(".", import.meta.url).pathname;

// The screens (web/src/screens/index.js) may not be there yet: the thread then shows words.
const screensOrNothing = {
  name: "screens-or-nothing",
  setup(b) {
    b.onResolve({ filter: /\/screens\/index\.js$/ }, (args) => {
      const path = `${args.resolveDir}/${args.path}`;
      return existsSync(path) ? undefined : { path, namespace: "no-screens" };
    });
    b.onLoad({ filter: /.*/, namespace: "no-screens" }, () => ({ contents: "export {};", loader: "js" }));
  },
};

mkdirSync(`${here}dist`, { recursive: true });
await build({
  entryPoints: [`${here}src/main.js`],
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2020",
  outdir: `${here}dist`,
  logLevel: "warning",
  plugins: [screensOrNothing],
});
cpSync(`${here}src/index.html`, `${here}dist/index.html`);
