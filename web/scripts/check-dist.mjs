// Rebuilds the app into a temporary directory and compares it, file by file
// and byte for byte, with the committed web/dist that agwire-web embeds.
// Exit 1 on any difference: the served bundle must be what the sources build.

import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "vite";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const committed = join(root, "dist");
const fresh = mkdtempSync(join(tmpdir(), "agwire-web-dist-"));

function files(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else out.push(relative(dir, path));
    }
  };
  walk(dir);
  return out.sort();
}

try {
  await build({ root, logLevel: "warn", build: { outDir: fresh, emptyOutDir: true } });
  const want = files(fresh);
  const have = files(committed);
  const problems = [];
  for (const f of want) if (!have.includes(f)) problems.push(`missing from web/dist: ${f}`);
  for (const f of have) if (!want.includes(f)) problems.push(`in web/dist but not built: ${f}`);
  for (const f of want.filter((f) => have.includes(f))) {
    if (!readFileSync(join(fresh, f)).equals(readFileSync(join(committed, f)))) problems.push(`differs: ${f}`);
  }
  if (problems.length) {
    console.error(`web/dist is not what the sources build (run \`npm run build\` in web/ and commit dist/):\n  ${problems.join("\n  ")}`);
    process.exitCode = 1;
  } else {
    const js = want.filter((f) => f.endsWith(".js") || f.endsWith(".css") || f.endsWith(".html"));
    const gz = js.reduce((n, f) => n + gzipSync(readFileSync(join(fresh, f)), { level: 9 }).length, 0);
    console.log(`web/dist matches a fresh build (${want.length} files; html+js+css ${(gz / 1024).toFixed(1)} KiB gzipped)`);
  }
} finally {
  rmSync(fresh, { recursive: true, force: true });
}
