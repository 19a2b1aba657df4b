/**
 * A faithful, fast fake of the GitHub REST read API (users, orgs, repositories, pagination,
 * ETags, quotas, secondary limits, GitHub Apps), optionally under a base path as GitHub Enterprise
 * Server serves it, and of the cyclist-count service, on one port. See docs/fake-upstream.md.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppSpecError, generateAppKeyPair, parseAppSpec, type FakeAppInput, type FakeInstallationInput } from './app-spec.js';
import { BasePathError, normaliseBasePath } from './base-path.js';
import { FaultSpecError, parseFaultRule, parseFaultSpec, type FaultRuleInput } from './faults.js';
import { createPipeline } from './server.js';
import { FakeState, RESOURCE_DEFAULTS, type RuntimeConfig } from './state.js';
import type { FakeStats } from './stats.js';
import { DEMO_TOKENS, parseTokenSpec, type FakeToken } from './tokens.js';

export { DEMO_TOKENS, parseTokenSpec, parseFaultSpec, FaultSpecError };
export { AppSpecError, BasePathError, generateAppKeyPair, normaliseBasePath, parseAppSpec };
export type { FakeToken, FakeStats, FaultRuleInput, FakeAppInput, FakeInstallationInput };
export { JWT_MESSAGES, verifyAppJwt, type JwtApp, type JwtCheck } from './jwt.js';
export { FAULT_KINDS, type FaultKind, type FaultRule } from './faults.js';
export { CITIES, SEED_ORG } from './data.js';
export { fakeUpstreamFlags } from './flags.js';

export interface FakeUpstreamOptions {
  /** Default 0 (a random free port). */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default: DEMO_TOKENS. */
  tokens?: FakeToken[];
  /** Requests per window without credentials, per client address. Default 60. */
  anonymousLimit?: number;
  /** Requests per window per token. Default 5000. */
  tokenLimit?: number;
  /** Length of a quota window (core and graphql). Default 3600. */
  windowSeconds?: number;
  /** `search` requests per search window per token (anonymous: at most 10). Default 30. */
  searchLimit?: number;
  /** `code_search` requests per search window per token. Default 10. */
  codeSearchLimit?: number;
  /** `graphql` points per window per token (a call costs its points: docs/fake-upstream.md). Default 5000. */
  graphqlLimit?: number;
  /** Length of the `search` and `code_search` windows. Default 60. */
  searchWindowSeconds?: number;
  /** Artificial delay before each API/cyclist response. Default 0. */
  latencyMs?: number;
  /** Public repositories of the seed organization (plus its private ones). Default 75. */
  orgRepoCount?: number;
  /** Answer secondary-limit errors when more requests than this are in flight. Default 0 (off). */
  enforceConcurrency?: number;
  /**
   * Enforce GitHub's secondary-limit points per credential per minute (a GET 1 point, a write 5):
   * beyond them, 403 with retry-after (secondary.ts). Default false (off).
   */
  enforcePoints?: boolean;
  /** REST points a credential may spend in any minute when enforced. Default 900 (GitHub's). */
  pointsPerMinute?: number;
  /** GraphQL points a credential may spend in any minute when enforced. Default 2000 (GitHub's). */
  graphqlPointsPerMinute?: number;
  /** Fault injection rules active from the start (as POST /__fake/faults; see parseFaultSpec). Default none. */
  faults?: FaultRuleInput[];
  /** GitHub Apps and their installations (see parseAppSpec for the CLI form). Default none. */
  apps?: FakeAppInput[];
  /** Lifetime of an installation token, in seconds. Default 3600 (GitHub's hour). */
  installationTokenSeconds?: number;
  /** Serve the API under this path, as GitHub Enterprise Server does (`/api/v3`). Default none. */
  basePath?: string;
  /**
   * Primary rate limits, as on github.com. false: as GitHub Enterprise Server with rate limiting off
   * (its default): /rate_limit answers 404 "Rate limiting is not enabled.", no x-ratelimit-*
   * headers, no primary quota. Default true.
   */
  rateLimits?: boolean;
  /** Resource and list answers carry `Cache-Control: …, no-transform` (also `POST /__fake/config {"noTransform": true}`). Default false. */
  noTransform?: boolean;
  /** Send signed webhooks for the fake's changes to this URL (webhooks.ts). Default none. */
  webhookUrl?: string;
  /** The webhooks' secret (X-Hub-Signature-256). Default none: unsigned, as GitHub sends them without one. */
  webhookSecret?: string;
}

export interface FakeUpstream {
  /** e.g. http://127.0.0.1:41234 (no trailing slash): the control endpoints are at `${url}/__fake/...`. */
  url: string;
  /** Where the API is: `url` plus the base path (`url` itself without one). */
  apiUrl: string;
  server: Server;
  /** Same JSON as GET /__fake/stats. */
  stats(): FakeStats;
  /** Same as POST /__fake/reset. */
  reset(): void;
  /** Closes the server and all its sockets. */
  close(): Promise<void>;
}

function checkInt(name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  return value;
}

export async function startFakeUpstream(opts: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const config: RuntimeConfig = {
    anonymousLimit: checkInt('anonymousLimit', opts.anonymousLimit ?? 60, 0),
    tokenLimit: checkInt('tokenLimit', opts.tokenLimit ?? 5000, 0),
    windowSeconds: checkInt('windowSeconds', opts.windowSeconds ?? 3600, 1),
    searchLimit: checkInt('searchLimit', opts.searchLimit ?? RESOURCE_DEFAULTS.searchLimit, 0),
    codeSearchLimit: checkInt('codeSearchLimit', opts.codeSearchLimit ?? RESOURCE_DEFAULTS.codeSearchLimit, 0),
    graphqlLimit: checkInt('graphqlLimit', opts.graphqlLimit ?? RESOURCE_DEFAULTS.graphqlLimit, 0),
    searchWindowSeconds: checkInt('searchWindowSeconds', opts.searchWindowSeconds ?? RESOURCE_DEFAULTS.searchWindowSeconds, 1),
    latencyMs: checkInt('latencyMs', opts.latencyMs ?? 0, 0),
    enforceConcurrency: checkInt('enforceConcurrency', opts.enforceConcurrency ?? 0, 0),
    installationTokenSeconds: checkInt(
      'installationTokenSeconds',
      opts.installationTokenSeconds ?? RESOURCE_DEFAULTS.installationTokenSeconds,
      1,
    ),
    rateLimits: opts.rateLimits ?? true,
    enforcePoints: opts.enforcePoints ?? RESOURCE_DEFAULTS.enforcePoints,
    pointsPerMinute: checkInt('pointsPerMinute', opts.pointsPerMinute ?? RESOURCE_DEFAULTS.pointsPerMinute, 1),
    graphqlPointsPerMinute: checkInt('graphqlPointsPerMinute', opts.graphqlPointsPerMinute ?? RESOURCE_DEFAULTS.graphqlPointsPerMinute, 1),
    noTransform: opts.noTransform ?? RESOURCE_DEFAULTS.noTransform,
  };
  if (typeof config.enforcePoints !== 'boolean')
    throw new TypeError(`enforcePoints must be a boolean, got ${String(config.enforcePoints)}`);
  if (typeof config.rateLimits !== 'boolean') throw new TypeError(`rateLimits must be a boolean, got ${String(config.rateLimits)}`);
  if (typeof config.noTransform !== 'boolean') throw new TypeError(`noTransform must be a boolean, got ${String(config.noTransform)}`);
  const orgRepoCount = checkInt('orgRepoCount', opts.orgRepoCount ?? 75, 0);
  if (opts.apps !== undefined && !Array.isArray(opts.apps)) throw new AppSpecError('apps must be an array of Apps');
  const basePath = normaliseBasePath(opts.basePath ?? '');
  const state = new FakeState(config, opts.tokens ?? DEMO_TOKENS, orgRepoCount, opts.apps ?? [], basePath);
  if (opts.faults !== undefined) {
    if (!Array.isArray(opts.faults)) throw new FaultSpecError('faults must be an array of rules');
    state.faults.set(opts.faults.map((r, i) => parseFaultRule(r, `faults[${i}]`)));
  }
  if (opts.webhookUrl !== undefined) state.webhooks.configure({ url: opts.webhookUrl, secret: opts.webhookSecret ?? null });
  const host = opts.host ?? '127.0.0.1';
  let url = '';
  const pipeline = createPipeline(
    () => state,
    () => url,
  );
  const server = createServer({ keepAliveTimeout: 5000 }, pipeline.handle);
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' || address.address.includes(':') ? `[${address.address}]` : address.address;
  url = `http://${shownHost}:${address.port}`;
  state.webhooks.apiBase = () => url + basePath;

  return {
    url,
    apiUrl: url + basePath,
    server,
    stats: () => state.stats.snapshot(),
    reset: () => state.reset(),
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const timer of pipeline.timers) clearTimeout(timer);
        pipeline.timers.clear();
        state.webhooks.close();
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
