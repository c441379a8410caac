// How a reader of CandidateDeltaV1 pieces shows one text (llm_bot/contract/stream_text.py,
// the gateway's and the Python client's rule): deltas are numbered from 0 in each model
// call, and a call retried after a failure midway streams again from 0. A retry that
// repeats what was shown shows nothing until it goes further; one that differs mutes the
// rest; a gap (a lost delta) mutes too. The final candidate is the truth: its text either
// continues what was shown (the rest is returned) or contradicts it (null).
export class StreamText {
  private sent = "";
  private attempt = "";
  private nextSeq = 0;
  private muted = false;

  /** What to show for delta `seq` (possibly ""). */
  delta(seq: number, piece: string): string {
    if (seq === 0) {
      this.attempt = "";
      this.nextSeq = 0;
    }
    if (seq !== this.nextSeq) this.muted = true;
    this.nextSeq = seq + 1;
    this.attempt += piece;
    if (this.muted) return "";
    if (this.attempt.startsWith(this.sent)) {
      const fresh = this.attempt.slice(this.sent.length);
      this.sent = this.attempt;
      return fresh;
    }
    if (!this.sent.startsWith(this.attempt)) this.muted = true;
    return "";
  }

  /** The rest of the final text to show, or null when it contradicts what was shown. */
  final(text: string): string | null {
    if (!text.startsWith(this.sent)) return null;
    const rest = text.slice(this.sent.length);
    this.sent = text;
    return rest;
  }
}
