// Generated from schemas/candidate.v1.schema.json by scripts/generate-types.mjs (npm run types): do not edit.

export type Schema = "candidate.v1";
/**
 * 'cand_' + event id + '.' + 16 hex digits of SHA-256 over tenant and user: a redelivery republishes the same id, and the same event id in two tenants or users (two distinct events) gives two ids.
 */
export type Id = string;
export type EventId = string;
export type TenantId = string;
export type UserId = string;
export type ConversationId = string;
/**
 * 1-based turn number in the conversation.
 */
export type Turn = number;
/**
 * text: a reply; tool_call: the model asks for tools (tool_calls), the turn continues when each call's tool.result arrives.
 */
export type Kind = "text" | "tool_call";
export type Status = "proposed";
export type Text = string;
/**
 * With kind tool_call: the calls to run, each answered by a tool.result.
 */
export type ToolCalls = CandidateToolCall[] | null;
/**
 * The call's id: the tool.result's tool.tool_call_id.
 */
export type Id1 = string;
/**
 * The function's name.
 */
export type Name = string;
/**
 * The arguments as the model gave them (a JSON string).
 */
export type Arguments = string;
export type CreatedAt = string;
export type Model = string;
export type InputTokens = number;
export type OutputTokens = number;
/**
 * Of input_tokens, those the provider served from its prompt cache (0 when it reports none).
 */
export type CachedInputTokens = number;
/**
 * Messages of the window sent to the model.
 */
export type WindowMessages = number;
/**
 * Whether a rolling summary was in context.
 */
export type Summary = boolean;
export type LongTermItems = number;
/**
 * Estimated tokens of the assembled context.
 */
export type ContextTokens = number;
/**
 * Items retrieval recalled into the prompt (the memory message's `recalled`).
 */
export type RecalledItems = number;
/**
 * The current message was shortened to fit the input budget.
 */
export type Shortened = boolean;

/**
 * A proposed reply, published to the candidate routing key.
 */
export interface CandidateV1 {
  schema?: Schema;
  id: Id;
  event_id: EventId;
  tenant_id: TenantId;
  user_id: UserId;
  conversation_id: ConversationId;
  turn: Turn;
  kind?: Kind;
  status?: Status;
  text: Text;
  tool_calls?: ToolCalls;
  created_at: CreatedAt;
  model: Model;
  usage: CandidateUsage;
  memory: CandidateMemory;
}
/**
 * One call the model asked for: run it, publish its ``tool.result``.
 */
export interface CandidateToolCall {
  id: Id1;
  name: Name;
  arguments: Arguments;
}
export interface CandidateUsage {
  input_tokens: InputTokens;
  output_tokens: OutputTokens;
  cached_input_tokens?: CachedInputTokens;
}
export interface CandidateMemory {
  window_messages: WindowMessages;
  summary: Summary;
  long_term_items: LongTermItems;
  context_tokens: ContextTokens;
  recalled_items?: RecalledItems;
  shortened?: Shortened;
}
