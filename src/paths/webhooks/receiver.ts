/**
 * The webhook receiver: `POST <webhooks.path>` on the public port, served before any upstream
 * route (src/main/handler.ts), present only when a secret is configured. A request without a
 * well-formed `X-Hub-Signature-256` is refused before its body is read (401). A delivery is read
 * up to `webhooks.max_body_bytes` (413 past it, nothing more buffered), within
 * `webhooks.read_timeout_ms` and at a floor rate (408: intake.ts, pace.ts), its signature checked
 * over the raw bytes before anything else is looked at (401, counted, nothing marked), then:
 *
 *   an event the table does not name (webhook-events.ts)  202: no path marked; its tags purged
 *   no or a malformed X-GitHub-Delivery, bad payload      400
 *   a delivery id seen before (deliveries.ts)             200, acknowledged, not applied again
 *   otherwise                                             its scopes (webhook-scopes.ts) marked stale
 *                                                         on every upstream and every replica, the
 *                                                         entries filed under its tags (webhook-tags.ts)
 *                                                         purged; 200 with the counts
 *
 * The secret is never logged, exported or repeated; a refused delivery is logged without its body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type PathScope, normalPath } from '../../cache/rules/stale-marks.js';
import type { Validity } from '../../cache/store/validity.js';
import type { WebhooksConfig } from '../../platform/config/schema.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import { writeError, writeJson } from '../../http/answer.js';
import { errors } from '../../http/errors.js';
import { NOT_SERVED, type ErrorReply, type Served } from '../../http/reply.js';
import type { UpstreamRuntime } from '../upstreams.js';
import type { RedisConnection } from '../../platform/redis/connection.js';
import { createDeliveries, DELIVERY_ID, type Deliveries } from './deliveries.js';
import { EVENT_TABLE, type ScopeTemplate } from '../../cache/rules/webhook-events.js';
import { createIntake, type Intake } from './intake.js';
import { GRACE_MS, MIN_BYTES_PER_SECOND } from './pace.js';
import { clientPathOf } from '../../cache/rules/webhook-paths.js';
import { actionOf, parsePayload } from './payload.js';
import { scopesFor } from '../../cache/rules/webhook-scopes.js';
import { deliveryTags } from '../../cache/rules/webhook-tags.js';
import type { TagStore } from '../../cache/store/tags.js';
import { verifySignature, wellFormedSignature } from './signature.js';

export interface WebhookReceiver {
  readonly path: string;
  /** Handles one request to `path`; resolves once it is answered. */
  receive(req: IncomingMessage, res: ServerResponse, id: string): Promise<Served>;
}

export interface ReceiverDeps {
  /** Where scopes are marked stale (src/cache/store/validity.ts), here and on every replica. */
  readonly validity: Pick<Validity, 'markStale'>;
  /** GraphQL answers and stored 404s, purged by the tags a delivery names (src/cache/rules/webhook-tags.ts). */
  readonly tags?: TagStore | undefined;
  readonly upstreams: readonly UpstreamRuntime[];
  readonly redis: RedisConnection | undefined;
  readonly logger: Logger;
  readonly metrics: Metrics;
}

/** Deliveries read at once (each may be up to the body cap): a later one takes the oldest's slot (intake.ts). */
const MAX_READING = 4;
/** How long a refused sender's connection may linger once the answer is out. */
const LINGER_MS = 1_000;
/** How long, and how many, delivery ids are remembered. */
const DELIVERY_MEMORY = { ttlMs: 24 * 3_600_000, max: 10_000 };
const EVENT_NAME = /^[a-z_]{1,64}$/;

type Outcome = 'applied' | 'duplicate' | 'ignored' | 'bad_signature' | 'too_large' | 'too_slow' | 'busy' | 'bad_request' | 'method';

/** The receiver, or undefined when no secret is configured (it is off). */
export function createWebhookReceiver(config: WebhooksConfig, deps: ReceiverDeps): WebhookReceiver | undefined {
  const secret = config.secret;
  if (secret === null) return undefined;
  const { validity, tags, upstreams, metrics } = deps;
  const logger = deps.logger.child({ component: 'webhooks' });
  const deliveries = createDeliveries(deps.redis, DELIVERY_MEMORY);
  const purges = tags === undefined ? undefined : tagPurges(tags, deliveries, metrics, logger);
  const pace = { deadlineMs: config.read_timeout_ms, minBytesPerSecond: MIN_BYTES_PER_SECOND, graceMs: GRACE_MS };
  const intake = createIntake({ slots: MAX_READING, maxBytes: config.max_body_bytes, pace });

  const count = (event: string, outcome: Outcome): void => metrics.webhookDeliveries.inc({ event, outcome });
  const refuse = (res: ServerResponse, id: string, reply: ErrorReply, event: string, outcome: Outcome): Served => {
    count(event, outcome);
    writeError(res, reply, id);
    return NOT_SERVED;
  };

  /** The API scopes, as every upstream's client paths (the cache's keys). */
  const onEveryUpstream = (scopes: readonly ScopeTemplate[]): PathScope[] =>
    upstreams.flatMap((upstream) =>
      scopes.map((scope) => ({
        upstream: upstream.cfg.name,
        path: normalPath(clientPathOf(upstream.cfg, scope.path)),
        prefix: scope.prefix,
      })),
    );

  /** A delivery whose signature matched. */
  const verified = async (req: IncomingMessage, res: ServerResponse, id: string, body: Buffer): Promise<Served> => {
    const header = req.headers['x-github-event'];
    const event = typeof header === 'string' && EVENT_NAME.test(header) ? header : undefined;
    if (event === undefined) return refuse(res, id, errors.badRequest('X-GitHub-Event is missing or malformed'), 'other', 'bad_request');
    if (!Object.hasOwn(EVENT_TABLE, event)) {
      // No path to mark (a discussion, a project item, ...), but what it carries may be in GraphQL answers.
      const purged = (await purges?.unknownEvent(req, event, body)) ?? { tags: [], purged: 0 };
      count('other', 'ignored');
      writeJson(res, 202, { message: `Accepted: the ${event} event marks no path in the cache`, ...purged }, id);
      return NOT_SERVED;
    }
    const delivery = req.headers['x-github-delivery'];
    if (typeof delivery !== 'string' || !DELIVERY_ID.test(delivery))
      return refuse(res, id, errors.badRequest('X-GitHub-Delivery is missing or malformed'), event, 'bad_request');
    const parsed = parsePayload(req.headers['content-type'], body);
    if (!parsed.ok) return refuse(res, id, errors.badRequest(parsed.reason), event, 'bad_request');
    if (!(await deliveries.firstSeen(delivery))) {
      count(event, 'duplicate');
      logger.info({ event, delivery }, 'webhook delivery seen before: acknowledged, not applied again');
      writeJson(res, 200, { message: 'Duplicate delivery: already applied', delivery }, id);
      return NOT_SERVED;
    }
    const scopes = scopesFor(event, parsed.payload) ?? [];
    const marked = scopes.length === 0 ? 0 : validity.markStale(onEveryUpstream(scopes), 'webhook');
    const named = purges === undefined ? [] : deliveryTags(event, parsed.payload);
    const purged = named.length === 0 ? 0 : await purges!.purge(named);
    const action = actionOf(parsed.payload);
    count(event, scopes.length === 0 && named.length === 0 ? 'ignored' : 'applied');
    logger.info({ event, action, delivery, scopes: scopes.length, marked, tags: named.length, purged }, 'webhook delivery applied');
    if (event === 'meta' && action === 'deleted')
      logger.warn(
        { delivery },
        'the webhook was deleted on GitHub: no more deliveries, so webhook_fresh_seconds is no longer backed by them',
      );
    const message = scopes.length === 0 && named.length === 0 ? 'Nothing to mark' : 'Applied';
    writeJson(res, 200, { message, event, delivery, scopes: scopes.map(describe), marked, tags: named, purged }, id);
    return NOT_SERVED;
  };

  /** A delivery whose body was not read whole. */
  const unread = (req: IncomingMessage, res: ServerResponse, id: string, read: Exclude<Intake, { kind: 'read' }>): Served => {
    if (read.kind === 'failed') return NOT_SERVED; // the sender went away
    if (read.kind === 'too-large') return refuse(res, id, errors.webhookTooLarge(config.max_body_bytes), '-', 'too_large');
    hangUp(req, res);
    const address = req.socket.remoteAddress;
    if (read.kind === 'evicted') {
      logger.warn({ reqId: id, address }, 'webhook delivery cut: its read slot went to a later delivery');
      return refuse(res, id, errors.webhookBusy(), '-', 'busy');
    }
    logger.warn({ reqId: id, address, why: read.why }, 'webhook delivery cut: its body did not arrive in time');
    return refuse(res, id, errors.webhookTooSlow(pace.deadlineMs, pace.minBytesPerSecond), '-', 'too_slow');
  };

  return {
    path: config.path,
    async receive(req, res, id) {
      if (req.method !== 'POST') {
        req.resume();
        return refuse(res, id, errors.webhookMethod(req.method ?? '?'), '-', 'method');
      }
      if (!wellFormedSignature(req.headers['x-hub-signature-256'])) {
        // Nothing of the body is read: the connection closes after the answer.
        logger.warn({ reqId: id, address: req.socket.remoteAddress }, 'webhook delivery refused: missing or malformed X-Hub-Signature-256');
        hangUp(req, res);
        return refuse(res, id, errors.webhookSignature(), '-', 'bad_signature');
      }
      const read = await intake.read(req);
      if (read.kind !== 'read') return unread(req, res, id, read);
      if (!verifySignature(secret, read.body, req.headers['x-hub-signature-256'])) {
        logger.warn(
          { reqId: id, address: req.socket.remoteAddress },
          'webhook delivery refused: X-Hub-Signature-256 does not match the body',
        );
        return refuse(res, id, errors.webhookSignature(), '-', 'bad_signature');
      }
      return verified(req, res, id, read.body);
    },
  };
}

/** A delivery's tags purged (src/cache/rules/webhook-tags.ts): a failure is logged, never the delivery's. */
function tagPurges(tags: TagStore, deliveries: Deliveries, metrics: Metrics, logger: Logger) {
  const purge = async (named: readonly string[]): Promise<number> => {
    try {
      const purged = await tags.purge(named);
      metrics.cacheTagPurges.inc({ source: 'webhook' }, purged);
      return purged;
    } catch (err) {
      logger.warn({ err: (err as Error).message }, "purging a delivery's tags failed");
      return 0;
    }
  };
  return {
    purge,
    /** An event the table does not name: its tags, purged when its delivery is well-formed and new (nothing is refused). */
    async unknownEvent(req: IncomingMessage, event: string, body: Buffer): Promise<{ tags: string[]; purged: number }> {
      const delivery = req.headers['x-github-delivery'];
      const parsed = parsePayload(req.headers['content-type'], body);
      if (!parsed.ok || typeof delivery !== 'string' || !DELIVERY_ID.test(delivery)) return { tags: [], purged: 0 };
      const named = deliveryTags(event, parsed.payload);
      if (named.length === 0 || !(await deliveries.firstSeen(delivery))) return { tags: [], purged: 0 };
      return { tags: named, purged: await purge(named) };
    },
  };
}

/** A scope as the acknowledgement shows it (API paths: what GitHub's payload named). */
function describe(scope: ScopeTemplate): string {
  return scope.prefix ? `${scope.path}/**` : scope.path;
}

/** Once the answer is out, the connection closes, whatever the sender still sends. */
function hangUp(req: IncomingMessage, res: ServerResponse): void {
  res.shouldKeepAlive = false;
  res.once('finish', () => setTimeout(() => req.socket.destroy(), LINGER_MS).unref());
}
