// Generates src/generated/ from ../../schemas/*.schema.json (the JSON Schemas the service
// writes from its pydantic models, the single source): one TypeScript file of types per
// schema (json-schema-to-typescript), and schemas.ts with the event schema the client
// validates with. `--check` writes nothing and fails when a generated file differs from
// what the schemas give now (make lint runs it).
import { readFile, readdir, writeFile, mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { compile } from "json-schema-to-typescript";

const here = dirname(fileURLToPath(import.meta.url));
const schemas = join(here, "..", "..", "..", "schemas");
const out = join(here, "..", "src", "generated");
const check = process.argv.includes("--check");
const banner = (name) =>
  `// Generated from schemas/${name} by scripts/generate-types.mjs (npm run types): do not edit.\n`;

async function generated() {
  const files = new Map();
  const names = (await readdir(schemas)).filter((n) => n.endsWith(".schema.json")).sort();
  for (const name of names) {
    const schema = JSON.parse(await readFile(join(schemas, name), "utf8"));
    const types = await compile(schema, schema.title, {
      bannerComment: banner(name),
      additionalProperties: false,
      unreachableDefinitions: false,
      format: true,
      style: { singleQuote: false },
    });
    files.set(name.replace(".schema.json", ".ts"), types);
  }
  const event = await readFile(join(schemas, "internal.event.v2.schema.json"), "utf8");
  files.set(
    "schemas.ts",
    banner("internal.event.v2.schema.json") +
      `export const internalEventV2Schema = ${event.trim()} as const;\n`,
  );
  return files;
}

const files = await generated();
const stale = [];
for (const [name, text] of files) {
  const path = join(out, name);
  if (check) {
    const now = await readFile(path, "utf8").catch(() => null);
    if (now !== text) stale.push(name);
  } else {
    await mkdir(out, { recursive: true });
    await writeFile(path, text);
  }
}
const known = new Set(files.keys());
for (const name of await readdir(out).catch(() => [])) {
  if (!known.has(name)) stale.push(`${name} (no schema gives it: delete it)`);
}
if (stale.length) {
  for (const name of stale) console.error(`stale: clients/typescript/src/generated/${name} (run: make ts-types)`);
  process.exit(1);
}
if (!check) console.log(`wrote ${files.size} files into clients/typescript/src/generated/`);
