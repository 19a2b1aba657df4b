/**
 * Metric labels: the label-set cache, and who a request is (its consumer label).
 *
 * The one label-set cache: a value per label set (a prom-client child, a number cell, or a pair
 * of them), made on first use and then kept. prom-client hashes and validates label values on
 * every `labels()`/`inc(labels)` call; where that happens per request (the request metrics, the
 * Redis operation counters) the child is resolved once here and each later use costs one Map
 * lookup per label value. Label sets are bounded (see specs.ts), so the map is too.
 */

type Node<V> = Map<string, Node<V> | V>;

export class LabelSets<V> {
  /** One level per label, in label order; the last level holds the values. */
  private readonly root: Node<V> = new Map();
  private readonly all: V[] = [];

  /** `make` builds the value of a label set the first time it is asked for. */
  constructor(private readonly make: (...values: string[]) => V) {}

  /**
   * The value of one label set (label values in `labelNames` order). One Map lookup per label
   * with the values as they come (their hashes are cached in the strings): no joined key to
   * build and hash on every call.
   */
  of(...values: string[]): V {
    let node = this.root;
    const last = values.length - 1;
    for (let index = 0; index < last; index++) {
      const label = values[index]!;
      let next = node.get(label) as Node<V> | undefined;
      if (next === undefined) {
        next = new Map();
        node.set(label, next);
      }
      node = next;
    }
    const label = last < 0 ? '' : values[last]!;
    let value = node.get(label) as V | undefined;
    if (value === undefined) {
      value = this.make(...values);
      node.set(label, value);
      this.all.push(value);
    }
    return value;
  }

  /**
   * Forgets every label set whose first value is `first` (a consumer label given up): they are
   * made anew if asked for again. Values are never Maps (the tree's nodes are).
   */
  drop(first: string): void {
    const node = this.root.get(first);
    if (node === undefined) return;
    this.root.delete(first);
    const gone = new Set<V>();
    const collect = (at: Node<V> | V): void => {
      if (at instanceof Map) for (const child of at.values()) collect(child);
      else gone.add(at);
    };
    collect(node);
    const kept = this.all.filter((value) => !gone.has(value));
    this.all.length = 0;
    this.all.push(...kept);
  }

  /** Every value made so far, in the order their label sets were first seen. */
  values(): IterableIterator<V> {
    return this.all.values();
  }
}

/**
 * Who a request is, for the per-consumer metrics and /admin/quota (metrics.consumer_label):
 *   key         the consumer key's configured name (pool requests that carried one)
 *   user_agent  the first product token of the User-Agent ("alpha-bot/1.2 (linux)" is alpha-bot)
 *   none        nobody: no per-consumer series
 * A label grants nothing: consumer keys alone decide pool access. User-Agents are the client's to
 * choose, so their labels are bounded: a safe charset and length, and at most MAX_AGENT_LABELS
 * values at a time, held by the agents with the most requests over the last hour. Labels are
 * handed out first come while there is room, and re-ranked each minute: an agent that stopped
 * (a flood of one-shot agents) gives its label up to one that sends steadily. The others count as
 * "other", empty or garbage ones as "unknown". A label given up is `retired` (its series go).
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
  /** User-Agent labels held now ("other" and "unknown" not counted). */
  readonly agents: number;
  /** Bumped each time labels are retired: compare it to know whether `retired()` has anything. */
  readonly generation: number;
  /** The labels given up since the last call (their series are to be removed). */
  retired(): readonly string[];
}

/** How far back an agent's requests count for its rank, in minutes. */
export const RANK_MINUTES = 60;
const MINUTE_MS = 60_000;
const NONE: readonly string[] = Object.freeze([]);

/**
 * User-Agent labels by rank. Requests are counted per agent in the current minute (a map pruned to
 * its busiest `countedPerMinute` agents whenever it holds twice as many, so a flood of one-shot
 * agents costs bounded memory and work); the last RANK_MINUTES minutes are kept as such counts.
 * At the first request of a new minute the labels go to the `max` agents with the most requests
 * over them (labels kept on ties).
 */
class AgentLabels {
  readonly #max: number;
  readonly #counted: number;
  readonly #now: () => number;
  #minute = Number.NEGATIVE_INFINITY;
  #current = new Map<string, number>();
  /** The past minutes' counts (busiest agents first), oldest first. */
  readonly #past: Array<{ minute: number; counts: ReadonlyArray<readonly [string, number]> }> = [];
  #labels = new Set<string>();
  #retired: string[] = [];
  generation = 0;

  constructor(max: number, now: () => number) {
    this.#max = max;
    this.#counted = Math.max(8, 4 * max);
    this.#now = now;
  }

  get size(): number {
    return this.#labels.size;
  }

  /** The label of a product token (not "unknown" nor "other"): counts the request, then its label or "other". */
  label(token: string): string {
    const minute = Math.floor(this.#now() / MINUTE_MS);
    if (minute !== this.#minute) this.#rank(minute);
    this.#current.set(token, (this.#current.get(token) ?? 0) + 1);
    if (this.#current.size >= 2 * this.#counted) this.#current = new Map(busiest(this.#current, this.#counted));
    if (this.#labels.has(token)) return token;
    if (this.#labels.size >= this.#max) return OTHER_AGENT;
    this.#labels.add(token);
    return token;
  }

  retired(): readonly string[] {
    if (this.#retired.length === 0) return NONE;
    const out = this.#retired;
    this.#retired = [];
    return out;
  }

  /** A new minute: the one that ended joins the past, and the labels go to the busiest agents of the last hour. */
  #rank(minute: number): void {
    if (this.#current.size > 0) this.#past.push({ minute: this.#minute, counts: busiest(this.#current, this.#counted) });
    this.#current = new Map();
    this.#minute = minute;
    while (this.#past.length > 0 && this.#past[0]!.minute <= minute - RANK_MINUTES) this.#past.shift();
    const totals = new Map<string, number>();
    for (const { counts } of this.#past) for (const [token, count] of counts) totals.set(token, (totals.get(token) ?? 0) + count);
    const held = this.#labels;
    const ranked = [...totals].sort(
      ([left, a], [right, b]) => b - a || Number(held.has(right)) - Number(held.has(left)) || (left < right ? -1 : 1),
    );
    const next = new Set(ranked.slice(0, this.#max).map(([token]) => token));
    const before = this.#retired.length;
    for (const token of held) if (!next.has(token)) this.#retired.push(token);
    if (this.#retired.length > before) this.generation++;
    this.#labels = next;
  }
}

/** The `count` busiest entries of a count map, busiest first. */
function busiest(counts: ReadonlyMap<string, number>, count: number): Array<[string, number]> {
  return [...counts].sort(([, a], [, b]) => b - a).slice(0, count);
}

export function createConsumerLabels(mode: ConsumerLabelMode, maxAgents = MAX_AGENT_LABELS, now: () => number = Date.now): ConsumerLabels {
  const agents = new AgentLabels(maxAgents, now);
  return {
    mode,
    of(consumer, userAgent) {
      if (mode === 'key') return consumer;
      if (mode !== 'user_agent') return undefined;
      const token = productToken(userAgent);
      return token === UNKNOWN_AGENT || token === OTHER_AGENT ? token : agents.label(token);
    },
    get agents() {
      return agents.size;
    },
    get generation() {
      return agents.generation;
    },
    retired: () => agents.retired(),
  };
}

/** metrics.consumer_label as configured, or its default: `key` when consumer keys are on, else `none`. */
export function consumerLabelMode(configured: ConsumerLabelMode | undefined, consumerKeys: boolean): ConsumerLabelMode {
  return configured ?? (consumerKeys ? 'key' : 'none');
}
