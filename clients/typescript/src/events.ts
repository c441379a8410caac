// InternalEventV2 events built for the caller and checked against the service's JSON Schema
// (schemas/internal.event.v2.schema.json, via src/generated/schemas.ts) before publishing.
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import type { ErrorObject, ValidateFunction } from "ajv";
import type { InternalEventV2, ToolDefinition, TranscriptMessage } from "./generated/internal.event.v2.js";
import type { CandidateToolCall } from "./generated/candidate.v1.js";
import { internalEventV2Schema } from "./generated/schemas.js";
import { EventInvalid } from "./errors.js";

// Ajv and ajv-formats are CommonJS: loaded as such, so their types stay exact.
const require = createRequire(import.meta.url);
const Ajv2020 = require("ajv/dist/2020.js") as typeof import("ajv/dist/2020.js").default;
const addFormats = require("ajv-formats") as typeof import("ajv-formats").default;

const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats(ajv);
const validate: ValidateFunction = ajv.compile(internalEventV2Schema);

export const MAX_TRANSCRIPT_MESSAGES = 500;

/** Whose conversation an event belongs to. */
export interface Conversation {
  tenant: string;
  user: string;
  conversation: string;
}

export function newEventId(prefix = "evt"): string {
  return `${prefix}_${randomUUID().replaceAll("-", "")}`;
}

/** `event` checked against the schema and the service's rules; EventInvalid says why not. */
export function checked(event: InternalEventV2): InternalEventV2 {
  if (!validate(event)) {
    const errors = validate.errors ?? [];
    const parts = errors.slice(0, 3).map(describe);
    const more = errors.length - parts.length;
    throw new EventInvalid(`schema violation: ${parts.join("; ")}${more > 0 ? ` (+${more} more)` : ""}`);
  }
  if (event.conversation_id === "*" && event.type !== "memory.forget") {
    throw new EventInvalid("schema violation: conversation_id '*' is only valid for memory.forget");
  }
  if ((event.type === "tool.call" || event.type === "tool.result") && !event.tool) {
    throw new EventInvalid(`schema violation: ${event.type} events need a 'tool' object`);
  }
  if (event.type === "transcript" && !event.transcript) {
    throw new EventInvalid("schema violation: transcript events need a 'transcript' list");
  }
  return event;
}

function describe(error: ErrorObject): string {
  const path = error.instancePath.split("/").filter(Boolean).join(".") || "body";
  return `${path}: ${error.message ?? error.keyword}`;
}

function event(kind: InternalEventV2["type"], where: Conversation, fields: Partial<InternalEventV2>, id?: string): InternalEventV2 {
  return checked({
    schema: "internal.event.v2",
    id: id ?? newEventId(),
    type: kind,
    tenant_id: where.tenant,
    user_id: where.user,
    conversation_id: where.conversation,
    created_at: new Date().toISOString(),
    source: { platform: "llm-bot-client-ts" },
    ...fields,
  });
}

export function message(text: string, where: Conversation, options: { tools?: ToolDefinition[]; metadata?: InternalEventV2["metadata"]; eventId?: string } = {}): InternalEventV2 {
  const fields: Partial<InternalEventV2> = { annotations: [{ kind: "prompt", text }] };
  if (options.tools) fields.tools = options.tools;
  if (options.metadata) fields.metadata = options.metadata;
  return event("message", where, fields, options.eventId);
}

export function toolResult(call: CandidateToolCall, result: unknown, where: Conversation): InternalEventV2 {
  const content = typeof result === "string" ? result : JSON.stringify(result);
  return event("tool.result", where, { tool: { tool_call_id: call.id, name: call.name, content } });
}

export function transcripts(messages: TranscriptMessage[], where: Conversation, eventId?: string): InternalEventV2[] {
  const base = eventId ?? newEventId("imp");
  const chunks: TranscriptMessage[][] = [];
  for (let start = 0; start < messages.length; start += MAX_TRANSCRIPT_MESSAGES) {
    chunks.push(messages.slice(start, start + MAX_TRANSCRIPT_MESSAGES));
  }
  if (chunks.length === 0) chunks.push([]);
  return chunks.map((chunk, n) =>
    event("transcript", where, { transcript: chunk as InternalEventV2["transcript"] }, `${base}.${n}`),
  );
}

export function forget(tenant: string, user: string, conversation = "*"): InternalEventV2 {
  return event("memory.forget", { tenant, user, conversation }, {});
}
