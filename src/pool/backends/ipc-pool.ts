/**
 * The token pool across the workers of one machine, without Redis: the primary process owns the
 * pool (one budget, so one machine never overspends); each worker asks it for leases over the
 * cluster IPC channel and reports what the upstream said. Leases, settlements and state name
 * tokens by name; a worker maps names to Authorization values itself.
 *
 * Membership follows the primary: before the first lease a worker gets, and whenever the pool's
 * members change (a reloaded tokens file, an App's tokens), the primary sends the members' names and Authorization
 * values (`members`), always before a lease on a member the worker has not been told of. This is
 * the one message with credentials; it goes only over the private channel between the primary and
 * its own worker processes and is never logged. A worker reading the file itself could read
 * another version of it than the primary did, and a credential minted by the primary (an App
 * installation token) exists nowhere else.
 *
 * worker -> primary  { t: 'etagere:pool', op: 'acquire', id, prefer?, exclude?, resource? }
 *                    { t: 'etagere:pool', op: 'settle', lease, status, headers, body? }
 *                    { t: 'etagere:pool', op: 'cancel', lease }
 *                    { t: 'etagere:pool', op: 'renew', id, name, digest }   (a 401 met on a token: re-mint it if it can be)
 *                    { t: 'etagere:pool', op: 'confirm', id, name, kind? }   (a 401 met on a token: GET /rate_limit)
 * primary -> worker  { t: 'etagere:pool', op: 'members', members: [{ name, authorization }] }   (membership changed)
 *                    { t: 'etagere:pool', op: 'acquired', id, result }
 *                    { t: 'etagere:pool', op: 'renewed', id, result }
 *                    { t: 'etagere:pool', op: 'confirmed', id, result }
 *                    { t: 'etagere:pool', op: 'state', tokens, rateLimit, rateLimits, queue }   (after changes)
 * A lease is reserved in the request's rate-limit resource; the primary renews (App installation
 * tokens), confirms 401s and probes. A renew names the credential that met the 401 by a digest
 * (`credentialDigest`), so that this channel carries credentials one way only.
 */
import { createHash } from 'node:crypto';
import { classify, resourceNamed, type Resource } from '../rules/rate-limit.js';
import { scopeAgreement } from '../rules/scopes.js';
import { unknownReport } from '../rules/report.js';
import type {
  Acquired,
  AcquireOptions,
  Confirmation,
  Lease,
  PoolRateLimit,
  Renewal,
  TokenPool,
  TokenReport,
  UnauthorizedKind,
} from '../rules/types.js';

/** The `t` of every pool message, which tells them apart from other IPC traffic. */
const MESSAGE_TAG = 'etagere:pool';

/** Response headers a settle carries: all the pool's rules read. */
const SETTLE_HEADERS = [
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-used',
  'x-ratelimit-reset',
  'x-ratelimit-resource',
  'retry-after',
  'x-oauth-scopes',
];

type Result =
  { kind: 'lease'; lease: number; name: string; switched: boolean; resource: Resource } | Extract<Acquired, { kind: 'unavailable' }>;

type RateLimits = Partial<Record<Resource, PoolRateLimit>>;

/** A member as a worker needs it: its name, and the Authorization value its leases send. */
interface Member {
  name: string;
  authorization: string;
}

export type PoolMessage =
  | {
      t: typeof MESSAGE_TAG;
      op: 'acquire';
      id: number;
      prefer?: string;
      exclude?: string[];
      resource?: string;
      consumer?: string;
      weight?: number;
      points?: number;
      background?: boolean;
    }
  | { t: typeof MESSAGE_TAG; op: 'settle'; lease: number; status: number; headers: Record<string, string>; body?: string }
  | { t: typeof MESSAGE_TAG; op: 'cancel'; lease: number }
  | { t: typeof MESSAGE_TAG; op: 'confirm'; id: number; name: string; kind?: UnauthorizedKind }
  | { t: typeof MESSAGE_TAG; op: 'renew'; id: number; name: string; digest: string }
  | { t: typeof MESSAGE_TAG; op: 'renewed'; id: number; result: Renewal }
  | { t: typeof MESSAGE_TAG; op: 'members'; members: Member[] }
  | { t: typeof MESSAGE_TAG; op: 'acquired'; id: number; result: Result }
  | { t: typeof MESSAGE_TAG; op: 'confirmed'; id: number; result: Confirmation }
  | { t: typeof MESSAGE_TAG; op: 'state'; tokens: TokenReport[]; rateLimit: PoolRateLimit; rateLimits?: RateLimits; queue: number };

export function isPoolMessage(message: unknown): message is PoolMessage {
  return typeof message === 'object' && message !== null && (message as { t?: unknown }).t === MESSAGE_TAG;
}

/** A credential as a renew names it: a SHA-256 digest (never the value), enough to tell two values apart. */
export function credentialDigest(authorization: string): string {
  return createHash('sha256').update(authorization).digest('base64url');
}

/** The primary's answer to a worker's renew: the credential the digest names is still the member's, or not. */
function renewFor(pool: TokenPool, name: string, digest: string): Promise<Renewal> {
  const current = pool.authorizationOf(name);
  if (current === undefined) return Promise.resolve(pool.renew === undefined ? 'no' : 'gone');
  if (credentialDigest(current) !== digest) return Promise.resolve('renewed'); // replaced since the worker's lease
  return pool.renew === undefined ? Promise.resolve('no') : pool.renew(name, current).catch(() => 'no' as const);
}

/** A channel to one side: the worker's `process`, or a cluster `Worker`. */
/**
 * A message to a process that has gone (a worker exiting, or the primary, during shutdown) is
 * dropped: what it carried no longer matters, and Node would otherwise emit the error on the
 * process object, where no listener means a crash (the unexplained exit 1 on SIGTERM).
 */
export const ignoreSendError = (): void => {};

export interface Channel {
  /** With a callback: a send on a closed channel reports to it instead of emitting an 'error' that would end the process. */
  send(message: PoolMessage, callback: (error: Error | null) => void): unknown;
  on(event: 'message', listener: (message: unknown) => void): unknown;
}

/**
 * Primary side: serves one worker's requests from `pool`, whose membership changes are counted by
 * `generation` (MemberPool.generation). Returns `push`, which sends the pool's state to the worker
 * (call it after changes; it is throttled), and `members`, which sends the members if the worker
 * has not seen this generation yet (call it after a membership change).
 */
export function servePool(
  pool: TokenPool,
  worker: Channel,
  generation: () => number = () => 0,
): { push(): void; members(): void; close(): void } {
  const leases = new Map<number, Lease>();
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  /** The generation this worker was last sent (none yet: its first lease brings the members). */
  let sent: number | undefined;
  const send = (message: PoolMessage): void => {
    try {
      worker.send(message, ignoreSendError);
    } catch {
      // the worker is gone; its exit handler cleans up
    }
  };
  const pushNow = (): void => {
    timer = undefined;
    const state = { tokens: pool.snapshot(), rateLimit: pool.rateLimit(), rateLimits: pool.rateLimits(), queue: pool.queueLength() };
    send({ t: MESSAGE_TAG, op: 'state', ...state });
  };
  const push = (): void => {
    timer ??= setTimeout(pushNow, 50);
  };
  const members = (): void => {
    const now = generation();
    if (sent === now) return;
    sent = now;
    const list = pool.names.map((name) => ({ name, authorization: pool.authorizationOf(name) ?? '' }));
    send({ t: MESSAGE_TAG, op: 'members', members: list });
  };
  worker.on('message', (message: unknown) => {
    if (!isPoolMessage(message)) return;
    if (message.op === 'acquire') {
      const exclude = message.exclude === undefined ? undefined : new Set(message.exclude);
      const { consumer, weight, points } = message; // the fair order and bounds of the primary's wait queue
      const background = message.background === true; // and its pacing
      pool
        .acquire({
          prefer: message.prefer,
          exclude,
          resource: resourceNamed(message.resource) ?? 'core',
          consumer,
          weight,
          points,
          background,
        })
        .then((acquired) => {
          if (acquired.kind === 'lease') {
            members(); // the worker knows the leased member's Authorization before it reads the lease
            const id = ++next;
            const { name, switched, resource } = acquired.lease;
            leases.set(id, acquired.lease);
            send({ t: MESSAGE_TAG, op: 'acquired', id: message.id, result: { kind: 'lease', lease: id, name, switched, resource } });
          } else {
            send({ t: MESSAGE_TAG, op: 'acquired', id: message.id, result: acquired });
          }
          push();
        });
    } else if (message.op === 'settle') {
      const lease = leases.get(message.lease);
      leases.delete(message.lease);
      lease?.settle(message.status, (n) => message.headers[n], message.body);
      push();
    } else if (message.op === 'cancel') {
      leases.get(message.lease)?.cancel();
      leases.delete(message.lease);
      push();
    } else if (message.op === 'renew') {
      void renewFor(pool, message.name, message.digest).then((result) => {
        send({ t: MESSAGE_TAG, op: 'renewed', id: message.id, result });
        push();
      });
    } else if (message.op === 'confirm') {
      const kind = message.kind === 'credentials' ? 'credentials' : 'request';
      const confirming = pool.confirm !== undefined && pool.names.includes(message.name) ? pool.confirm(message.name, kind) : undefined;
      void (confirming ?? Promise.resolve<Confirmation>('unknown')).then((result) => {
        send({ t: MESSAGE_TAG, op: 'confirmed', id: message.id, result });
        push();
      });
    }
  });
  return {
    push,
    members,
    /** The worker exited: its leases go back to the pool. */
    close() {
      if (timer !== undefined) clearTimeout(timer);
      for (const lease of leases.values()) lease.cancel();
      leases.clear();
    },
  };
}

/** A lease the primary granted a worker: its answer or its cancellation goes back to the primary. */
function workerLease(
  channel: Channel,
  granted: { id: number; name: string; switched: boolean; resource: Resource; authorization: string },
): Lease {
  const { id, name, switched, resource, authorization } = granted;
  let done = false;
  return {
    name,
    resource,
    authorization,
    switched,
    settle(status, header, body) {
      const verdict = classify(status, header, body, Date.now());
      if (done) return verdict;
      done = true;
      const headers: Record<string, string> = {};
      for (const headerName of SETTLE_HEADERS) {
        const value = header(headerName);
        if (value !== undefined) headers[headerName] = value;
      }
      channel.send(
        {
          t: MESSAGE_TAG,
          op: 'settle',
          lease: id,
          status,
          headers,
          ...(body === undefined ? {} : { body: body.slice(0, 4096) }),
        },
        ignoreSendError,
      );
      return verdict;
    },
    cancel() {
      if (done) return;
      done = true;
      channel.send({ t: MESSAGE_TAG, op: 'cancel', lease: id }, ignoreSendError);
    },
  };
}

/** A worker's questions to the primary that wait for their answer, by id. */
function waitingFor<T>(): {
  wait(id: number, send: () => void): Promise<T>;
  answer(id: number, result: T): void;
  answerAll(result: T): void;
} {
  const waiting = new Map<number, (result: T) => void>();
  return {
    wait: (id, send) =>
      new Promise<T>((resolve) => {
        waiting.set(id, resolve);
        send();
      }),
    answer(id, result) {
      waiting.get(id)?.(result);
      waiting.delete(id);
    },
    answerAll(result) {
      for (const resolve of waiting.values()) resolve(result);
      waiting.clear();
    },
  };
}

/**
 * Worker side: a TokenPool whose decisions and membership are the primary's. `names` and
 * `initial` (token names to Authorization values) are this worker's config until the primary's
 * first `members` message replaces them.
 */
export function createIpcTokenPool(
  channel: Channel,
  initialNames: readonly string[],
  equivalent: boolean,
  initial: ReadonlyMap<string, string>,
): TokenPool {
  let names = initialNames;
  let authorization = initial;
  let seq = 0;
  const pending = new Map<number, (acquired: Acquired) => void>();
  const confirming = waitingFor<Confirmation>();
  const renewing = waitingFor<Renewal>();
  let tokens: TokenReport[] = names.map(unknownReport);
  let rateLimit: PoolRateLimit = { limit: 0, remaining: 0, used: 0, reset: Math.ceil(Date.now() / 1000) };
  let rateLimits: RateLimits = {};
  let queue = 0;
  let closed = false;
  /** `equivalent`, unless the primary's members report different scopes (its state's rows: scopes.ts). */
  let equivalentNow = equivalent;

  const lease = (id: number, name: string, switched: boolean, resource: Resource): Lease =>
    workerLease(channel, { id, name, switched, resource, authorization: authorization.get(name) ?? '' });

  channel.on('message', (message: unknown) => {
    if (!isPoolMessage(message)) return;
    if (message.op === 'acquired') {
      const resolve = pending.get(message.id);
      pending.delete(message.id);
      if (resolve === undefined) return;
      const result = message.result;
      const resource = result.kind === 'lease' ? (resourceNamed(result.resource) ?? 'core') : 'core';
      resolve(result.kind === 'lease' ? { kind: 'lease', lease: lease(result.lease, result.name, result.switched, resource) } : result);
    } else if (message.op === 'confirmed') {
      confirming.answer(message.id, message.result);
    } else if (message.op === 'renewed') {
      renewing.answer(message.id, message.result);
    } else if (message.op === 'members') {
      // Leases in flight keep the Authorization they were given; new ones use these.
      names = message.members.map((member) => member.name);
      authorization = new Map(message.members.map((member) => [member.name, member.authorization]));
    } else if (message.op === 'state') {
      tokens = message.tokens;
      equivalentNow = equivalent && !scopeAgreement(tokens).differ;
      rateLimit = message.rateLimit;
      rateLimits = message.rateLimits ?? { core: message.rateLimit };
      queue = message.queue;
    }
  });

  return {
    get names() {
      return names;
    },
    get equivalent() {
      return equivalentNow;
    },
    acquire(opts: AcquireOptions = {}) {
      if (closed) return Promise.resolve({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
      const id = ++seq;
      return new Promise<Acquired>((resolve) => {
        pending.set(id, resolve);
        channel.send(
          {
            t: MESSAGE_TAG,
            op: 'acquire',
            id,
            ...(opts.prefer === undefined ? {} : { prefer: opts.prefer }),
            ...(opts.exclude === undefined ? {} : { exclude: [...opts.exclude] }),
            ...(opts.resource === undefined ? {} : { resource: opts.resource }),
            ...(opts.consumer === undefined ? {} : { consumer: opts.consumer }),
            ...(opts.weight === undefined ? {} : { weight: opts.weight }),
            ...(opts.points === undefined ? {} : { points: opts.points }),
            ...(opts.background === true ? { background: true } : {}),
          },
          ignoreSendError,
        );
      });
    },
    confirm(name, kind) {
      if (closed) return Promise.resolve<Confirmation>('unknown');
      const id = ++seq;
      return confirming.wait(id, () =>
        channel.send({ t: MESSAGE_TAG, op: 'confirm', id, name, ...(kind === undefined ? {} : { kind }) }, ignoreSendError),
      );
    },
    renew(name, authorizationSent) {
      if (closed) return Promise.resolve<Renewal>('no');
      const id = ++seq;
      return renewing.wait(id, () =>
        channel.send({ t: MESSAGE_TAG, op: 'renew', id, name, digest: credentialDigest(authorizationSent) }, ignoreSendError),
      );
    },
    rateLimit: (resource = 'core') =>
      rateLimits[resource] ?? (resource === 'core' ? rateLimit : { ...rateLimit, limit: 0, remaining: 0, used: 0 }),
    rateLimits: () => rateLimits,
    snapshot: () => tokens,
    queueLength: () => queue,
    learn: () => undefined, // the primary probes
    learnScopes: () => undefined, // and learns scopes from the settles' headers
    authorizationOf: (name) => authorization.get(name),
    close() {
      closed = true;
      for (const resolve of pending.values()) resolve({ kind: 'unavailable', reason: 'busy', retryAfterSeconds: 1 });
      pending.clear();
      confirming.answerAll('unknown');
      renewing.answerAll('no');
    },
  };
}
