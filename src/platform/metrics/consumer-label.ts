/**
 * Who a request is, for the per-consumer metrics and /admin/quota (metrics.consumer_label):
 *   key         the consumer key's configured name (pool requests that carried one)
 *   user_agent  the first product token of the User-Agent ("alpha-bot/1.2 (linux)" is alpha-bot)
 *   none        nobody: no per-consumer series
 * A label grants nothing: consumer keys alone decide pool access. User-Agents are the client's to
 * choose, so their labels are bounded: a safe charset and length, and at most MAX_AGENT_LABELS
 * distinct values per instance; later ones count as "other", empty or garbage ones as "unknown".
 */
export type ConsumerLabelMode = 'key' | 'user_agent' | 'none';

export const MAX_AGENT_LABELS = 50;
export const OTHER_AGENT = 'other';
export const UNKNOWN_AGENT = 'unknown';
const MAX_LABEL_CHARS = 40;
/** Only this much of a User-Agent is read (a product token is short; the header may not be). */
const READ_CHARS = 128;

/**
 * The first product token of a User-Agent (RFC 9110 section 10.1.5), sanitised: letters, digits,
 * ".", "_" and "-" only, at most 40 characters, starting with a letter or digit; else "unknown".
 */
export function productToken(userAgent: string | readonly string[] | undefined): string {
  const value = Array.isArray(userAgent) ? userAgent[0] : userAgent;
  if (typeof value !== 'string') return UNKNOWN_AGENT;
  const head = value.slice(0, READ_CHARS).trimStart();
  const end = head.search(/[\s/(;,]/);
  const token = (end < 0 ? head : head.slice(0, end)).replace(/[^A-Za-z0-9._-]/g, '').slice(0, MAX_LABEL_CHARS);
  return /^[A-Za-z0-9]/.test(token) ? token : UNKNOWN_AGENT;
}

export interface ConsumerLabels {
  readonly mode: ConsumerLabelMode;
  /**
   * The label of a routed request: `consumer` is its consumer key's name (a pool request with a
   * key), `userAgent` its User-Agent header. undefined: no per-consumer label.
   */
  of(consumer: string | undefined, userAgent: string | readonly string[] | undefined): string | undefined;
  /** Distinct User-Agent labels handed out so far ("other" and "unknown" not counted). */
  readonly agents: number;
}

export function createConsumerLabels(mode: ConsumerLabelMode, maxAgents = MAX_AGENT_LABELS): ConsumerLabels {
  const seen = new Set<string>();
  const agentLabel = (userAgent: string | readonly string[] | undefined): string => {
    const token = productToken(userAgent);
    if (token === UNKNOWN_AGENT || token === OTHER_AGENT || seen.has(token)) return token;
    if (seen.size >= maxAgents) return OTHER_AGENT;
    seen.add(token);
    return token;
  };
  return {
    mode,
    of(consumer, userAgent) {
      if (mode === 'key') return consumer;
      if (mode === 'user_agent') return agentLabel(userAgent);
      return undefined;
    },
    get agents() {
      return seen.size;
    },
  };
}

/** metrics.consumer_label as configured, or its default: `key` when consumer keys are on, else `none`. */
export function consumerLabelMode(configured: ConsumerLabelMode | undefined, consumerKeys: boolean): ConsumerLabelMode {
  return configured ?? (consumerKeys ? 'key' : 'none');
}
