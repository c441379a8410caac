// Where the test's service listens: set by tests/e2e/test_typescript_client.py, which runs
// these tests beside a running llm-bot (its own queue names) and a scripted fake model.
import type { ClientOptions } from "../src/index.js";

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests with make test-ts`);
  return value;
}

export const amqpUrl = required("LLMBOT_TEST_AMQP_URL");
export const options: ClientOptions = {
  exchange: required("LLMBOT_TEST_EXCHANGE"),
  routingKey: required("LLMBOT_TEST_ROUTING_KEY"),
  timeoutMs: 30000,
};

let counter = 0;
export function ids(): { tenant: string; user: string; conversation: string } {
  counter += 1;
  const run = `${process.pid}-${counter}`;
  return { tenant: "tts", user: `u-${run}`, conversation: `c-${run}` };
}
