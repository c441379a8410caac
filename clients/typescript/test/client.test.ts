// The TypeScript client against the real broker and the service (started by
// tests/e2e/test_typescript_client.py with a fake model that asks for every tool offered).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, EventInvalid, NotDelivered, checked, type InternalEventV2 } from "../src/index.js";
import { amqpUrl, ids, options } from "./env.js";

let bot: Client;
before(async () => {
  bot = await Client.connect(amqpUrl, options);
});
after(async () => {
  await bot.close();
});

test("ask returns each caller's own candidate", async () => {
  const mine = ids();
  const [first, second] = await Promise.all([
    bot.ask("How much is the blue kettle?", mine),
    bot.ask("And the red one?", ids()),
  ]);
  assert.equal(first.text, "echo: How much is the blue kettle?");
  assert.equal(second.text, "echo: And the red one?");
  assert.equal(first.user_id, mine.user);
  const third = await bot.ask("Thanks", mine);
  assert.equal(third.turn, 2);
});

test("stream yields the reply piece by piece", async () => {
  const text = "Tell me about the blue kettle and the red one, please";
  const pieces: string[] = [];
  for await (const piece of bot.stream(text, ids())) pieces.push(piece);
  assert.ok(pieces.length > 1, `pieces: ${JSON.stringify(pieces)}`);
  assert.equal(pieces.join(""), `echo: ${text}`);
});

test("a bad event fails in the caller before anything is published", async () => {
  const bad = {
    schema: "internal.event.v2",
    id: "evt with spaces",
    type: "message",
    tenant_id: "tts",
    user_id: "u1",
    conversation_id: "c1",
    created_at: new Date().toISOString(),
  } as InternalEventV2;
  await assert.rejects(bot.publish(bad), (error: unknown) => {
    assert.ok(error instanceof EventInvalid);
    assert.match(error.message, /^schema violation: id: must match pattern/);
    return true;
  });
  assert.throws(() => checked({ ...bad, id: "evt_1", conversation_id: "*" }), /only valid for memory.forget/);
});

test("answerTool returns the next candidate after the round's last result", async () => {
  const tools = [
    { type: "function" as const, function: { name: "lookup_order" } },
    { type: "function" as const, function: { name: "track_parcel" } },
  ];
  const calls = await bot.ask("Where is order 4471?", { ...ids(), tools });
  assert.equal(calls.kind, "tool_call");
  const [first, last] = calls.tool_calls ?? [];
  assert.ok(first && last);
  assert.equal(await bot.answerTool(first, { status: "packed" }, { of: calls }), null);
  const reply = await bot.answerTool(last, "in transit", { of: calls });
  assert.equal(reply?.kind, "text");
  assert.equal(reply?.text, 'the tools said: {"status":"packed"} | in transit');
});

test("importTranscript and forget are confirmed by the broker", async () => {
  const mine = ids();
  const imported = await bot.importTranscript(
    [
      { role: "user", text: "I went to a support group yesterday." },
      { role: "assistant", text: "How was it?" },
    ],
    mine,
  );
  assert.equal(imported.length, 1);
  const reply = await bot.ask("What did I do yesterday?", mine);
  assert.equal(reply.turn, 2); // the imported turn came first
  assert.match(await bot.forget({ tenant: mine.tenant, user: mine.user }), /^evt_/);
});

test("without a queue for the routing key nothing takes the event", async () => {
  const lonely = await Client.connect(amqpUrl, { ...options, routingKey: "internal.nobody.v1" });
  try {
    await assert.rejects(lonely.ask("anyone?", ids()), NotDelivered);
  } finally {
    await lonely.close();
  }
});

test("a lost connection is reconnected and the reply still arrives", async () => {
  // The model takes 0.5 s a reply here: the wire is cut while the service is answering.
  type Wire = { connection: { stream: { destroy(error: Error): void } } };
  const asking = bot.ask("Still there?", ids());
  await new Promise((resolve) => setTimeout(resolve, 200));
  const before = (bot as unknown as { connection: Wire }).connection;
  before.connection.stream.destroy(new Error("cut by the test"));
  const reply = await asking;
  assert.equal(reply.text, "echo: Still there?");
  assert.equal(reply.turn, 1); // asked again with the same id: the stored reply, not a second turn
  const after = (bot as unknown as { connection: Wire | null }).connection;
  assert.ok(after !== null && after !== before, "a new connection");
});
