# proves: Node's file system API works as build tools use it: recursive
# mkdir, writes through streams, rename across directories, hard and symbolic
# links, realpath, fs.watch (inotify) events, copyFile, cp -r, rm -r, and
# worker threads and a child process writing in the same tree.
set -eux
cat > fs.mjs <<'JS'
import fs from "node:fs/promises";
import { createWriteStream, watch } from "node:fs";
import { once } from "node:events";
import { execFileSync } from "node:child_process";
import { Worker } from "node:worker_threads";
import assert from "node:assert/strict";

await fs.mkdir("dist/a/b/c", { recursive: true });
const s = createWriteStream("dist/a/b/c/big.txt");
for (let i = 0; i < 10000; i++) s.write(`line ${i}\n`);
s.end();
await once(s, "finish");
await fs.rename("dist/a/b/c/big.txt", "dist/big.txt");
await fs.link("dist/big.txt", "dist/a/hard.txt");
await fs.symlink("../big.txt", "dist/a/link.txt");
assert.equal(await fs.realpath("dist/a/link.txt"), process.cwd() + "/dist/big.txt");
assert.equal((await fs.stat("dist/a/hard.txt")).nlink, 2);
await fs.copyFile("dist/big.txt", "dist/copy.txt");
await fs.cp("dist/a", "dist/a-copy", { recursive: true });
await fs.mkdir("src");
const events = [];
const w = watch("src", (ev, name) => events.push(`${ev}:${name}`));
await fs.writeFile("src/index.js", "export default 1;\n");
await fs.rename("src/index.js", "src/main.js");
const seen = () => events.some((e) => e.endsWith(":index.js")) && events.some((e) => e.endsWith(":main.js"));
for (let i = 0; i < 6000 && !seen(); i++) await new Promise((r) => setTimeout(r, 10));
w.close();
assert.ok(seen(), events.join(" "));
const worker = new Worker(`require("node:fs").writeFileSync("dist/from-worker", "w")`, { eval: true });
await once(worker, "exit");
execFileSync(process.execPath, ["-e", `require("node:fs").appendFileSync("dist/from-worker", "c")`]);
assert.equal(await fs.readFile("dist/from-worker", "utf8"), "wc");
await fs.rm("dist/a-copy", { recursive: true });
const tmp = await fs.mkdtemp("/tmp/build-");
await fs.writeFile(`${tmp}/x`, "x");
await fs.rm(tmp, { recursive: true });
console.log("node fs: ok");
JS
node fs.mjs
