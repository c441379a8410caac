// Client: publish InternalEventV2 events to llm-bot with publisher confirms and read their
// replies (the CandidateV1, its streamed CandidateDeltaV1 pieces, or the ErrorV1), as the
// Python client does (docs/contract.md "Clients"): one connection, one confirm channel that
// publishes the events and consumes their replies on RabbitMQ's direct reply-to. Replies are
// matched by candidate id (event id scoped by tenant and user). A lost connection is
// reconnected to the next node of the URL list, once a second, as the service does; a reply
// awaited then lost its address, so the same event (same id) is published again and the
// service answers the duplicate with the stored reply.
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import amqp from "amqplib";
import type { ConsumeMessage } from "amqplib";
import type { CandidateV1, CandidateToolCall } from "./generated/candidate.v1.js";
import type { CandidateDeltaV1 } from "./generated/candidate.delta.v1.js";
import type { ErrorV1 } from "./generated/llmbot.error.v1.js";
import type { InternalEventV2, ToolDefinition, TranscriptMessage } from "./generated/internal.event.v2.js";
import * as events from "./events.js";
import { BrokerUnavailable, EventFailed, NotDelivered, ReplyTimeout, StreamDiverged } from "./errors.js";
import { StreamText } from "./streamText.js";

export const DEFAULT_AMQP_URL = "amqp://guest:guest@localhost:5672/";
const DIRECT_REPLY_TO = "amq.rabbitmq.reply-to";
const RECONNECT_INTERVAL_MS = 1000;
const PUBLISH_TIMEOUT_MS = 15000;

type Reply = CandidateDeltaV1 | CandidateV1 | ErrorV1;
const LOST = Symbol("connection lost");
type Item = Reply | typeof LOST;

export interface ClientOptions {
  /** The service's LLM_BOT_INGRESS_EXCHANGE (default "internal"). */
  exchange?: string;
  /** The service's LLM_BOT_INGRESS_ROUTING_KEY (default "internal.llmbot.v1"). */
  routingKey?: string;
  /** How long ask and stream wait for a reply, in milliseconds (default 120000). */
  timeoutMs?: number;
}

export interface Ids {
  tenant: string;
  user: string;
  conversation: string;
}

export interface AskOptions extends Ids {
  tools?: ToolDefinition[];
  metadata?: InternalEventV2["metadata"];
  eventId?: string;
  timeoutMs?: number;
}

/** `cand_<event id>.<16 hex of SHA-256 over tenant and user>`: contract/messages.py's rule. */
export function candidateId(tenant: string, user: string, eventId: string): string {
  const scope = createHash("sha256").update(`${tenant}\x1f${user}`).digest("hex").slice(0, 16);
  return `cand_${eventId}.${scope}`;
}

class Inbox {
  private items: Item[] = [];
  private waiter: ((item: Item) => void) | null = null;

  put(item: Item): void {
    if (this.waiter) {
      const wake = this.waiter;
      this.waiter = null;
      wake(item);
    } else {
      this.items.push(item);
    }
  }

  async next(deadline: number, what: string): Promise<Item> {
    const ready = this.items.shift();
    if (ready !== undefined) return ready;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise<Item>((resolve, reject) => {
        this.waiter = resolve;
        timer = setTimeout(() => {
          this.waiter = null;
          reject(new ReplyTimeout(`no reply to ${what} within the timeout: is llm-bot running?`));
        }, Math.max(deadline - Date.now(), 0));
      });
    } finally {
      clearTimeout(timer);
    }
  }
}

export class Client {
  private readonly nodes: string[];
  private current: number;
  private connection: amqp.ChannelModel | null = null;
  private channel: amqp.ConfirmChannel | null = null;
  private closing = false;
  private readonly inboxes = new Map<string, Set<Inbox>>();
  private readonly returned = new Set<string>();
  private readonly answered = new Map<string, Set<string>>();
  private readonly exchange: string;
  private readonly routingKey: string;
  private readonly timeoutMs: number;

  private constructor(url: string, options: ClientOptions) {
    this.nodes = url.split(",").map((node) => node.trim());
    this.current = process.pid % this.nodes.length; // replicas spread over a cluster's nodes
    this.exchange = options.exchange ?? "internal";
    this.routingKey = options.routingKey ?? "internal.llmbot.v1";
    this.timeoutMs = options.timeoutMs ?? 120000;
  }

  /** A connected client (BrokerUnavailable when no node answers). */
  static async connect(url: string = DEFAULT_AMQP_URL, options: ClientOptions = {}): Promise<Client> {
    const client = new Client(url, options);
    let failure: unknown;
    for (let tried = 0; tried < client.nodes.length; tried += 1) {
      try {
        await client.open();
        return client;
      } catch (error) {
        failure = error;
        client.current = (client.current + 1) % client.nodes.length;
      }
    }
    throw new BrokerUnavailable(`RabbitMQ is not reachable: ${String(failure)}`);
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.connection?.close().catch(() => undefined);
    this.connection = null;
  }

  /** Publish `event` (checked first) and wait for the broker's confirm. */
  async publish(event: InternalEventV2): Promise<InternalEventV2> {
    const valid = events.checked(event);
    await this.send(valid, undefined, Date.now() + PUBLISH_TIMEOUT_MS);
    return valid;
  }

  /** Send `text` as the user's message and return its CandidateV1. */
  async ask(text: string, options: AskOptions): Promise<CandidateV1> {
    const event = events.message(text, options, options);
    for await (const reply of this.request(event, options.timeoutMs)) {
      if (reply.schema === "candidate.v1") return reply as CandidateV1;
    }
    throw new Error("unreachable: a request ends with a candidate or an error");
  }

  /** Send `text` and yield the reply's text piece by piece; joined, the candidate's text. */
  async *stream(text: string, options: Omit<AskOptions, "tools">): AsyncGenerator<string> {
    const event = events.message(text, options, options);
    const shown = new StreamText();
    for await (const reply of this.request(event, options.timeoutMs)) {
      if (reply.schema === "candidate.delta.v1") {
        const delta = reply as CandidateDeltaV1;
        const piece = shown.delta(delta.seq, delta.delta);
        if (piece) yield piece;
      } else {
        const candidate = reply as CandidateV1;
        const rest = shown.final(candidate.text);
        if (rest === null) throw new StreamDiverged(candidate);
        if (rest) yield rest;
        return;
      }
    }
  }

  /** The tool.result of `call`, one of `of.tool_calls`; the next candidate once every call of `of` is answered, else null. */
  async answerTool(call: CandidateToolCall, result: unknown, options: { of: CandidateV1; timeoutMs?: number }): Promise<CandidateV1 | null> {
    const { of } = options;
    const event = events.toolResult(call, result, { tenant: of.tenant_id, user: of.user_id, conversation: of.conversation_id });
    const answered = this.answered.get(of.id) ?? new Set<string>();
    answered.add(call.id);
    this.answered.set(of.id, answered);
    if (!(of.tool_calls ?? []).every((c) => answered.has(c.id))) {
      await this.send(event, undefined, Date.now() + PUBLISH_TIMEOUT_MS);
      return null;
    }
    this.answered.delete(of.id);
    for await (const reply of this.request(event, options.timeoutMs)) {
      if (reply.schema === "candidate.v1") return reply as CandidateV1;
    }
    throw new Error("unreachable: a request ends with a candidate or an error");
  }

  /** Import messages that already happened, 500 per event, in order; returns the event ids. */
  async importTranscript(messages: TranscriptMessage[], options: Ids & { eventId?: string }): Promise<string[]> {
    const imported = events.transcripts(messages, options, options.eventId);
    for (const event of imported) await this.send(event, undefined, Date.now() + PUBLISH_TIMEOUT_MS);
    return imported.map((event) => event.id);
  }

  /** Erase the user's memory in the tenant (one conversation, or "*": all); returns the event id. */
  async forget(options: { tenant: string; user: string; conversation?: string }): Promise<string> {
    const event = events.forget(options.tenant, options.user, options.conversation);
    await this.send(event, undefined, Date.now() + PUBLISH_TIMEOUT_MS);
    return event.id;
  }

  private async *request(event: InternalEventV2, timeoutMs?: number): AsyncGenerator<Reply> {
    const key = candidateId(event.tenant_id, event.user_id, event.id);
    const inbox = new Inbox();
    const waiting = this.inboxes.get(key) ?? new Set<Inbox>();
    waiting.add(inbox);
    this.inboxes.set(key, waiting);
    const deadline = Date.now() + (timeoutMs ?? this.timeoutMs);
    try {
      await this.send(event, DIRECT_REPLY_TO, deadline);
      for (;;) {
        const item = await inbox.next(deadline, event.id);
        if (item === LOST) {
          await this.send(event, DIRECT_REPLY_TO, deadline); // the service dedupes: same reply
          continue;
        }
        if (item.schema === "llmbot.error.v1") throw new EventFailed(item as ErrorV1);
        yield item;
        if (item.schema === "candidate.v1") return;
      }
    } finally {
      waiting.delete(inbox);
      if (waiting.size === 0) this.inboxes.delete(key);
    }
  }

  private async send(event: InternalEventV2, replyTo: string | undefined, deadline: number): Promise<void> {
    const body = Buffer.from(JSON.stringify(event));
    for (;;) {
      if (Date.now() >= deadline) throw new BrokerUnavailable(`the broker did not confirm ${event.id} in time (connection down?)`);
      const channel = this.channel;
      if (channel === null) {
        await sleep(RECONNECT_INTERVAL_MS / 4); // reconnecting: look again shortly
        continue;
      }
      try {
        await this.confirmed(channel, event.id, body, replyTo, event.conversation_id);
        return;
      } catch (error) {
        if (error instanceof NotDelivered) throw error;
        await sleep(RECONNECT_INTERVAL_MS / 4); // the channel went: publish again once it is back
      }
    }
  }

  private confirmed(channel: amqp.ConfirmChannel, id: string, body: Buffer, replyTo: string | undefined, conversation: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const options: amqp.Options.Publish = {
        persistent: true,
        mandatory: true,
        contentType: "application/json",
        contentEncoding: "utf-8",
        messageId: id,
        correlationId: conversation,
      };
      if (replyTo) options.replyTo = replyTo;
      try {
        channel.publish(this.exchange, this.routingKey, body, options, (error) => {
          if (this.returned.delete(id)) {
            reject(new NotDelivered(`no queue takes '${this.routingKey}': is llm-bot running (make run, or make dev)?`));
          } else if (error) {
            reject(new NotDelivered("the broker refused the event (the ingress queue is full)"));
          } else {
            resolve();
          }
        });
      } catch (error) {
        reject(error);
      }
    });
  }

  private async open(): Promise<void> {
    const connection = await amqp.connect(this.nodes[this.current] ?? DEFAULT_AMQP_URL, {
      clientProperties: { connection_name: "llm-bot client (TypeScript)" },
    });
    try {
      const channel = await connection.createConfirmChannel();
      await channel.assertExchange(this.exchange, "topic", { durable: true });
      await channel.consume(DIRECT_REPLY_TO, (message) => this.onReply(message), { noAck: true });
      channel.on("return", (message: ConsumeMessage) => {
        const id = message.properties.messageId as string | undefined;
        if (id) this.returned.add(id);
      });
      channel.on("error", () => undefined); // the close that follows is what counts
      connection.on("error", () => undefined);
      connection.on("close", () => {
        if (this.connection === connection) this.onLost(); // once per connection
      });
      this.connection = connection;
      this.channel = channel;
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
  }

  private onLost(): void {
    this.channel = null;
    this.connection = null;
    if (this.closing) return;
    void (async () => {
      for (;;) {
        await sleep(RECONNECT_INTERVAL_MS);
        if (this.closing) return;
        this.current = (this.current + 1) % this.nodes.length;
        try {
          await this.open();
          break;
        } catch {
          // the next node, a second later
        }
      }
      for (const waiting of this.inboxes.values()) for (const inbox of waiting) inbox.put(LOST);
    })();
  }

  private onReply(message: ConsumeMessage | null): void {
    if (message === null) return;
    let reply: Reply;
    try {
      reply = JSON.parse(message.content.toString("utf8")) as Reply;
    } catch {
      return;
    }
    let key: string;
    if (reply.schema === "candidate.delta.v1") key = (reply as CandidateDeltaV1).candidate_id;
    else if (reply.schema === "candidate.v1") key = (reply as CandidateV1).id;
    else if (reply.schema === "llmbot.error.v1") {
      const error = reply as ErrorV1;
      key = candidateId(error.tenant_id, error.user_id, error.event_id);
    } else return;
    for (const inbox of this.inboxes.get(key) ?? []) inbox.put(reply);
  }
}
