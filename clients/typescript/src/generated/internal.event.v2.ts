// Generated from schemas/internal.event.v2.schema.json by scripts/generate-types.mjs (npm run types): do not edit.

/**
 * 'internal.event.v2' (a minor suffix such as '.1' is accepted)
 */
export type Schema = string;
/**
 * Unique per event; the idempotency key.
 */
export type Id = string;
export type Type = "message" | "transcript" | "conversation.end" | "memory.forget" | "tool.call" | "tool.result";
export type TenantId = string;
export type UserId = string;
/**
 * Conversation id; '*' only with type memory.forget (all conversations).
 */
export type ConversationId = string;
export type CreatedAt = string;
export type Platform = string | null;
export type Channel = string | null;
export type Kind = string;
export type Text = string;
export type Lang = string | null;
/**
 * @maxItems 256
 */
export type Annotations = Annotation[];
export type ToolCallId = string;
export type Name = string | null;
export type Arguments = string;
export type Content = string;
/**
 * Functions the model may call for this message (OpenAI function definitions, names unique); its calls come back as a tool_call candidate.
 */
export type Tools = ToolDefinition[] | null;
export type Type1 = "function";
export type Name1 = string;
export type Description = string | null;
/**
 * JSON Schema of the arguments (an object schema).
 */
export type Parameters = {
  [k: string]: unknown;
} | null;
export type Strict = boolean | null;
/**
 * Required for transcript events: the messages to record, in order (larger histories: several events, published in order).
 */
export type Transcript = [TranscriptMessage, ...TranscriptMessage[]] | null;
export type Role = "user" | "assistant";
/**
 * What was said (not blank; the body limit bounds its length).
 */
export type Text1 = string;
/**
 * The speaker's display name (at most 64 characters).
 */
export type Name2 = string | null;
/**
 * When it was said (RFC 3339); the event's created_at by default.
 */
export type CreatedAt1 = string | null;

/**
 * A chat event published to the ingress routing key.
 */
export interface InternalEventV2 {
  schema: Schema;
  id: Id;
  type: Type;
  tenant_id: TenantId;
  user_id: UserId;
  conversation_id: ConversationId;
  created_at: CreatedAt;
  source?: EventSource | null;
  annotations?: Annotations;
  metadata?: Metadata;
  /**
   * Required for tool.call and tool.result events.
   */
  tool?: ToolTrace | null;
  tools?: Tools;
  transcript?: Transcript;
}
/**
 * Where the event came from (informational).
 */
export interface EventSource {
  platform?: Platform;
  channel?: Channel;
}
/**
 * An annotation of the event; those of kind ``prompt`` form the user message.
 */
export interface Annotation {
  kind: Kind;
  text?: Text;
  lang?: Lang;
}
export interface Metadata {
  [k: string]: string | number | boolean | null;
}
/**
 * Payload of ``tool.call`` and ``tool.result`` events.
 */
export interface ToolTrace {
  tool_call_id: ToolCallId;
  name?: Name;
  arguments?: Arguments;
  content?: Content;
}
/**
 * An OpenAI function tool definition, as Chat Completions takes it.
 */
export interface ToolDefinition {
  type?: Type1;
  function: FunctionDefinition;
}
export interface FunctionDefinition {
  name: Name1;
  description?: Description;
  parameters?: Parameters;
  strict?: Strict;
}
/**
 * One message of a ``transcript`` event: something already said, imported as it was.
 */
export interface TranscriptMessage {
  role: Role;
  text: Text1;
  name?: Name2;
  created_at?: CreatedAt1;
}
