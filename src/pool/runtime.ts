/**
 * Builds the token pool from the config, connects its events to metrics and logs (by token name
 * only), and learns each token's numbers from GET /rate_limit (free on GitHub): every resource at
 * start-up; to confirm a 401 a request met (confirm.ts: at most once a minute per token); and
 * every pool.revive_interval_ms for the dead tokens, which come back when they answer again.
 * Confirmations, revivals and the probes of members a reload or an App adds use a client of their
 * own to the first pooled upstream. `reload` re-reads pool.tokens_file into the pool (reload.ts).
 *
 * The members are the tokens (ETAGERE_TOKENS, pool.tokens, pool.tokens_file) and the GitHub Apps'
 * installation tokens (app-members.ts), composed in one place (member-sources.ts). `start` mints
 * the Apps' first tokens; a 401 on an App member re-mints it before anything else (`renew`).
 */
import type { Config } from '../platform/config/schema.js';
import type { Logger } from '../platform/log/logger.js';
import type { Metrics } from '../platform/metrics/registry.js';
import { tokensBesideFile } from '../platform/config/load.js';
import type { RedisConnection } from '../platform/redis/connection.js';
import { createUpstreamClient, type UpstreamClient } from '../upstream/fetch.js';
import { createConfirmer } from './members/confirm.js';
import { weightOf } from './rules/fair-share.js';
import { createTokenPool } from './backends/local-pool.js';
import { tokenName } from '../platform/config/token-name.js';
import { createPoolHeaders } from './rules/report.js';
import type { PoolContext } from './pooled-fetch.js';
import { askRateLimit, learnAnswer, probeToken, type RateLimitAnswer } from './members/probe.js';
import { createTokenReloader, reloadWithoutPool, type ReloadOutcome, type ReloadTrigger } from './members/reload.js';
import { createSharedTokenPool, type SharedTokenPool } from './backends/shared-pool.js';
import { createAppMembers, type AppMembers, type AppTiming } from './members/app-members.js';
import { createMemberSources } from './members/member-sources.js';
import type { MemberPool, MembershipChange, PoolEvents, PoolSettings, Renewal, TokenPool } from './rules/types.js';

/** Whether the config gives the pool members: tokens, or GitHub Apps. */
export function poolConfigured(config: Config): boolean {
  return config.pool.tokens.length > 0 || config.pool.apps.length > 0;
}

export interface PoolRuntime extends PoolContext {
  /** Where the budget lives, for /admin/tokens. */
  budget(): { shared: boolean; replicas: number };
  /** Mints the GitHub Apps' first installation tokens (they join the pool); never throws. */
  start(): Promise<void>;
  /** Whether the pool has had members since start-up (an App-only pool: once its first token is minted). */
  ready(): boolean;
  /** Asks the upstream for every token's numbers (GET /rate_limit); never throws. */
  probe(client: UpstreamClient): Promise<void>;
  /** Re-reads pool.tokens_file and makes it the pool's membership (reload.ts); absent on a worker leasing from the primary. */
  reload?(trigger: ReloadTrigger): Promise<ReloadOutcome>;
  /** Membership changes so far (MemberPool.generation); 0 on a worker leasing from the primary. */
  generation(): number;
  close(): void;
}

/** The pool's events as metrics and logs (tokens by name only). */
function poolEvents(metrics: Metrics, log: Logger, equivalent: boolean): PoolEvents {
  return {
    scopes(agreement) {
      // Names and scopes only: a scope list is no secret, a token's value never reaches here.
      const groups = agreement.groups.map((group) => ({ tokens: group.tokens, scopes: group.scopes }));
      if (agreement.differ && equivalent)
        log.warn(
          { scopeGroups: groups, unchecked: agreement.unchecked },
          'pool tokens report different OAuth scopes (X-OAuth-Scopes): pool.equivalent does not hold, each token has its own cache partition until they agree',
        );
      else if (agreement.differ)
        log.info(
          { scopeGroups: groups, unchecked: agreement.unchecked },
          'pool tokens report different OAuth scopes (pool.equivalent is false)',
        );
      else if (equivalent)
        log.info(
          { scopeGroups: groups, unchecked: agreement.unchecked },
          'pool tokens report the same OAuth scopes again: one cache partition',
        );
    },
    dead(name) {
      metrics.tokenEvents.inc({ token: name, event: 'dead' });
      log.error(
        { tokenName: name },
        'pool token rejected by the upstream (401, confirmed by GET /rate_limit): out of the pool until it answers again',
      );
    },
    unlimited(name) {
      log.info({ tokenName: name }, 'pool token: the upstream applies no rate limit to it (rate limiting off): chosen by load alone');
    },
    revived(name) {
      metrics.tokenEvents.inc({ token: name, event: 'revived' });
      log.warn({ tokenName: name }, 'pool token answers again (GET /rate_limit): revived, back in the pool');
    },
    exhausted(name, reset, resource = 'core') {
      metrics.tokenEvents.inc({ token: name, event: 'exhausted' });
      log.warn({ tokenName: name, resource, reset: new Date(reset * 1000).toISOString() }, 'pool token hit its primary rate limit');
    },
    secondary(name, pauseMs) {
      metrics.tokenEvents.inc({ token: name, event: 'secondary' });
      log.warn({ tokenName: name, pauseSeconds: Math.ceil(pauseMs / 1000) }, 'pool token hit a secondary rate limit: paused');
    },
    rejected(reason) {
      metrics.poolRejections.inc({ reason });
      if (reason === 'exhausted') metrics.poolExhausted.inc();
    },
    queued(seconds) {
      metrics.queueWait.observe(seconds);
    },
    spent(name, kind, points) {
      metrics.poolPoints.inc({ token: name, kind }, points);
    },
  };
}

/** A pool with a confirm and a renew of its own (the pool's getters stay live: its members change). */
function withHooks(base: MemberPool, hooks: Pick<TokenPool, 'confirm' | 'renew'>): MemberPool {
  return {
    get names() {
      return base.names;
    },
    get equivalent() {
      return base.equivalent;
    },
    acquire: (opts) => base.acquire(opts),
    rateLimit: (resource) => base.rateLimit(resource),
    rateLimits: () => base.rateLimits(),
    snapshot: () => base.snapshot(),
    queueLength: () => base.queueLength(),
    learn: (name, status, observation, error) => base.learn(name, status, observation, error),
    learnScopes: (name, header, status) => base.learnScopes(name, header, status),
    ...hooks,
    authorizationOf: (name) => base.authorizationOf(name),
    replaceMembers: (tokens) => base.replaceMembers(tokens),
    generation: () => base.generation(),
    close: () => base.close(),
  };
}

/**
 * What becomes of a credential that met a 401 (TokenPool.renew): replaced since, gone, or (an App
 * member's) re-minted once; else it stands and the 401 is confirmed as usual.
 */
async function renewal(base: MemberPool, apps: AppMembers | undefined, name: string, authorization: string): Promise<Renewal> {
  const current = base.authorizationOf(name);
  if (current === undefined) return 'gone';
  if (current !== authorization) return 'renewed';
  if (apps === undefined || !apps.owns(name, authorization)) return 'no';
  if (await apps.remint(name, authorization)) return 'renewed';
  return base.authorizationOf(name) === undefined ? 'gone' : 'no';
}

interface Confirming {
  readonly confirm: TokenPool['confirm'];
  /** GET /rate_limit with a credential on the confirmation client; undefined without a pooled upstream. */
  readonly ask: ((authorization: string) => Promise<RateLimitAnswer>) | undefined;
  /** Asks GET /rate_limit for a member and tells the pool. */
  probe(name: string): Promise<void>;
  forget(name: string): void;
  close(): void;
}

/**
 * Confirmation of 401s and revival of dead tokens for `pool`, on a client of its own to the
 * first pooled upstream (created on first use). Returns the pool's `confirm`, the client's
 * GET /rate_limit (for members a reload adds), a probe of one member, and a close.
 */
function withConfirmation(config: Config, base: MemberPool, log: Logger): Confirming {
  const target = config.upstreams.find((upstream) => upstream.token_pool);
  if (target === undefined)
    return { confirm: undefined, ask: undefined, probe: async () => undefined, forget: () => undefined, close: () => undefined };
  let client: UpstreamClient | undefined;
  const clientNow = (): UpstreamClient => (client ??= createUpstreamClient(target));
  const confirmer = createConfirmer({
    get names() {
      return base.names;
    },
    now: Date.now,
    probe: (name) => probeToken(base, clientNow(), name, log),
  });
  const timer = setInterval(() => {
    for (const token of base.snapshot()) if (token.state === 'dead') void confirmer.probeNow(token.name);
  }, config.pool.revive_interval_ms);
  timer.unref();
  return {
    confirm: (name, kind) => confirmer.confirm(name, kind),
    ask: (authorization) => askRateLimit(clientNow(), authorization),
    probe: async (name) => void (await probeToken(base, clientNow(), name, log)),
    forget: (name) => confirmer.forget(name),
    close() {
      clearInterval(timer);
      void client?.close().catch(() => undefined);
    },
  };
}

/** Each consumer's weight (the wait queue's bounds split pool.max_queue by them). */
function consumerWeights(config: Config): ReadonlyMap<string, number> {
  // An OIDC issuer's tokens wait in its one lane, as they spend from its one account.
  return new Map([...config.consumers.keys, ...config.consumers.oidc].map((consumer) => [consumer.name, weightOf(consumer.weight)]));
}

/** The pool of this process: in process, or shared through Redis when there is a connection and redis.shared_tokens. */
function memberPool(
  config: Config,
  members: PoolSettings['tokens'],
  logger: Logger,
  metrics: Metrics,
  redis: RedisConnection | undefined,
): { base: MemberPool; shared: SharedTokenPool | undefined } {
  const log = logger.child({ component: 'token-pool' });
  const points = { rest: config.pool.points_per_minute, graphql: config.pool.graphql_points_per_minute };
  const local = createTokenPool({
    tokens: members,
    equivalent: config.pool.equivalent,
    perTokenConcurrency: config.pool.per_token_concurrency,
    maxConcurrency: config.pool.max_concurrency,
    queueTimeoutMs: config.pool.queue_timeout_ms,
    maxQueue: config.pool.max_queue,
    points,
    consumerWeights: config.consumers.enabled ? consumerWeights(config) : undefined,
    reserveFraction: config.consumers.reserve_fraction,
    events: poolEvents(metrics, log, config.pool.equivalent),
  });
  const sharedSettings = {
    perTokenConcurrency: config.pool.per_token_concurrency,
    maxConcurrency: config.pool.max_concurrency,
    queueTimeoutMs: config.pool.queue_timeout_ms,
    points,
  };
  const shared =
    redis !== undefined && config.redis.shared_tokens ? createSharedTokenPool(local, redis, sharedSettings, logger) : undefined;
  return { base: shared ?? local, shared };
}

/** A cluster worker's runtime: the pool lives in the primary process, which also mints, probes and reports it. */
function leasedRuntime(override: TokenPool): PoolRuntime {
  return {
    pool: override,
    headers: createPoolHeaders(override),
    start: async () => undefined,
    ready: () => true,
    probe: async () => undefined,
    generation: () => 0,
    close: () => override.close(),
    budget: () => ({ shared: false, replicas: 1 }),
  };
}

export function createPoolRuntime(
  config: Config,
  logger: Logger,
  metrics: Metrics,
  redis?: RedisConnection,
  override?: TokenPool,
  appTiming?: AppTiming,
): PoolRuntime | undefined {
  if (!poolConfigured(config)) return undefined;
  if (override !== undefined) return leasedRuntime(override);
  const log = logger.child({ component: 'token-pool' });
  const members = config.pool.tokens.map((token) => ({ name: tokenName(token.value, token.name), value: token.value }));
  const { base, shared } = memberPool(config, members, logger, metrics, redis);
  const confirmation = withConfirmation(config, base, log);
  const sources = createMemberSources(
    base,
    members,
    config.pool.apps.map((app) => app.name),
    log,
  );
  let started = false;
  const upstream = config.upstreams.find((candidate) => candidate.token_pool);
  const appChanged = (change: MembershipChange): void => {
    for (const name of [...change.updated, ...change.removed]) confirmation.forget(name);
    // At start-up the runtime's probe learns every member; later, an added installation is probed as it joins.
    if (started && config.pool.probe_at_start) for (const name of change.added) void confirmation.probe(name);
  };
  const apps =
    config.pool.apps.length === 0 || upstream === undefined
      ? undefined
      : createAppMembers({ apps: config.pool.apps, upstream, sources, changed: appChanged, log, metrics, timing: appTiming });
  const pool = withHooks(base, {
    ...(confirmation.confirm === undefined ? {} : { confirm: confirmation.confirm }),
    renew: (name, authorization) => renewal(base, apps, name, authorization),
  });
  const file = config.pool.tokens_file;
  const reloader =
    file === null
      ? undefined
      : createTokenReloader({
          file,
          beside: tokensBesideFile(config),
          initial: members,
          apply: (tokens) => sources.setTokens(tokens),
          ask: config.pool.probe_at_start ? confirmation.ask : undefined,
          learn: (name, answer) => void learnAnswer(pool, name, answer, log),
          forget: (name) => confirmation.forget(name),
          log,
          metrics,
        });
  metrics.watchPool({ tokens: () => pool.snapshot(), queueLength: () => pool.queueLength() });
  log.info({ tokenNames: pool.names, apps: config.pool.apps.map((app) => app.name), equivalent: pool.equivalent }, 'token pool ready');
  let hadMembers = false;

  return {
    pool,
    headers: createPoolHeaders(pool),
    async start() {
      await apps?.start();
      started = true;
    },
    ready: () => (hadMembers ||= pool.names.length > 0),
    probe: async (client) => {
      await Promise.all(pool.names.map((name) => probeToken(pool, client, name, log)));
    },
    reload: (trigger) => {
      if (apps !== undefined) {
        log.info({ trigger }, 'GitHub Apps: listing installations again');
        void apps.sync();
      }
      return reloader?.reload(trigger) ?? Promise.resolve(reloadWithoutPool(null, trigger, log, metrics));
    },
    generation: () => pool.generation(),
    close: () => {
      apps?.close();
      confirmation.close();
      pool.close();
    },
    budget: () => ({ shared: shared?.shared() ?? false, replicas: shared?.replicas() ?? 1 }),
  };
}
