// Generated from schemas/llmbot.memory_job.v1.schema.json by scripts/generate-types.mjs (npm run types): do not edit.

export type Schema = "llmbot.memory_job.v1";
/**
 * Idempotency key of the job.
 */
export type Id = string;
export type Kind = "turn" | "finalize";
export type TenantId = string;
export type UserId = string;
export type ConversationId = string;
/**
 * The conversation's last turn when the job was made.
 */
export type Turn = number;
export type EventId = string | null;
/**
 * Provider-reported prompt tokens of the turn's model call.
 */
export type PromptTokens = number | null;
export type CreatedAt = string;

/**
 * Background work for the memory worker, published to the memory-jobs routing key.
 *
 * ``turn``: a turn was committed (classify its user message, compact evicted turns).
 * ``finalize``: the conversation ended or went idle (summarize the rest, drop working memory).
 * Jobs are hints: the worker reads the truth from Redis, so a job may be repeated or lost
 * without losing or doubling memory.
 */
export interface MemoryJobV1 {
  schema?: Schema;
  id: Id;
  kind: Kind;
  tenant_id: TenantId;
  user_id: UserId;
  conversation_id: ConversationId;
  turn: Turn;
  event_id?: EventId;
  prompt_tokens?: PromptTokens;
  created_at: CreatedAt;
}
