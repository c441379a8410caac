// Generated from schemas/llmbot.error.v1.schema.json by scripts/generate-types.mjs (npm run types): do not edit.

export type Schema = "llmbot.error.v1";
export type EventId = string;
export type TenantId = string;
export type UserId = string;
export type ConversationId = string;
export type Code = "invalid_event" | "model_error" | "memory_unavailable" | "timeout" | "internal" | "budget_exceeded";
export type Message = string;
export type Attempts = number;
export type CreatedAt = string;

/**
 * A terminal failure of an event, published to the error routing key.
 */
export interface ErrorV1 {
  schema?: Schema;
  event_id: EventId;
  tenant_id: TenantId;
  user_id: UserId;
  conversation_id: ConversationId;
  code: Code;
  message: Message;
  attempts: Attempts;
  created_at: CreatedAt;
}
