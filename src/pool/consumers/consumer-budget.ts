/**
 * The fair-share gate between consumers (consumer keys on). Before a pool token is acquired for a
 * consumer's request, `admit` takes one of the consumer's concurrency slots (max_concurrency; the
 * request waits for one, up to the pool's queue timeout), counts the request's unit in the
 * ledger (consumer-ledger.ts: local, or shared through Redis) and asks fair-share.ts whether the
 * consumer may spend it. A refused request is answered 429 with its own Retry-After while the
 * other consumers go on; an admitted one gives its unit back only when nothing went upstream. A
 * request that went upstream keeps it whatever the answer (a 304 is free of quota, not of the
 * token's secondary-limit points), and each further upstream request it sent (a retry) counts one more.
 *
 * Consumer names (operator-chosen, bounded) are all this module reports; never a key.
 */
import type { Config } from '../../platform/config/schema.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { RedisConnection } from '../../platform/redis/connection.js';
import { createLedger, type Counted, type Ledger, type LedgerMode } from './consumer-ledger.js';
import { decide, hourOf, queueBounds, standingOf, weightOf, windowOf, type ShareInput, type Standing } from '../rules/fair-share.js';
import { resourceNamed, type Resource } from '../rules/rate-limit.js';
import type { ConsumerRefusal, PoolRateLimit } from '../rules/types.js';

export interface ConsumerLimits {
  readonly name: string;
  readonly weight: number;
  /** Upstream requests per clock hour, every resource; null: no cap. */
  readonly maxPerHour: number | null;
  /** Requests in flight on the pool at once; null: no cap. */
  readonly maxConcurrency: number | null;
  /** An OIDC issuer's account: the share every name its tokens carry spends from. */
  readonly oidcIssuer?: boolean;
}

/** What the pool holds of one resource: its quota over a window, what is left, its next reset (epoch s). */
export type PoolFigures = (resource: Resource) => Pick<PoolRateLimit, 'limit' | 'remaining' | 'reset'> | undefined;

/** What an admitted request did: the upstream requests it sent (each counts), and whether it spent quota (the quota metric). */
export interface Outcome {
  readonly upstreamRequests: number;
  readonly spent: boolean;
}

export type Admission =
  | { kind: 'admitted'; weight: number; settle(outcome: Outcome): void }
  | { kind: 'refused'; reason: ConsumerRefusal; retryAfterSeconds: number };

/** What the request path needs: may this consumer spend a unit of this resource now? */
export interface ConsumerGate {
  admit(consumer: string, resource: Resource): Promise<Admission>;
  /** An admitted request the pool refused for its consumer (the points left are owed to others): counted as the gate's own refusals. */
  refused(consumer: string, reason: ConsumerRefusal): void;
}

export interface ConsumerEvents {
  refused?(consumer: string, reason: ConsumerRefusal): void;
  settled?(consumer: string, resource: Resource, outcome: Outcome): void;
}

export interface ConsumerBudgetSettings {
  readonly consumers: readonly ConsumerLimits[];
  readonly reserveFraction: number;
  /** How long a request may wait for one of its consumer's concurrency slots (pool.queue_timeout_ms). */
  readonly queueTimeoutMs: number;
  /** pool.max_queue: split by weight, it bounds how many of each consumer's requests wait for a slot (fair-share.ts `queueBounds`). */
  readonly maxQueue: number;
  readonly figures: PoolFigures;
  /** Live replicas (the token budget's count): an outage's local allowance is 1/N. */
  readonly replicas: () => number;
  /** Without Redis, the part of each share this process counts alone (1/workers in a cluster worker); default 1. */
  readonly localPart?: number | undefined;
  /** Shared counters across replicas; undefined: this process's own. */
  readonly redis?: RedisConnection | undefined;
  readonly logger: Logger;
  readonly events?: ConsumerEvents;
  readonly now?: () => number;
}

/** One consumer as /admin/consumers shows it (numbers of the current windows). */
export interface ConsumerStanding {
  name: string;
  weight: number;
  max_per_hour: number | null;
  max_concurrency: number | null;
  in_flight: number;
  waiting: number;
  spent_this_hour: number;
  resources: Record<string, Standing & { window_reset: number }>;
}

export interface ConsumersReport {
  budget: LedgerMode;
  reserve_fraction: number;
  consumers: ConsumerStanding[];
  /** The accounts that are OIDC issuers (consumers.oidc[].name). */
  oidc_issuers: string[];
}

export interface ConsumerBudget extends ConsumerGate {
  report(): ConsumersReport;
  close(): void;
}

interface Slots {
  inFlight: number;
  readonly waiting: Array<{ answer(granted: boolean): void; timer: NodeJS.Timeout }>;
}

/** Per-consumer concurrency slots (max_concurrency): a wait in arrival order, bounded per consumer. */
function createSlots(settings: ConsumerBudgetSettings, limits: ReadonlyMap<string, ConsumerLimits>, weights: ReadonlyMap<string, number>) {
  const byName = new Map<string, Slots>();
  const bound = queueBounds(settings.maxQueue, weights);
  const slotsOf = (consumer: string): Slots => {
    let slots = byName.get(consumer);
    if (slots === undefined) {
      slots = { inFlight: 0, waiting: [] };
      byName.set(consumer, slots);
    }
    return slots;
  };
  return {
    /** Resolves true with a slot taken, false when none freed up in time (or too many wait). */
    take(consumer: string): Promise<boolean> {
      const cap = limits.get(consumer)?.maxConcurrency ?? null;
      const slots = slotsOf(consumer);
      if (cap === null || slots.inFlight < cap) {
        slots.inFlight++;
        return Promise.resolve(true);
      }
      if (slots.waiting.length >= bound(consumer) || settings.queueTimeoutMs === 0) return Promise.resolve(false);
      return new Promise<boolean>((resolve) => {
        const waiter = {
          answer: (granted: boolean) => {
            clearTimeout(waiter.timer);
            resolve(granted);
          },
          timer: setTimeout(() => {
            const index = slots.waiting.indexOf(waiter);
            if (index >= 0) slots.waiting.splice(index, 1);
            resolve(false);
          }, settings.queueTimeoutMs),
        };
        waiter.timer.unref();
        slots.waiting.push(waiter);
      });
    },
    /** Hands the slot to the consumer's next waiter, or frees it. */
    release(consumer: string): void {
      const slots = slotsOf(consumer);
      const next = slots.waiting.shift();
      if (next === undefined) {
        slots.inFlight = Math.max(0, slots.inFlight - 1);
        return;
      }
      next.answer(true);
    },
    of: (consumer: string): { inFlight: number; waiting: number } => {
      const slots = byName.get(consumer);
      return { inFlight: slots?.inFlight ?? 0, waiting: slots?.waiting.length ?? 0 };
    },
    close(): void {
      for (const slots of byName.values()) for (const waiter of slots.waiting.splice(0)) waiter.answer(false);
    },
  };
}

/** The rule's input for one consumer's unit: what was counted, without that unit, against the pool's figures. */
function shareInput(
  settings: ConsumerBudgetSettings,
  weights: ReadonlyMap<string, number>,
  limits: ConsumerLimits | undefined,
  counted: Counted,
  consumer: string,
  resource: Resource,
  nowMs: number,
): ShareInput {
  const figures = settings.figures(resource);
  const spent = new Map(counted.spent);
  spent.set(consumer, Math.max(0, (spent.get(consumer) ?? 1) - 1));
  const cap = limits?.maxPerHour ?? null;
  return {
    consumer,
    weights,
    reserveFraction: settings.reserveFraction,
    quota: (figures?.limit ?? 0) * counted.part,
    poolRemaining: figures?.remaining ?? 0,
    poolResetMs: figures === undefined ? undefined : figures.reset * 1000,
    spent,
    windowEndMs: counted.window.endMs,
    hourly: cap === null ? undefined : { cap: cap * counted.part, spent: Math.max(0, counted.hourSpent - 1), endMs: hourOf(nowMs).endMs },
    nowMs,
  };
}

export function createConsumerBudget(settings: ConsumerBudgetSettings): ConsumerBudget {
  const now = settings.now ?? Date.now;
  const events = settings.events ?? {};
  const limits = new Map(settings.consumers.map((limit) => [limit.name, limit]));
  const weights = new Map(settings.consumers.map((limit) => [limit.name, weightOf(limit.weight)]));
  const slots = createSlots(settings, limits, weights);
  const ledger: Ledger = createLedger({
    consumers: settings.consumers.map((limit) => limit.name),
    replicas: settings.replicas,
    localPart: settings.localPart,
    redis: settings.redis,
    logger: settings.logger,
  });

  const admit = async (consumer: string, resource: Resource): Promise<Admission> => {
    if (!(await slots.take(consumer))) {
      events.refused?.(consumer, 'max_concurrency');
      return { kind: 'refused', reason: 'max_concurrency', retryAfterSeconds: 1 };
    }
    const at = now();
    const counted = await ledger.count(consumer, resource, at);
    const decision = decide(shareInput(settings, weights, limits.get(consumer), counted, consumer, resource, at));
    if (decision.kind === 'refuse') {
      counted.refund();
      slots.release(consumer);
      events.refused?.(consumer, decision.reason);
      return { kind: 'refused', reason: decision.reason, retryAfterSeconds: decision.retryAfterSeconds };
    }
    let done = false;
    return {
      kind: 'admitted',
      weight: weights.get(consumer) ?? 1,
      settle(outcome) {
        if (done) return;
        done = true;
        const sent = Number.isFinite(outcome.upstreamRequests) ? Math.max(0, Math.floor(outcome.upstreamRequests)) : 1;
        if (sent === 0) counted.refund();
        else if (sent > 1) counted.add(sent - 1);
        slots.release(consumer);
        events.settled?.(consumer, resource, outcome);
      },
    };
  };

  const standing = (limit: ConsumerLimits, at: number): ConsumerStanding => {
    const resources: ConsumerStanding['resources'] = {};
    const seenResources = ledger.resources(at).flatMap((name) => resourceNamed(name) ?? []);
    for (const resource of new Set<Resource>(['core', ...seenResources])) {
      const seen = ledger.seen(resource, at);
      const counted = {
        window: windowOf(resource, at),
        spent: seen.spent,
        hourSpent: 0,
        part: 1,
        refund: () => undefined,
        add: () => undefined,
      };
      const input = shareInput(settings, weights, limit, counted, limit.name, resource, at);
      // shareInput takes one unit off for the request being decided; a report decides none.
      const spent = new Map(seen.spent);
      resources[resource] = { ...standingOf({ ...input, spent }), window_reset: Math.floor(counted.window.endMs / 1000) };
    }
    const { inFlight, waiting } = slots.of(limit.name);
    return {
      name: limit.name,
      weight: weights.get(limit.name) ?? 1,
      max_per_hour: limit.maxPerHour,
      max_concurrency: limit.maxConcurrency,
      in_flight: inFlight,
      waiting,
      spent_this_hour: ledger.seen('core', at).hourSpent.get(limit.name) ?? 0,
      resources,
    };
  };

  return {
    admit,
    refused: (consumer, reason) => events.refused?.(consumer, reason),
    report() {
      const at = now();
      return {
        budget: ledger.mode(),
        reserve_fraction: settings.reserveFraction,
        consumers: settings.consumers.map((limit) => standing(limit, at)),
        oidc_issuers: settings.consumers.filter((limit) => limit.oidcIssuer === true).map((limit) => limit.name),
      };
    },
    close() {
      slots.close();
      ledger.close();
    },
  };
}

/** The pool's figures in a resource (a resource no live token has numbers for has a limit of 0: not divided). */
export function poolFigures(pool: { rateLimit(resource?: Resource): PoolRateLimit }): PoolFigures {
  return (resource) => pool.rateLimit(resource);
}

/**
 * The fair share of a process from the config (consumer keys on and a pool to share), its events
 * as metrics by consumer name. Shared through Redis when the token budget is.
 */
export function consumerBudgetFor(
  config: Config,
  deps: { logger: Logger; metrics: Metrics },
  pool: { pool: { rateLimit(resource?: Resource): PoolRateLimit }; budget(): { replicas: number } } | undefined,
  redis: RedisConnection | undefined,
  /** Cluster workers that each count alone (workers leasing tokens from the primary, no Redis). */
  workers = 1,
): ConsumerBudget | undefined {
  if (!config.consumers.enabled || pool === undefined) return undefined;
  const { metrics } = deps;
  return createConsumerBudget({
    consumers: [
      ...config.consumers.keys.map((key) => ({
        name: key.name,
        weight: key.weight,
        maxPerHour: key.max_per_hour,
        maxConcurrency: key.max_concurrency,
      })),
      // An OIDC issuer is one account: every consumer its tokens name spends from its share.
      ...config.consumers.oidc.map((issuer) => ({
        name: issuer.name,
        weight: issuer.weight,
        maxPerHour: null,
        maxConcurrency: null,
        oidcIssuer: true,
      })),
    ],
    reserveFraction: config.consumers.reserve_fraction,
    queueTimeoutMs: config.pool.queue_timeout_ms,
    maxQueue: config.pool.max_queue,
    figures: poolFigures(pool.pool),
    replicas: () => pool.budget().replicas,
    redis: config.redis.shared_tokens ? redis : undefined,
    localPart: 1 / Math.max(1, workers),
    logger: deps.logger,
    events: {
      refused: (consumer, reason) => metrics.consumerShareRejections.inc({ consumer, reason }),
      settled(consumer, resource, outcome) {
        if (outcome.spent) metrics.consumerQuotaSpent.inc({ consumer, resource });
      },
    },
  });
}
