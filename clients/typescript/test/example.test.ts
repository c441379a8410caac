// The README's example, run as an integrator would (node, importing the package by name):
// it prints a candidate's text, then a streamed reply. Only the broker URL and the
// service's routing names are the test's own.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { amqpUrl, options } from "./env.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

test("the README example round-trips a candidate and a streamed reply", async () => {
  const readme = await readFile(join(root, "README.md"), "utf8");
  const blocks = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  assert.equal(blocks.length, 1, "the README: expected one js example");
  const literal = 'Client.connect("amqp://guest:guest@localhost:5672/")';
  assert.equal(blocks[0]?.split(literal).length, 2, `the example: expected ${literal} once`);
  const program = blocks[0]?.replace(
    literal,
    `Client.connect(${JSON.stringify(amqpUrl)}, ${JSON.stringify(options)})`,
  );
  const path = join(root, "dist", "example-under-test.mjs"); // inside the package: its name resolves
  await writeFile(path, program ?? "");
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [path], { timeout: 60000 });
  assert.equal(stderr, "");
  assert.equal(stdout, "echo: How much is the blue kettle?\necho: And the red one?\n");
});
