/**
 * Quota-efficiency simulation: how many billable upstream calls etagere makes for a population of
 * consumers that must always see current data, against the same consumers going straight to the
 * API, and against the floor (one full fetch per resource version that somebody asked for).
 * Goal: etagere (policy `revalidate`) at most 1.05 x the floor, and never stale.
 * The webhook scenario: policy `max-age` with `cache.webhook_fresh_seconds` (600 simulated
 * seconds, scaled like every other time), the fake announcing each change with a signed webhook to
 * the proxy. Goal: at least 10 x fewer upstream requests (304s included) than `revalidate`, and a
 * staleness window (how long after a change a consumer could still be answered the old version)
 * of at most 1 s. The report sets the first against the freshness floor (bench/fresh-floor.ts): the
 * fewest upstream requests of any cache that honours webhook_fresh_seconds as a bound on the data's
 * age, which on this workload is about 7.4 x below revalidate's at 600 s: 10 x is out of reach there.
 *
 *   npm run bench:quota [-- --minutes N] [--smoke] [--minute-ms MS] [--rate N] [--seed N] [--json FILE]
 *   npm run bench:quota -- --rotation [--entries N] [--rotations N] [--options none,replace,...] [--smoke]
 *     the quota cost of token rotation instead (bench/rotation.ts)
 *   npm run bench:quota -- --pacing [--budget N] [--seconds N] [--smoke]
 *     pacing under GitHub's secondary limits instead (bench/pacing.ts)
 *   npm run bench:quota -- --hot-set [--seconds N] [--smoke]: refresh ahead on a hot set (bench/hot-set.ts)
 *   npm run bench:quota -- --retries [--smoke] [--seed N]   retries in transit under resets (bench/retries.ts)
 *   npm run bench:quota -- --answers [--minutes N] [--minute-ms MS] [--smoke]   GraphQL answers across replicas,
 *     a dashboard against GraphQL points, stored 404s, equivalent Accept values (bench/answers.ts)
 *   npm run bench:quota -- --fairness [--smoke] [--queue-timeout-ms N]   points shared fairly between consumers (bench/fairness.ts)
 *                       [--webhook-fresh-seconds N] [--only etagere-revalidate,etagere-webhooks,...]
 *
 * Workload (the same schedule for every scenario, generated from the seed):
 * - 50 consumers poll 2,000 repositories `/repos/etagere-org/repo-NNN` picked by Zipf (s = 1.0),
 *   20 requests per consumer per simulated minute (one every 3 simulated seconds), spread evenly.
 * - After each simulated minute, 20 distinct repositories (1 %) change through the fake's
 *   `POST /__fake/mutate`, picked by the same Zipf distribution (another stream of the seeded PRNG),
 *   so popular repositories change too. Minutes are barriers: no request is in flight during a
 *   mutation, so which version each request must see is known exactly.
 * - Time is compressed: a simulated minute lasts `--minute-ms` (default 1,000 ms) of wall time.
 *   Webhook deliveries are not: they take what they take on the machine, so the staleness window
 *   is wall time.
 *
 * Each scenario gets its own fake upstream (fresh state, one accepted token, huge limit) and, for
 * the etagere scenarios, its own proxy with that token as its only pool token. The scenarios run
 * side by side in this process, each on its own clock, so a default run takes about one wall
 * minute.
 */
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { startApp, type App } from '../src/main/app.js';
import { parseConfig } from '../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../fake-github/index.js';
import { parseTokenSpec } from '../fake-github/tokens.js';
import { createLogger } from '../src/platform/log/logger.js';
import { computeFreshnessFloor, type FreshnessFloor } from './fresh-floor.js';
import {
  formatRotation,
  rotationGoalFailures,
  runRotationBench,
  ROTATION_OPTIONS,
  type RotationOption,
  type RotationSettings,
} from './rotation.js';
import { formatHotSet, hotSetGoalFailures, runHotSetBench } from './hot-set.js';
import { runRetriesCli } from './retries.js';
import { answersGoalFailures, formatAnswers, runAnswersBench } from './answers.js';
import { runFairnessCli } from './fairness.js';
import { mulberry32, zipfSampler } from './zipf.js';
import { formatPacing, pacingGoalFailures, PACING_SMOKE, runPacingBench, type PacingSettings, UNPACED } from './pacing.js';

export type ScenarioId = 'etagere-revalidate' | 'etagere-max-age' | 'etagere-webhooks' | 'direct-no-cache' | 'direct-etag';

export const SCENARIO_IDS: readonly ScenarioId[] = [
  'etagere-revalidate',
  'etagere-max-age',
  'etagere-webhooks',
  'direct-no-cache',
  'direct-etag',
];

const SCENARIO_TEXT: Record<ScenarioId, string> = {
  'etagere-revalidate': 'etagere, policy revalidate (always current)',
  'etagere-max-age': 'etagere, policy max-age, cap = 1 simulated minute',
  'etagere-webhooks': 'etagere, max-age + webhooks',
  'direct-no-cache': 'baseline: direct, no cache',
  'direct-etag': 'direct, each consumer its own ETag cache',
};

export interface QuotaOptions {
  /** Simulated minutes. Default 60. */
  minutes?: number;
  /** Default 50. */
  consumers?: number;
  /** Repositories `etagere-org/repo-001` ... Default 2,000. */
  resources?: number;
  /** Distinct repositories changed after each simulated minute. Default 20 (1 % of 2,000). */
  changesPerMinute?: number;
  /** Requests per consumer per simulated minute. Default 20. */
  rate?: number;
  /** Wall milliseconds per simulated minute. Default 1,000 (60x compression). */
  minuteMs?: number;
  /** Zipf exponent. Default 1.0. */
  exponent?: number;
  /** The webhook scenario's cache.webhook_fresh_seconds, in simulated seconds. Default 600. */
  webhookFreshSeconds?: number;
  seed?: number;
  scenarios?: readonly ScenarioId[];
}

type Settings = Required<QuotaOptions>;

/** The token the fake accepts and the proxy holds as its only pool token. */
const TOKEN = 'quota_sim_token_1';
const TOKEN_SPEC = `${TOKEN}@alice:public_repo`;
const TOKEN_LIMIT = 1_000_000_000;
/** The webhook scenario's secret (the fake signs its deliveries with it). */
const WEBHOOK_SECRET = 'quota-sim-webhook-secret-0123456789';

export interface Schedule {
  /** requests[minute][consumer]: ranks (1-based repository numbers) in sending order. */
  requests: Uint16Array[][];
  /** mutations[minute]: distinct ranks changed after that minute's requests. */
  mutations: number[][];
}

export interface Floor {
  /** Distinct repositories requested at least once: the first full fetch of each is unavoidable. */
  initial: number;
  /** Changes that some later request had to see: for each repository, the versions after the first that were requested. */
  changesSeen: number;
  /** initial + changesSeen. */
  total: number;
  /** Mutations applied in all (some are never requested before the next change or the end). */
  mutations: number;
}

export interface ScenarioResult {
  id: ScenarioId;
  name: string;
  requests: number;
  /** Client responses other than 200. */
  errors: number;
  upstreamRequests: number;
  upstream304: number;
  /** The fake's quotaSpent delta during the run. */
  billable: number;
  per1000: number;
  /** billable / floor.total. */
  vsFloor: number;
  /** The webhook scenario only: upstreamRequests / freshnessFloor.total (304s count); null for the others. */
  vsFreshnessFloor: number | null;
  /** Responses whose body was older than the resource's current version. */
  stale: number;
  /** The staleness window: the longest a stale answer's request came after the change it missed (wall ms); null when none. */
  staleMaxMs: number | null;
  /** etagere only: responses served from the cache without contacting the upstream. */
  hits: number | null;
  /** etagere only: requests that joined an identical in-flight upstream request. */
  collapsed: number | null;
  /** Upstream requests the fake counted as anonymous (the pool token was not attached). */
  anonymousUpstream: number;
  wallSeconds: number;
  meanMinuteMs: number;
  maxMinuteMs: number;
}

export interface QuotaResults {
  settings: Settings;
  compression: number;
  windowSeconds: number;
  maxAgeCapSeconds: number;
  totalRequests: number;
  floor: Floor;
  floorPer1000: number;
  /**
   * The webhook scenario's freshness floor (bench/fresh-floor.ts): the fewest upstream requests,
   * 304s included, of any cache that never serves data more than webhook_fresh_seconds (as the
   * scenario applies it, in simulated seconds) after the upstream last sent or confirmed it, and
   * never an old version.
   */
  freshnessFloor: FreshnessFloor;
  /**
   * The same one wall second shorter: the proxy counts the Date header's one-second resolution as
   * age, so its entries stay fresh between that and webhook_fresh_seconds (60 simulated seconds at
   * the default compression; on GitHub, one second of 600).
   */
  freshnessFloorShort: FreshnessFloor;
  scenarios: ScenarioResult[];
  wallSeconds: number;
}

const DEFAULTS: Settings = {
  minutes: 60,
  consumers: 50,
  resources: 2000,
  changesPerMinute: 20,
  rate: 20,
  minuteMs: 1000,
  exponent: 1.0,
  webhookFreshSeconds: 600,
  seed: 20240601,
  scenarios: SCENARIO_IDS,
};

/** The fake names its repositories with three-digit padding: repo-001 ... repo-999, repo-1000 ... */
export const repoPath = (rank: number): string => `/repos/etagere-org/repo-${String(rank).padStart(3, '0')}`;

export function makeSchedule(settings: Settings): Schedule {
  const nextRequest = zipfSampler(settings.resources, settings.exponent, mulberry32(settings.seed));
  const nextChange = zipfSampler(settings.resources, settings.exponent, mulberry32(settings.seed ^ 0x5eed));
  const requests: Uint16Array[][] = [];
  const mutations: number[][] = [];
  for (let minute = 0; minute < settings.minutes; minute++) {
    const perConsumer: Uint16Array[] = [];
    for (let consumer = 0; consumer < settings.consumers; consumer++) {
      const ranks = new Uint16Array(settings.rate);
      for (let j = 0; j < settings.rate; j++) ranks[j] = nextRequest();
      perConsumer.push(ranks);
    }
    requests.push(perConsumer);
    const changed = new Set<number>();
    while (changed.size < Math.min(settings.changesPerMinute, settings.resources)) changed.add(nextChange());
    mutations.push([...changed]);
  }
  return { requests, mutations };
}

/** The floor, from the schedule alone: one full fetch per (repository, version) that a request asked for. */
export function computeFloor(schedule: Schedule, resources: number): Floor {
  const version = new Int32Array(resources + 1);
  const lastSeen = new Int32Array(resources + 1).fill(-1);
  let initial = 0;
  let changesSeen = 0;
  let mutations = 0;
  schedule.requests.forEach((perConsumer, minute) => {
    for (const ranks of perConsumer) {
      for (const rank of ranks) {
        const currentVersion = version[rank] ?? 0;
        if (lastSeen[rank] === currentVersion) continue;
        if (lastSeen[rank] === -1) initial++;
        else changesSeen++;
        lastSeen[rank] = currentVersion;
      }
    }
    for (const rank of schedule.mutations[minute] ?? []) {
      version[rank] = (version[rank] ?? 0) + 1;
      mutations++;
    }
  });
  return { initial, changesSeen, total: initial + changesSeen, mutations };
}

const STARS = '"stargazers_count":';

function starsOf(body: string): number {
  const index = body.indexOf(STARS);
  if (index === -1) return Number.NaN;
  return Number.parseInt(body.slice(index + STARS.length, index + STARS.length + 12), 10);
}

interface Target {
  url: string;
  fake: FakeUpstream;
  app: App | undefined;
}

/** A simulated duration in wall seconds (at least 1). */
const wallSeconds = (simulated: number, settings: Settings): number => Math.max(1, Math.round((simulated * settings.minuteMs) / 60_000));

function cacheFor(id: ScenarioId, settings: Settings, capSeconds: number): Record<string, unknown> {
  if (id === 'etagere-revalidate') return { policy: 'revalidate' };
  const maxAge = { policy: 'max-age', max_age_cap_seconds: capSeconds };
  return id === 'etagere-webhooks' ? { ...maxAge, webhook_fresh_seconds: wallSeconds(settings.webhookFreshSeconds, settings) } : maxAge;
}

/** webhook_fresh_seconds as the webhook scenario applies it (whole wall seconds), in simulated seconds. */
const appliedFreshSeconds = (settings: Settings): number =>
  (wallSeconds(settings.webhookFreshSeconds, settings) * 60_000) / settings.minuteMs;

async function startTarget(id: ScenarioId, settings: Settings, windowSeconds: number, capSeconds: number): Promise<Target> {
  const fake = await startFakeUpstream({
    orgRepoCount: settings.resources,
    tokens: parseTokenSpec(TOKEN_SPEC),
    tokenLimit: TOKEN_LIMIT,
    windowSeconds,
    latencyMs: 0,
  });
  if (id === 'direct-no-cache' || id === 'direct-etag') return { url: fake.url, fake, app: undefined };
  const cache = cacheFor(id, settings, capSeconds);
  const config = parseConfig({
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'silent' },
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache }],
    pool: { tokens: [{ name: 'sim', value: TOKEN }], points_per_minute: UNPACED },
    ...(id === 'etagere-webhooks' ? { webhooks: { secret: WEBHOOK_SECRET, owners: ['etagere-org'] } } : {}),
  });
  const app = await startApp(config, { logger: createLogger({ level: 'silent' }) });
  if (id === 'etagere-webhooks') {
    // The fake's changes are announced to the proxy's receiver, signed, as GitHub's org webhook would.
    const hook = { url: `${app.url}/_etagere/webhooks/github`, secret: WEBHOOK_SECRET };
    const res = await request(`${fake.url}/__fake/webhooks`, { method: 'POST', body: JSON.stringify(hook) });
    if (res.statusCode !== 200) throw new Error(`configuring the fake's webhook: ${res.statusCode}`);
    await res.body.dump();
  }
  return { url: app.url, fake, app };
}

async function runScenario(
  id: ScenarioId,
  settings: Settings,
  schedule: Schedule,
  floors: { floor: Floor; freshnessFloor: FreshnessFloor },
  windowSeconds: number,
  capSeconds: number,
): Promise<ScenarioResult> {
  const { floor, freshnessFloor } = floors;
  const target = await startTarget(id, settings, windowSeconds, capSeconds);
  const direct = target.app === undefined;
  const headers: Record<string, string> = direct ? { authorization: `token ${TOKEN}` } : {};
  /** Current version and star count of each repository on this scenario's fake (after mutations). */
  const version = new Int32Array(settings.resources + 1);
  const expectedStars = new Int32Array(settings.resources + 1);
  /** When each repository last changed (performance.now()). */
  const changedAt = new Float64Array(settings.resources + 1);
  let staleMaxMs: number | null = null;
  /** direct-etag: each consumer's own cache, rank -> [etag, stars]. */
  const own = Array.from({ length: settings.consumers }, () => new Map<number, [string, number]>());
  let requests = 0;
  let errors = 0;
  let stale = 0;
  let hits = 0;
  let collapsed = 0;
  const minuteMs: number[] = [];

  const before = target.fake.stats();
  const started = performance.now();
  try {
    for (let minute = 0; minute < settings.minutes; minute++) {
      // Minutes start on a fixed grid, so the compression holds on average; a request already due
      // (the previous minute overran) is sent at once.
      const minuteStart = started + minute * settings.minuteMs;
      const perConsumer = schedule.requests[minute] ?? [];
      await Promise.all(
        perConsumer.map(async (ranks, consumer) => {
          const mine = own[consumer]!;
          for (let j = 0; j < ranks.length; j++) {
            const rank = ranks[j]!;
            const due = minuteStart + ((j + consumer / settings.consumers) / ranks.length) * settings.minuteMs;
            const wait = due - performance.now();
            if (wait > 1) await sleep(wait);
            const cached = id === 'direct-etag' ? mine.get(rank) : undefined;
            const sentAt = performance.now();
            const res = await request(`${target.url}${repoPath(rank)}`, {
              headers: cached === undefined ? headers : { ...headers, 'if-none-match': cached[0] },
            });
            const text = await res.body.text();
            requests++;
            let stars: number;
            if (res.statusCode === 304 && cached !== undefined) {
              stars = cached[1];
            } else if (res.statusCode === 200) {
              stars = starsOf(text);
              const etag = res.headers.etag;
              if (id === 'direct-etag' && typeof etag === 'string') mine.set(rank, [etag, stars]);
            } else {
              errors++;
              continue;
            }
            if ((version[rank] ?? 0) > 0 && stars !== expectedStars[rank]) {
              stale++;
              staleMaxMs = Math.max(staleMaxMs ?? 0, sentAt - (changedAt[rank] ?? 0));
            }
            const status = res.headers['cache-status'];
            if (typeof status === 'string') {
              if (status.includes('; hit')) hits++;
              if (status.includes('collapsed')) collapsed++;
            }
          }
        }),
      );
      const left = minuteStart + settings.minuteMs - performance.now();
      if (left > 1) await sleep(left);
      await Promise.all(
        (schedule.mutations[minute] ?? []).map(async (rank) => {
          const res = await request(`${target.fake.url}/__fake/mutate`, { method: 'POST', body: JSON.stringify({ path: repoPath(rank) }) });
          const out = (await res.body.json()) as { changed?: { stargazers_count?: { to?: number } } };
          if (res.statusCode !== 200) throw new Error(`mutate ${repoPath(rank)}: ${res.statusCode}`);
          version[rank] = (version[rank] ?? 0) + 1;
          expectedStars[rank] = out.changed?.stargazers_count?.to ?? Number.NaN;
          changedAt[rank] = performance.now();
        }),
      );
      minuteMs.push(performance.now() - minuteStart);
    }
  } finally {
    await target.app?.close();
  }
  const wallSeconds = (performance.now() - started) / 1000;
  const after = target.fake.stats();
  await target.fake.close();
  const billable = after.quotaSpent - before.quotaSpent;
  return {
    id,
    name:
      id === 'etagere-webhooks'
        ? `${SCENARIO_TEXT[id]}, webhook_fresh_seconds ${settings.webhookFreshSeconds} simulated`
        : SCENARIO_TEXT[id],
    requests,
    errors,
    upstreamRequests: after.total - before.total,
    upstream304: after.notModified - before.notModified,
    billable,
    per1000: requests === 0 ? 0 : (billable / requests) * 1000,
    vsFloor: floor.total === 0 ? 0 : billable / floor.total,
    vsFreshnessFloor: id === 'etagere-webhooks' && freshnessFloor.total > 0 ? (after.total - before.total) / freshnessFloor.total : null,
    stale,
    staleMaxMs,
    hits: direct ? null : hits,
    collapsed: direct ? null : collapsed,
    anonymousUpstream: (after.byCredential.anonymous ?? 0) - (before.byCredential.anonymous ?? 0),
    wallSeconds,
    meanMinuteMs: minuteMs.reduce((a, b) => a + b, 0) / Math.max(1, minuteMs.length),
    maxMinuteMs: Math.max(0, ...minuteMs),
  };
}

export async function runQuotaSimulation(opts: QuotaOptions = {}): Promise<QuotaResults> {
  const settings: Settings = { ...DEFAULTS, ...opts };
  if (!Number.isInteger(settings.minutes) || settings.minutes < 1)
    throw new RangeError(`minutes must be a positive integer, got ${settings.minutes}`);
  if (settings.resources > 65535) throw new RangeError('at most 65,535 resources');
  if (!(settings.minuteMs >= 1)) throw new RangeError(`minuteMs must be at least 1, got ${settings.minuteMs}`);
  const compression = 60_000 / settings.minuteMs;
  const windowSeconds = Math.max(1, Math.round(3600 / compression));
  const capSeconds = Math.max(1, Math.round(settings.minuteMs / 1000));
  const schedule = makeSchedule(settings);
  const floor = computeFloor(schedule, settings.resources);
  const freshnessFloor = computeFreshnessFloor(schedule, appliedFreshSeconds(settings));
  const freshnessFloorShort = computeFreshnessFloor(schedule, Math.max(0, appliedFreshSeconds(settings) - 60_000 / settings.minuteMs));
  const totalRequests = settings.minutes * settings.consumers * settings.rate;
  const started = performance.now();
  const scenarios = await Promise.all(
    settings.scenarios.map((id) => runScenario(id, settings, schedule, { floor, freshnessFloor }, windowSeconds, capSeconds)),
  );
  return {
    settings,
    compression,
    windowSeconds,
    maxAgeCapSeconds: capSeconds,
    totalRequests,
    floor,
    floorPer1000: (floor.total / totalRequests) * 1000,
    freshnessFloor,
    freshnessFloorShort,
    scenarios,
    wallSeconds: (performance.now() - started) / 1000,
  };
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)));
  return rows.map((row) => `| ${row.map((cell, c) => cell.padEnd(widths[c]!)).join(' | ')} |`).join('\n');
}

const formatCount = (v: number): string => v.toLocaleString('en-US');

export function formatQuota(results: QuotaResults): string {
  const settings = results.settings;
  const simSecondsFresh = (results.maxAgeCapSeconds * 1000 * 60) / settings.minuteMs;
  const lines = [
    `quota simulation: ${settings.consumers} consumers, ${formatCount(settings.resources)} repositories (Zipf s=${settings.exponent}, seed ${settings.seed}), ` +
      `${settings.rate} requests per consumer per simulated minute, ${settings.changesPerMinute} repositories changed after each minute, ${settings.minutes} simulated minutes`,
    `time: 1 simulated minute = ${settings.minuteMs} ms wall (compression ${results.compression.toFixed(0)}x); the fake's quota window is scaled the same way ` +
      `(3600 s -> ${results.windowSeconds} s) with ${formatCount(TOKEN_LIMIT)} requests per window, so it never binds; one token, so a 304 to it is free`,
    `requests: ${formatCount(results.totalRequests)} per scenario; mutations: ${formatCount(results.floor.mutations)}`,
    `floor: ${formatCount(results.floor.total)} billable calls = ${formatCount(results.floor.initial)} first fetches (distinct repositories requested) + ` +
      `${formatCount(results.floor.changesSeen)} changes seen (a repository version, after its first, that at least one request asked for; ` +
      `several changes between two requests count once) = ${results.floorPer1000.toFixed(2)} per 1,000 requests. ` +
      `No cache that always serves current data can spend less.`,
    '',
    table([
      [
        'scenario',
        'requests',
        'upstream (304)',
        'billable',
        'per 1,000 req',
        'x floor',
        'stale',
        'stale max ms',
        'hits',
        'collapsed',
        'errors',
        'minute ms mean/max',
      ],
      [
        'floor',
        formatCount(results.totalRequests),
        '',
        formatCount(results.floor.total),
        results.floorPer1000.toFixed(2),
        '1.000',
        '',
        '',
        '',
        '',
        '',
        '',
      ],
      ...results.scenarios.map((scenario) => [
        scenario.name,
        formatCount(scenario.requests),
        `${formatCount(scenario.upstreamRequests)} (${formatCount(scenario.upstream304)})`,
        formatCount(scenario.billable),
        scenario.per1000.toFixed(2),
        scenario.vsFloor.toFixed(3),
        formatCount(scenario.stale),
        scenario.staleMaxMs === null ? '-' : scenario.staleMaxMs.toFixed(0),
        scenario.hits === null ? '-' : formatCount(scenario.hits),
        scenario.collapsed === null ? '-' : formatCount(scenario.collapsed),
        formatCount(scenario.errors),
        `${scenario.meanMinuteMs.toFixed(0)}/${scenario.maxMinuteMs.toFixed(0)}`,
      ]),
    ]),
    '',
    "billable = the fake's quotaSpent delta (200s; a 304 to the token is free). stale = responses older than the repository's current version.",
    `etagere revalidate checks every request upstream (If-None-Match, a free 304 when unchanged): always current. It is held to the goal.`,
    `etagere max-age: the fake says max-age=60, which time compression does not scale, so it runs with cache.max_age_cap_seconds: ${results.maxAgeCapSeconds} ` +
      `(= ${simSecondsFresh.toFixed(0)} simulated seconds). The Date header's one-second resolution counts as age, so an entry is in practice fresh for ` +
      `0-${results.maxAgeCapSeconds} s of wall time, about half of it on average (real GitHub: 59-60 s of 60). It serves data up to that old (see stale) ` +
      'and could go below the floor: not comparable, no goal.',
    `etagere max-age + webhooks: covered paths stay fresh for cache.webhook_fresh_seconds = ${wallSeconds(settings.webhookFreshSeconds, settings)} s ` +
      `(${settings.webhookFreshSeconds} simulated seconds), and the fake announces each change (a star: the star and watch events) with a signed ` +
      "webhook to the proxy, which marks the repository stale on delivery. Held to: upstream requests (304s included) at most a tenth of revalidate's, " +
      'stale max ms (the longest a consumer was answered the old version after a change, wall time) at most 1,000.',
    ...freshnessFloorLines(results),
    'direct, own ETag cache: every consumer revalidates its own copies with the token (free 304s) but fetches each change once per consumer.',
    `wall time: ${results.wallSeconds.toFixed(1)} s (scenarios side by side in one process, each on its own clock; a minute longer than ${settings.minuteMs} ms means the machine fell behind)`,
  ];
  return lines.join('\n');
}

/** The webhook scenario against its freshness floor (bench/fresh-floor.ts); nothing when it did not run. */
function freshnessFloorLines(results: QuotaResults): string[] {
  const webhooks = results.scenarios.find((scenario) => scenario.id === 'etagere-webhooks');
  if (webhooks === undefined) return [];
  const revalidate = results.scenarios.find((scenario) => scenario.id === 'etagere-revalidate');
  const { freshnessFloor: floor, freshnessFloorShort: short } = results;
  const ratio = (requests: number): string => (requests / Math.max(1, floor.total)).toFixed(3);
  const vsRevalidate =
    revalidate === undefined
      ? ''
      : `; revalidate / floor = ${ratio(revalidate.upstreamRequests)} (${formatCount(revalidate.upstreamRequests)} upstream requests: the most fewer than revalidate any cache honouring F can make)`;
  return [
    `freshness floor at F = ${formatCount(floor.freshSeconds)} simulated s = ${formatCount(floor.total)} upstream requests${vsRevalidate}; ` +
      `webhook scenario / floor = ${ratio(webhooks.upstreamRequests)} (${formatCount(webhooks.upstreamRequests)}). ` +
      `The floor is the fewest upstream requests, 304s included, of any cache that never serves data more than F after the upstream sent or confirmed it ` +
      `(what bounds its age when a delivery is missed) and never an old version: ${formatCount(floor.initial)} first fetches + ${formatCount(floor.changesSeen)} changes seen + ` +
      `${formatCount(floor.expired)} revalidations when F ran out. One wall second shorter (F = ${formatCount(short.freshSeconds)} simulated s) it is ` +
      `${formatCount(short.total)}: the proxy counts the Date header's one-second resolution as age, so its entries stay fresh between the two.`,
  ];
}

/** Goals: etagere revalidate <= 1.05 x the floor, never stale; no errors anywhere; the pool token always attached. */
export function quotaGoalFailures(results: QuotaResults): string[] {
  const out: string[] = [];
  for (const scenario of results.scenarios) {
    if (scenario.errors > 0) out.push(`${scenario.name}: ${scenario.errors} responses other than 200`);
    if (scenario.id === 'etagere-revalidate') {
      if (scenario.vsFloor > 1.05)
        out.push(
          `${scenario.name}: ${scenario.billable} billable calls = ${scenario.vsFloor.toFixed(3)} x the floor (${results.floor.total}); goal <= 1.05`,
        );
      if (scenario.stale > 0) out.push(`${scenario.name}: ${scenario.stale} stale responses; goal 0`);
    }
    if (scenario.id === 'etagere-webhooks') out.push(...webhookGoalFailures(scenario));
    if ((scenario.id === 'direct-no-cache' || scenario.id === 'direct-etag') && scenario.stale > 0)
      out.push(`${scenario.name}: ${scenario.stale} stale responses (harness error)`);
    if (scenario.id.startsWith('etagere') && scenario.anonymousUpstream > 0)
      out.push(`${scenario.name}: ${scenario.anonymousUpstream} upstream requests without the pool token`);
  }
  return out;
}

type Flags = Readonly<Record<string, string | boolean | undefined>>;

const text = (value: string | boolean | undefined): string | undefined => (typeof value === 'string' ? value : undefined);

/** `--rotation`: the quota cost of token rotation (bench/rotation.ts). */
function runRotation(values: Flags, num: (value: string | undefined) => number | undefined): void {
  const opts: Partial<RotationSettings> = {};
  const entries = num(text(values.entries)) ?? (values.smoke === true ? 200 : undefined);
  if (entries !== undefined) opts.entries = entries;
  const rotations = num(text(values.rotations)) ?? (values.smoke === true ? 1 : undefined);
  if (rotations !== undefined) opts.rotations = rotations;
  const seed = num(text(values.seed));
  if (seed !== undefined) opts.seed = seed;
  if (typeof values.options === 'string') {
    const chosen = values.options.split(',').map((option) => option.trim());
    const unknown = chosen.filter((option) => !(ROTATION_OPTIONS as readonly string[]).includes(option));
    if (unknown.length > 0) {
      process.stderr.write(`quota --rotation: --options: unknown ${unknown.join(', ')} (known: ${ROTATION_OPTIONS.join(', ')})\n`);
      process.exit(2);
    }
    opts.options = chosen as RotationOption[];
  }
  runRotationBench(opts).then(
    (results) => {
      if (typeof values.json === 'string') writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
      const failures = rotationGoalFailures(results);
      const verdict = failures.length > 0 ? `rotation: goals not met:\n  ${failures.join('\n  ')}\n` : 'rotation: goals met\n';
      process.stdout.write(`${formatRotation(results)}\n${verdict}`, () =>
        process.exit(values.smoke === true && failures.length > 0 ? 1 : 0),
      );
    },
    (err: unknown) => {
      process.stderr.write(`rotation: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}

/** `--pacing`: pacing under GitHub's secondary limits (bench/pacing.ts). */
function runPacing(values: Flags, num: (value: string | undefined) => number | undefined): void {
  const opts: Partial<PacingSettings> = values.smoke === true ? { ...PACING_SMOKE } : {};
  const budget = num(text(values.budget));
  if (budget !== undefined) opts.budget = budget;
  const seconds = num(text(values.seconds));
  if (seconds !== undefined) opts.seconds = seconds;
  runPacingBench(opts).then(
    (results) => {
      if (typeof values.json === 'string') writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
      const failures = pacingGoalFailures(results);
      const verdict = failures.length > 0 ? `pacing: goals not met:\n  ${failures.join('\n  ')}\n` : 'pacing: goals met\n';
      process.stdout.write(`${formatPacing(results)}\n${verdict}`, () => process.exit(failures.length > 0 ? 1 : 0));
    },
    (err: unknown) => {
      process.stderr.write(`pacing: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}

/** `--hot-set`: refresh ahead on a hot set (bench/hot-set.ts). */
function runHotSet(values: Flags, num: (value: string | undefined) => number | undefined): void {
  const seconds = num(text(values.seconds)) ?? (values.smoke === true ? 12 : undefined);
  const seed = num(text(values.seed));
  runHotSetBench({ ...(seconds === undefined ? {} : { seconds }), ...(seed === undefined ? {} : { seed }) }).then(
    (results) => {
      if (typeof values.json === 'string') writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
      const failures = hotSetGoalFailures(results);
      const verdict = failures.length > 0 ? `hot set: goals not met:\n  ${failures.join('\n  ')}\n` : 'hot set: goals met\n';
      process.stdout.write(`${formatHotSet(results)}\n${verdict}`, () =>
        process.exit(values.smoke === true && failures.length > 0 ? 1 : 0),
      );
    },
    (err: unknown) => {
      process.stderr.write(`hot set: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}

/** `--answers`: every answer the cache can give (bench/answers.ts); the smoke compresses a minute into 6 s. */
function runAnswers(values: Flags, num: (value: string | undefined) => number | undefined): void {
  const minutes = num(text(values.minutes));
  const minuteMs = num(text(values['minute-ms'])) ?? (values.smoke === true ? 6_000 : undefined);
  runAnswersBench({ ...(minutes === undefined ? {} : { minutes }), ...(minuteMs === undefined ? {} : { minuteMs }) }).then(
    (results) => {
      if (typeof values.json === 'string') writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
      const failures = answersGoalFailures(results);
      const verdict = failures.length > 0 ? `answers: goals not met:\n  ${failures.join('\n  ')}\n` : 'answers: goals met\n';
      process.stdout.write(`${formatAnswers(results)}\n${verdict}`, () => process.exit(failures.length > 0 ? 1 : 0));
    },
    (err: unknown) => {
      process.stderr.write(`answers: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}

function runQuota(values: Flags, num: (value: string | undefined) => number | undefined): void {
  const opts: QuotaOptions = {};
  const minutes = num(text(values.minutes)) ?? (values.smoke === true ? 3 : undefined);
  if (minutes !== undefined) opts.minutes = minutes;
  const minuteMs = num(text(values['minute-ms']));
  if (minuteMs !== undefined) opts.minuteMs = minuteMs;
  const rate = num(text(values.rate));
  if (rate !== undefined) opts.rate = rate;
  const seed = num(text(values.seed));
  if (seed !== undefined) opts.seed = seed;
  const webhookFresh = num(text(values['webhook-fresh-seconds']));
  if (webhookFresh !== undefined) opts.webhookFreshSeconds = webhookFresh;
  const only = text(values.only);
  if (only !== undefined)
    opts.scenarios = only.split(',').filter((id): id is ScenarioId => (SCENARIO_IDS as readonly string[]).includes(id));
  runQuotaSimulation(opts).then(
    (results) => {
      if (typeof values.json === 'string') writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
      const failures = quotaGoalFailures(results);
      const reported = quotaReportedGoals(results).map((line) => `quota (reported, not failed): ${line}\n`);
      const verdict = failures.length > 0 ? `quota: goals not met:\n  ${failures.join('\n  ')}\n` : 'quota: goals met\n';
      process.stdout.write(`${formatQuota(results)}\n${reported.join('')}${verdict}`, () =>
        process.exit(values.smoke === true && failures.length > 0 ? 1 : 0),
      );
    },
    (err: unknown) => {
      process.stderr.write(`quota: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}

/** A staleness window of at most 1 s (a failure; the 10x target is reported: quotaReportedGoals). */
function webhookGoalFailures(scenario: ScenarioResult): string[] {
  if (scenario.staleMaxMs === null || scenario.staleMaxMs <= 1000) return [];
  return [`${scenario.name}: a consumer saw an old version ${scenario.staleMaxMs.toFixed(0)} ms after its change; goal <= 1,000 ms`];
}

/**
 * Targets reported, never failed: at least 10x fewer upstream requests than revalidate
 * with webhooks. It depends on the simulated hour (a short run, as the smoke's 3 minutes, is mostly
 * first fetches) and on webhook_fresh_seconds: each line says how far any cache that never serves
 * data older than that could get (revalidate / the freshness floor, bench/fresh-floor.ts). At 600
 * simulated seconds that is about 7.4x on the default workload, so 10x is unreachable there for a
 * cache that keeps the bound; at 3600 it is met (BENCHMARKS.md).
 */
export function quotaReportedGoals(results: QuotaResults): string[] {
  const revalidate = results.scenarios.find((other) => other.id === 'etagere-revalidate');
  const out: string[] = [];
  for (const scenario of results.scenarios) {
    if (scenario.id !== 'etagere-webhooks' || revalidate === undefined) continue;
    if (scenario.upstreamRequests * 10 > revalidate.upstreamRequests)
      out.push(
        `${scenario.name}: ${scenario.upstreamRequests} upstream requests = ${(revalidate.upstreamRequests / Math.max(1, scenario.upstreamRequests)).toFixed(1)}x fewer than revalidate's ${revalidate.upstreamRequests}; target >= 10x; ` +
          `at most ${(revalidate.upstreamRequests / Math.max(1, results.freshnessFloor.total)).toFixed(1)}x for any cache honouring webhook_fresh_seconds (freshness floor ${results.freshnessFloor.total})`,
      );
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string' },
      smoke: { type: 'boolean', default: false },
      'minute-ms': { type: 'string' },
      rate: { type: 'string' },
      seed: { type: 'string' },
      'webhook-fresh-seconds': { type: 'string' },
      only: { type: 'string' },
      json: { type: 'string' },
      rotation: { type: 'boolean', default: false },
      'hot-set': { type: 'boolean', default: false },
      seconds: { type: 'string' },
      entries: { type: 'string' },
      rotations: { type: 'string' },
      options: { type: 'string' },
      pacing: { type: 'boolean', default: false },
      budget: { type: 'string' },
      retries: { type: 'boolean', default: false },
      answers: { type: 'boolean', default: false },
      fairness: { type: 'boolean', default: false },
      'interval-ms': { type: 'string' },
      misses: { type: 'string' },
      'queue-timeout-ms': { type: 'string' },
    },
    strict: true,
  });
  const num = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));
  if (values['hot-set']) runHotSet(values, num);
  else if (values.rotation) runRotation(values, num);
  else if (values.pacing) runPacing(values, num);
  else if (values.retries) runRetriesCli(values);
  else if (values.answers) runAnswers(values, num);
  else if (values.fairness) runFairnessCli(values);
  else runQuota(values, num);
}
