/**
 * Token-pool simulation: how much of the pool's aggregate quota the proxy spends before a client
 * first sees a 429, and how many 403/429 the upstream answers on the way (goal: at least 99 %
 * and 0). Runs the fake GitHub API and a proxy in this process, with small quotas and many
 * concurrent clients sending uncached GETs.
 *
 *   npm run bench:pool [-- --smoke] [--json FILE]
 *
 * Also run at the end of `npm run bench` (and of its --smoke, which fails below the goals).
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { startApp } from '../src/app.js';
import { parseConfig } from '../src/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../src/fake-upstream/index.js';
import { parseTokenSpec } from '../src/fake-upstream/tokens.js';
import { createLogger } from '../src/log/logger.js';

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
    pool: { tokens: poolTokens, max_concurrency: 90 },
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

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { json: { type: 'string' }, smoke: { type: 'boolean', default: false } }, strict: true });
  runPoolSimulation().then(
    (results) => {
      process.stdout.write(`token pool simulation (goal: share >= 99 %, upstream 403/429 = 0)\n${formatResults(results)}\n`);
      if (values.json !== undefined) writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
      const failures = poolGoalFailures(results);
      if (failures.length > 0) process.stderr.write(`pool-sim: goals not met:\n  ${failures.join('\n  ')}\n`);
      process.exit(values.smoke && failures.length > 0 ? 1 : 0);
    },
    (err: unknown) => {
      process.stderr.write(`pool-sim: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
