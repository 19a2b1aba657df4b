/**
 * Token-pool simulation: how much of the pool's aggregate quota the proxy spends before a client
 * first sees a 429, and how many 403/429 the upstream answers on the way (goal: at least 99 %
 * and 0). Runs the fake GitHub API and a proxy in this process, with small quotas and many
 * concurrent clients sending uncached GETs. A mixed scenario runs core and search clients together:
 * search spends its own budget (30 a minute per token), core as if alone.
 *
 *   npm run bench:pool [-- --smoke] [--json FILE]
 *
 * Also run at the end of `npm run bench` (and of its --smoke, which fails below the goals).
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { startApp } from '../src/main/app.js';
import { parseConfig } from '../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../fake-github/index.js';
import { parseTokenSpec } from '../fake-github/tokens.js';
import { createLogger } from '../src/platform/log/logger.js';
import { UNPACED } from './pacing.js';

export interface Scenario {
  name: string;
  tokens: number;
  limit: number;
  concurrency: number;
  latencyMs: number;
  /** Units spent directly on the token at `tokenIndex` before the run, so tokens start uneven. */
  preSpend?: (tokenIndex: number) => number;
  /** One extra token that the upstream rejects (401). */
  deadToken?: boolean;
  /** Secondary-limit answers injected on the first token (each pauses it). */
  secondary?: number;
}

export interface SimResult {
  scenario: string;
  aggregate: number;
  spent: number;
  share: number;
  served: number;
  firstClient429AtRequest: number | null;
  upstream403: number;
  upstream429: number;
  injected: number;
  seconds: number;
}

export const SCENARIOS: Scenario[] = [
  { name: 'even: 5 tokens x 200, 32 clients', tokens: 5, limit: 200, concurrency: 32, latencyMs: 2 },
  {
    name: 'uneven start: 4 tokens, 0/50/120/190 spent',
    tokens: 4,
    limit: 200,
    concurrency: 32,
    latencyMs: 2,
    preSpend: (i) => [0, 50, 120, 190][i] ?? 0,
  },
  {
    name: 'faults: + 1 dead token, 2 secondary limits',
    tokens: 5,
    limit: 200,
    concurrency: 32,
    latencyMs: 2,
    deadToken: true,
    secondary: 2,
  },
  { name: 'saturated: 3 tokens x 100, 128 clients', tokens: 3, limit: 100, concurrency: 128, latencyMs: 5 },
];

const tokenValue = (i: number): string => `sim_pool_token_${String(i).padStart(2, '0')}`;

async function spend(fake: FakeUpstream, token: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const res = await request(`${fake.url}/users/octocat?pre=${i}`, { headers: { authorization: `token ${token}` } });
    await res.body.dump();
  }
}

export async function simulate(sc: Scenario): Promise<SimResult> {
  const values = Array.from({ length: sc.tokens }, (_, i) => tokenValue(i));
  const spec = values.map((v, i) => `${v}@sim-${i}:public_repo`).join(',');
  const fake = await startFakeUpstream({
    tokens: parseTokenSpec(spec),
    tokenLimit: sc.limit,
    windowSeconds: 3600,
    latencyMs: sc.latencyMs,
  });
  for (let i = 0; i < sc.tokens; i++) await spend(fake, values[i]!, sc.preSpend?.(i) ?? 0);
  const aggregate = sc.tokens * sc.limit - Array.from({ length: sc.tokens }, (_, i) => sc.preSpend?.(i) ?? 0).reduce((a, b) => a + b, 0);
  const spentBefore = fake.stats().quotaSpent;
  const poolTokens = values.map((value, i) => ({ name: `t${i}`, value }));
  if (sc.deadToken === true) poolTokens.push({ name: 'dead', value: 'sim_pool_token_revoked' });
  const config = parseConfig({
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, connections: 256 }],
    pool: { tokens: poolTokens, max_concurrency: 90, points_per_minute: UNPACED },
  });
  const app = await startApp(config, { logger: createLogger({ level: 'silent' }) });
  if (sc.secondary !== undefined) {
    const res = await request(`${fake.url}/__fake/secondary`, {
      method: 'POST',
      body: JSON.stringify({ count: sc.secondary, status: 429, retryAfter: 1, token: values[0] }),
    });
    await res.body.dump();
  }
  const started = Date.now();
  let next = 0;
  let served = 0;
  let first429: number | null = null;
  const client = async (): Promise<void> => {
    while (first429 === null) {
      const requestNumber = ++next;
      const res = await request(`${app.url}/repos/octocat/hello-world?sim=${requestNumber}`);
      await res.body.dump();
      if (res.statusCode === 200) served++;
      else if (res.statusCode === 429) first429 ??= requestNumber;
      else throw new Error(`unexpected ${res.statusCode} for request ${requestNumber}`);
    }
  };
  try {
    await Promise.all(Array.from({ length: sc.concurrency }, client));
  } finally {
    await app.close();
  }
  const stats = fake.stats();
  await fake.close();
  // A 401 spends the caller's anonymous quota on the fake, not a pool token's.
  const spent = stats.quotaSpent - spentBefore - (stats.byStatus['401'] ?? 0);
  return {
    scenario: sc.name,
    aggregate,
    spent,
    share: spent / aggregate,
    served,
    firstClient429AtRequest: first429,
    upstream403: stats.byStatus['403'] ?? 0,
    upstream429: (stats.byStatus['429'] ?? 0) - (sc.secondary ?? 0),
    injected: sc.secondary ?? 0,
    seconds: (Date.now() - started) / 1000,
  };
}

export function formatResults(results: readonly SimResult[]): string {
  const rows = [
    ['scenario', 'aggregate quota', 'spent before 1st client 429', 'share', 'upstream 403', 'upstream 429 (not injected)', 'seconds'],
    ...results.map((result) => [
      result.scenario,
      String(result.aggregate),
      String(result.spent),
      `${(result.share * 100).toFixed(2)} %`,
      String(result.upstream403),
      String(result.upstream429),
      result.seconds.toFixed(2),
    ]),
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)));
  return rows.map((row) => `| ${row.map((cell, c) => cell.padEnd(widths[c]!)).join(' | ')} |`).join('\n');
}

/** Goals: share >= 99 % and no upstream 403/429 that was not injected. */
export function poolGoalFailures(results: readonly SimResult[]): string[] {
  const out: string[] = [];
  for (const result of results) {
    if (result.share < 0.99)
      out.push(`${result.scenario}: only ${(result.share * 100).toFixed(2)} % of the quota spent before the first 429`);
    if (result.upstream403 > 0 || result.upstream429 > 0)
      out.push(`${result.scenario}: upstream answered ${result.upstream403} x 403 and ${result.upstream429} x 429`);
  }
  return out;
}

export async function runPoolSimulation(): Promise<SimResult[]> {
  const results: SimResult[] = [];
  for (const sc of SCENARIOS) results.push(await simulate(sc));
  return results;
}

// ---------------------------------------------------------------------------------------------
// Two consumers, one greedy: the other still gets at least its reserve, and its
// requests never wait behind the greedy burst for more than a second.

export interface ConsumerSimResult {
  scenario: string;
  aggregate: number;
  /** The polite consumer's reserve: reserve_fraction of its share. */
  reserve: number;
  greedyServed: number;
  greedyRefused: number;
  /** Polite requests served while the greedy burst ran, and their slowest answer (ms). */
  politeDuringBurst: number;
  politeMaxWaitMs: number;
  politeP50WaitMs: number;
  /** Polite requests served in all before its first 429 (the burst's and after). */
  politeServed: number;
  upstream403: number;
  upstream429: number;
  seconds: number;
}

export const CONSUMER_SCENARIO = {
  name: 'two consumers, one greedy: 5 tokens x 400, 200 greedy clients, 20 slots',
  tokens: 5,
  limit: 400,
  latencyMs: 25,
  greedyClients: 200,
  reserveFraction: 0.5,
  /** false: consumer keys off, one queue and one budget for all, for comparison. */
  fairShare: true as boolean,
};

const percentile = (sorted: readonly number[], fraction: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? 0;

/** Waits until the clock is not within 30 s of the end of an hour (the core window of the fair share). */
async function awayFromHourEdge(): Promise<void> {
  const hour = 3_600_000;
  while (hour - (Date.now() % hour) < 30_000) await new Promise<void>((resolve) => setTimeout(resolve, 1_000));
}

export async function simulateGreedyConsumer(sc = CONSUMER_SCENARIO): Promise<ConsumerSimResult> {
  await awayFromHourEdge();
  const values = Array.from({ length: sc.tokens }, (_, i) => tokenValue(i));
  const fake = await startFakeUpstream({
    tokens: parseTokenSpec(values.map((v, i) => `${v}@sim-${i}:public_repo`).join(',')),
    tokenLimit: sc.limit,
    windowSeconds: 3600,
    latencyMs: sc.latencyMs,
  });
  const keys = { greedy: 'sim_consumer_key_greedy', polite: 'sim_consumer_key_polite' };
  const config = parseConfig({
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, connections: 256 }],
    pool: {
      tokens: values.map((value, i) => ({ name: `t${i}`, value })),
      per_token_concurrency: 4,
      max_concurrency: 20,
      points_per_minute: UNPACED,
    },
    consumers: {
      enabled: sc.fairShare,
      reserve_fraction: sc.reserveFraction,
      keys: [
        { name: 'greedy', value: keys.greedy },
        { name: 'polite', value: keys.polite },
      ],
    },
  });
  const app = await startApp(config, { logger: createLogger({ level: 'silent' }) });
  const aggregate = sc.tokens * sc.limit;
  const started = Date.now();
  let sequence = 0;
  const get = async (key: string): Promise<number> => {
    const res = await request(`${app.url}/repos/octocat/hello-world?sim=${++sequence}`, { headers: { 'x-etagere-key': key } });
    await res.body.dump();
    return res.statusCode;
  };
  let greedyServed = 0;
  let greedyRefused = 0;
  let burstOver = false;
  const greedyClient = async (): Promise<void> => {
    for (;;) {
      const status = await get(keys.greedy);
      if (status === 200) greedyServed++;
      else if (status === 429) return void greedyRefused++;
      else throw new Error(`greedy: unexpected ${status}`);
    }
  };
  const waits: number[] = [];
  let politeServed = 0;
  const politeDuringBurst = async (): Promise<void> => {
    while (!burstOver) {
      const sent = performance.now();
      const status = await get(keys.polite);
      waits.push(performance.now() - sent);
      if (status === 200) politeServed++;
      await new Promise<void>((resolve) => setTimeout(resolve, 20));
    }
  };
  try {
    const polite = politeDuringBurst();
    await Promise.all(Array.from({ length: sc.greedyClients }, greedyClient));
    burstOver = true;
    await polite;
    const during = politeServed;
    // After the burst: the polite consumer spends until refused, 8 at a time.
    let refused = false;
    while (!refused) {
      const statuses = await Promise.all(Array.from({ length: 8 }, () => get(keys.polite)));
      politeServed += statuses.filter((status) => status === 200).length;
      refused = statuses.some((status) => status !== 200);
    }
    const stats = fake.stats();
    const sorted = [...waits].sort((a, b) => a - b);
    return {
      scenario: sc.name,
      aggregate,
      reserve: (aggregate / 2) * sc.reserveFraction,
      greedyServed,
      greedyRefused,
      politeDuringBurst: during,
      politeMaxWaitMs: sorted.at(-1) ?? 0,
      politeP50WaitMs: percentile(sorted, 0.5),
      politeServed,
      upstream403: stats.byStatus['403'] ?? 0,
      upstream429: stats.byStatus['429'] ?? 0,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    await app.close();
    await fake.close();
  }
}

export function formatConsumerResult(result: ConsumerSimResult): string {
  const rows = [
    [
      'scenario',
      'pool quota',
      'greedy served',
      'polite reserve',
      'polite served',
      'polite wait p50 / max (ms)',
      'upstream 403/429',
      'seconds',
    ],
    [
      result.scenario,
      String(result.aggregate),
      String(result.greedyServed),
      String(result.reserve),
      `${result.politeServed} (${result.politeDuringBurst} during the burst)`,
      `${result.politeP50WaitMs.toFixed(0)} / ${result.politeMaxWaitMs.toFixed(0)}`,
      `${result.upstream403}/${result.upstream429}`,
      result.seconds.toFixed(2),
    ],
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)));
  return rows.map((row) => `| ${row.map((cell, c) => cell.padEnd(widths[c]!)).join(' | ')} |`).join('\n');
}

/** Goals: the polite consumer gets at least its reserve, never waits a second, and the upstream never refuses. */
export function consumerGoalFailures(result: ConsumerSimResult): string[] {
  const out: string[] = [];
  if (result.politeServed < result.reserve)
    out.push(`${result.scenario}: polite served ${result.politeServed} < its reserve ${result.reserve}`);
  if (result.politeMaxWaitMs > 1_000) out.push(`${result.scenario}: polite waited up to ${result.politeMaxWaitMs.toFixed(0)} ms`);
  if (result.upstream403 > 0 || result.upstream429 > 0)
    out.push(`${result.scenario}: upstream answered ${result.upstream403} x 403 and ${result.upstream429} x 429`);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Core and search together: search spends its own budget (30 a minute per token
// on GitHub), core is unaffected. Core clients spend the pool's core quota as in `simulate` while
// search clients search without pause; neither may meet an upstream 403/429.

export interface MixedSimResult {
  scenario: string;
  /** Core: the pool's quota, what was spent before the first core 429, and its share. */
  coreAggregate: number;
  coreSpent: number;
  coreShare: number;
  /** Search: the pool's budget for the window (tokens x searchLimit), what the upstream counted, what clients got. */
  searchBudget: number;
  searchSpent: number;
  searchServed: number;
  /** Searches the proxy answered 429 itself (the pool's search budget was spent): never forwarded. */
  searchRefused: number;
  upstream403: number;
  upstream429: number;
  seconds: number;
}

export const MIXED_SCENARIO = {
  name: 'core + search: 3 tokens x 200 core, x 30 search a minute; 24 core and 6 search clients',
  tokens: 3,
  limit: 200,
  searchLimit: 30,
  coreClients: 24,
  searchClients: 6,
  latencyMs: 2,
};

/** A token's use of one resource, as the fake's GET /rate_limit tells it. */
async function usedOf(fake: FakeUpstream, token: string, resource: string): Promise<number> {
  const res = await request(`${fake.url}/rate_limit`, { headers: { authorization: `token ${token}` } });
  const body = (await res.body.json()) as { resources: Record<string, { used: number }> };
  return body.resources[resource]?.used ?? 0;
}

export async function simulateMixed(sc = MIXED_SCENARIO): Promise<MixedSimResult> {
  const values = Array.from({ length: sc.tokens }, (_, i) => tokenValue(i));
  const fake = await startFakeUpstream({
    tokens: parseTokenSpec(values.map((v, i) => `${v}@sim-${i}:public_repo`).join(',')),
    tokenLimit: sc.limit,
    searchLimit: sc.searchLimit,
    windowSeconds: 3600,
    searchWindowSeconds: 60,
    latencyMs: sc.latencyMs,
  });
  const config = parseConfig({
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, connections: 256 }],
    pool: { tokens: values.map((value, i) => ({ name: `t${i}`, value })), max_concurrency: 90, points_per_minute: UNPACED },
  });
  const app = await startApp(config, { logger: createLogger({ level: 'silent' }) });
  const started = Date.now();
  let next = 0;
  let coreDone = false;
  let searchServed = 0;
  let searchRefused = 0;
  const coreClient = async (): Promise<void> => {
    while (!coreDone) {
      const res = await request(`${app.url}/repos/octocat/hello-world?sim=${++next}`);
      await res.body.dump();
      if (res.statusCode === 429) coreDone = true;
      else if (res.statusCode !== 200) throw new Error(`core: unexpected ${res.statusCode}`);
    }
  };
  const searchClient = async (): Promise<void> => {
    while (!coreDone) {
      const res = await request(`${app.url}/search/repositories?q=repo&sim=${++next}`);
      await res.body.dump();
      if (res.statusCode === 200) searchServed++;
      else if (res.statusCode === 429) searchRefused++;
      else throw new Error(`search: unexpected ${res.statusCode}`);
    }
  };
  try {
    await Promise.all([...Array.from({ length: sc.coreClients }, coreClient), ...Array.from({ length: sc.searchClients }, searchClient)]);
  } finally {
    await app.close();
  }
  const stats = fake.stats();
  let coreSpent = 0;
  let searchSpent = 0;
  for (const value of values) {
    coreSpent += await usedOf(fake, value, 'core');
    searchSpent += await usedOf(fake, value, 'search');
  }
  await fake.close();
  const coreAggregate = sc.tokens * sc.limit;
  return {
    scenario: sc.name,
    coreAggregate,
    coreSpent,
    coreShare: coreSpent / coreAggregate,
    searchBudget: sc.tokens * sc.searchLimit,
    searchSpent,
    searchServed,
    searchRefused,
    upstream403: stats.byStatus['403'] ?? 0,
    upstream429: stats.byStatus['429'] ?? 0,
    seconds: (Date.now() - started) / 1000,
  };
}

export function formatMixedResult(result: MixedSimResult): string {
  const rows = [
    [
      'scenario',
      'core quota',
      'core spent before 1st 429',
      'core share',
      'search budget',
      'search served',
      'search 429 (proxy)',
      'upstream 403/429',
      'seconds',
    ],
    [
      result.scenario,
      String(result.coreAggregate),
      String(result.coreSpent),
      `${(result.coreShare * 100).toFixed(2)} %`,
      String(result.searchBudget),
      `${result.searchServed} (upstream counted ${result.searchSpent})`,
      String(result.searchRefused),
      `${result.upstream403}/${result.upstream429}`,
      result.seconds.toFixed(2),
    ],
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)));
  return rows.map((row) => `| ${row.map((cell, c) => cell.padEnd(widths[c]!)).join(' | ')} |`).join('\n');
}

/**
 * Goals: core as if alone (share >= 99 %), search spends its whole budget and no more (a search
 * window is a minute; the run is far shorter), and the upstream never refuses.
 */
export function mixedGoalFailures(result: MixedSimResult): string[] {
  const out: string[] = [];
  if (result.coreShare < 0.99)
    out.push(`${result.scenario}: core spent only ${(result.coreShare * 100).toFixed(2)} % before its first 429`);
  if (result.searchServed !== result.searchBudget || result.searchSpent !== result.searchBudget)
    out.push(
      `${result.scenario}: search served ${result.searchServed} (upstream ${result.searchSpent}) of its budget ${result.searchBudget}`,
    );
  if (result.upstream403 > 0 || result.upstream429 > 0)
    out.push(`${result.scenario}: upstream answered ${result.upstream403} x 403 and ${result.upstream429} x 429`);
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { json: { type: 'string' }, smoke: { type: 'boolean', default: false } }, strict: true });
  const run = async () => ({ results: await runPoolSimulation(), mixed: await simulateMixed(), consumers: await simulateGreedyConsumer() });
  run().then(
    ({ results, mixed, consumers }) => {
      process.stdout.write(`token pool simulation (goal: share >= 99 %, upstream 403/429 = 0)\n${formatResults(results)}\n`);
      process.stdout.write(
        `\ncore + search (goals: core share >= 99 %, search spends exactly its budget, upstream 403/429 = 0)\n${formatMixedResult(mixed)}\n`,
      );
      process.stdout.write(
        `\nfair share (goals: polite served >= its reserve, polite wait <= 1000 ms, upstream 403/429 = 0)\n${formatConsumerResult(consumers)}\n`,
      );
      if (values.json !== undefined) writeFileSync(values.json, `${JSON.stringify({ results, mixed, consumers }, null, 2)}\n`);
      const failures = [...poolGoalFailures(results), ...mixedGoalFailures(mixed), ...consumerGoalFailures(consumers)];
      if (failures.length > 0) process.stderr.write(`pool-sim: goals not met:\n  ${failures.join('\n  ')}\n`);
      process.exit(values.smoke && failures.length > 0 ? 1 : 0);
    },
    (err: unknown) => {
      process.stderr.write(`pool-sim: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
