/**
 * Every answer the cache can give (issue 37's goals), against the fake:
 *
 *   replicas   two replicas sharing one Redis, 200 concurrent identical pooled GraphQL queries split
 *              across them. Goal: 1 upstream POST.
 *   dashboard  20 distinct GraphQL queries, each asked by 50 clients a minute (evenly spread) for
 *              `minutes`, through two replicas sharing Redis, against the fake enforcing GraphQL
 *              points (`enforcePoints`); every half minute an issue is opened on one of the queried
 *              repositories (the fake's signed `issues` delivery goes to the first replica). One
 *              query asks for a repository that is created after the first minute (NOT_FOUND
 *              until then). The same load against a proxy that does not cache GraphQL is the
 *              baseline. Goals: GraphQL points spent >= 20x lower than the baseline's; every read
 *              that started after an issue was opened shows it within 1 s; no answer with `errors`
 *              ever served from the cache.
 *   not-found  100 reads of one missing repository within a minute, then `repository created`
 *              (the fake's delivery). Goal: 1 upstream request, and the next read goes upstream.
 *   accept     the five Accept values that select GitHub's JSON, then `.raw`. Goal: 1 upstream
 *              request for the five, a second for `.raw`.
 *
 *   npm run bench:quota -- --answers [--minutes N] [--minute-ms MS] [--smoke] [--json FILE]
 *
 * Time may be compressed (`--minute-ms`, default 60,000): the clients' rate, the deliveries and
 * `graphql_cache_seconds` (60 simulated seconds) scale with it; the 1 s staleness bound does not.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'undici';
import { startApp, type App } from '../src/main/app.js';
import { parseConfig, resolveSecrets } from '../src/platform/config/load.js';
import { createLogger } from '../src/platform/log/logger.js';
import { startFakeUpstream, type FakeUpstream } from '../fake-github/index.js';
import { parseTokenSpec } from '../fake-github/tokens.js';
import { freePort, redisAnswers } from './processes.js';

export interface AnswersSettings {
  /** Simulated minutes of the dashboard load. */
  minutes: number;
  /** Wall milliseconds of one simulated minute. */
  minuteMs: number;
}

export const ANSWERS_DEFAULTS: AnswersSettings = { minutes: 5, minuteMs: 60_000 };

export interface DashboardRun {
  cached: boolean;
  reads: number;
  /** GraphQL points the fake billed (x-ratelimit-used of the graphql resource). */
  points: number;
  upstreamPosts: number;
  /** Answers with `errors`, and those of them served from the cache (must be 0). */
  errorAnswers: number;
  errorsFromCache: number;
  /** Issues opened, and the longest a read that started after one was opened still missed it, ms. */
  changes: number;
  maxStaleMs: number;
  failures: number;
}

export interface AnswersResults {
  settings: AnswersSettings;
  replicas: { queries: number; posts: number; distinctBodies: number; failures: number };
  dashboard: { cached: DashboardRun; baseline: DashboardRun; ratio: number };
  notFound: { reads: number; upstream: number; afterCreate: { status: number; upstream: number } };
  accept: { equivalent: number; upstream: number; rawUpstream: number };
}

const TOKENS = { a: 'answers_bench_token_aaaa1111', b: 'answers_bench_token_bbbb2222' };
const SECRET = 'answers-bench-webhook-secret-0123456789';
const WEBHOOK_PATH = '/_etagere/webhooks/github';
const LATE_REPO = 'created-later';

/** One redis-server of its own, on a free port, nothing persisted. */
async function startRedis(): Promise<{ url: string; stop(): void }> {
  const port = await freePort();
  const child: ChildProcess = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  for (let attempt = 0; !(await redisAnswers('127.0.0.1', port)); attempt++) {
    if (attempt > 100 || child.exitCode !== null) throw new Error('redis-server did not start (is it installed?)');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { url: `redis://127.0.0.1:${port}`, stop: () => child.kill('SIGTERM') };
}

async function startFake(extra: Parameters<typeof startFakeUpstream>[0] = {}): Promise<FakeUpstream> {
  return startFakeUpstream({
    tokens: parseTokenSpec(`${TOKENS.a}@alice:public_repo,${TOKENS.b}@bob:public_repo`),
    anonymousLimit: 1_000_000_000,
    tokenLimit: 1_000_000_000,
    graphqlLimit: 1_000_000_000,
    ...extra,
  });
}

async function startProxy(fake: FakeUpstream, upstream: Record<string, unknown>, more: Record<string, unknown> = {}): Promise<App> {
  const raw = resolveSecrets(
    {
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      log: { level: 'silent' },
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, graphql: true, ...upstream }],
      pool: {
        tokens: [
          { name: 'a', value: TOKENS.a },
          { name: 'b', value: TOKENS.b },
        ],
        probe_at_start: false,
      },
      ...more,
    },
    {},
  );
  return startApp(parseConfig(raw), { logger: createLogger({ level: 'silent' }), watchTokensFile: false });
}

interface Answered {
  status: number;
  cacheStatus: string;
  body: string;
}

async function graphql(url: string, query: string): Promise<Answered> {
  const res = await request(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });
  return { status: res.statusCode, cacheStatus: String(res.headers['cache-status'] ?? ''), body: await res.body.text() };
}

async function control(fake: FakeUpstream, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await request(`${fake.url}${path}`, { method: 'POST', body: JSON.stringify(body) });
  return (await res.body.json()) as Record<string, unknown>;
}

/** GraphQL points the fake billed to the pool's tokens. */
async function pointsOf(fake: FakeUpstream): Promise<number> {
  let used = 0;
  for (const token of Object.values(TOKENS)) {
    const res = await request(`${fake.url}/rate_limit`, { headers: { authorization: `token ${token}` } });
    used += ((await res.body.json()) as { resources: { graphql: { used: number } } }).resources.graphql.used;
  }
  return used;
}

const repoName = (index: number): string => `repo-${String(index + 1).padStart(3, '0')}`;
/** The dashboard's queries: 19 repositories with their open issues, and one created after the first minute. */
export function dashboardQueries(): string[] {
  const fields = 'nameWithOwner stargazerCount issues(states: OPEN, first: 5) { totalCount nodes { number title } }';
  const names = [...Array.from({ length: 19 }, (_, index) => repoName(index)), LATE_REPO];
  return names.map((name) => `{ repository(owner: "etagere-org", name: "${name}") { ${fields} } }`);
}

const openIssuesOf = (body: string): number | undefined =>
  (JSON.parse(body) as { data?: { repository?: { issues?: { totalCount?: number } } | null } }).data?.repository?.issues?.totalCount;

/** 200 concurrent identical pooled queries split across two replicas sharing Redis. */
async function replicasGoal(redisUrl: string): Promise<AnswersResults['replicas']> {
  const fake = await startFake();
  const proxies = [await startProxy(fake, {}, { redis: { url: redisUrl } }), await startProxy(fake, {}, { redis: { url: redisUrl } })];
  try {
    const query = '{ organization(login: "etagere-org") { repositories(first: 20) { nodes { nameWithOwner stargazerCount } } } }';
    const answers = await Promise.all(Array.from({ length: 200 }, (_, index) => graphql(proxies[index % 2]!.url, query)));
    return {
      queries: answers.length,
      posts: fake.stats().byPath['/graphql'] ?? 0,
      distinctBodies: new Set(answers.map((answer) => answer.body)).size,
      failures: answers.filter((answer) => answer.status !== 200).length,
    };
  } finally {
    for (const proxy of proxies) await proxy.close();
    await fake.close();
  }
}

/** One dashboard load (cached: two replicas sharing Redis; else one proxy that caches no GraphQL). */
export async function dashboardRun(settings: AnswersSettings, cached: boolean, redisUrl: string | undefined): Promise<DashboardRun> {
  const fake = await startFake({ enforcePoints: true });
  const ttl = Math.max(1, Math.round((60 * settings.minuteMs) / 60_000));
  const upstream = { graphql_cache_seconds: cached ? ttl : 0 };
  const more = cached ? { redis: { url: redisUrl }, webhooks: { secret: SECRET } } : { webhooks: { secret: SECRET } };
  const proxies = cached
    ? [await startProxy(fake, upstream, more), await startProxy(fake, upstream, more)]
    : [await startProxy(fake, upstream, more)];
  const res = await request(`${fake.url}/__fake/webhooks`, {
    method: 'POST',
    body: JSON.stringify({ url: `${proxies[0]!.url}${WEBHOOK_PATH}`, secret: SECRET }),
  });
  await res.body.dump();
  const queries = dashboardQueries();
  const run: DashboardRun = {
    cached,
    reads: 0,
    points: 0,
    upstreamPosts: 0,
    errorAnswers: 0,
    errorsFromCache: 0,
    changes: 0,
    maxStaleMs: 0,
    failures: 0,
  };
  // Per query: the open issues it must show, and since when (ms, performance.now()).
  const expected = new Map<number, { count: number; since: number }>();
  const pointsBefore = await pointsOf(fake);
  try {
    const read = async (index: number, at: number): Promise<void> => {
      const answer = await graphql(proxies[run.reads % proxies.length]!.url, queries[index]!);
      run.reads++;
      if (answer.status !== 200) {
        run.failures++;
        return;
      }
      if (answer.body.includes('"errors"')) {
        run.errorAnswers++;
        if (answer.cacheStatus.includes('hit')) run.errorsFromCache++;
        return;
      }
      const want = expected.get(index);
      const shown = openIssuesOf(answer.body);
      if (want !== undefined && shown !== undefined && shown < want.count && at > want.since)
        run.maxStaleMs = Math.max(run.maxStaleMs, at - want.since);
    };
    const open = async (index: number): Promise<void> => {
      await control(fake, '/__fake/issues', { path: `/repos/etagere-org/${repoName(index)}`, title: `change ${run.changes + 1}` });
      expected.set(index, { count: (expected.get(index)?.count ?? 0) + 1, since: performance.now() });
      run.changes++;
    };
    const start = performance.now();
    const end = start + settings.minutes * settings.minuteMs;
    const step = settings.minuteMs / (50 * queries.length);
    const pending: Array<Promise<void>> = [];
    let nextChange = start + settings.minuteMs / 2;
    let created = false;
    for (let tick = 0; ; tick++) {
      const at = start + tick * step;
      if (at >= end) break;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, at - performance.now())));
      if (!created && performance.now() >= start + settings.minuteMs) {
        created = true;
        pending.push(control(fake, '/__fake/repos', { owner: 'etagere-org', name: LATE_REPO }).then(() => undefined));
      }
      if (performance.now() >= nextChange) {
        nextChange += settings.minuteMs / 2;
        pending.push(open(run.changes % 19));
      }
      pending.push(read(tick % queries.length, performance.now()));
      if (pending.length > 500) await Promise.all(pending.splice(0));
    }
    await Promise.all(pending);
    run.points = (await pointsOf(fake)) - pointsBefore;
    run.upstreamPosts = fake.stats().byPath['/graphql'] ?? 0;
    return run;
  } finally {
    for (const proxy of proxies) await proxy.close();
    await fake.close();
  }
}

/** 100 reads of one missing repository, then its `repository created` delivery. */
async function notFoundGoal(): Promise<AnswersResults['notFound']> {
  const fake = await startFake();
  const proxy = await startProxy(fake, {}, { webhooks: { secret: SECRET } });
  try {
    const hook = await request(`${fake.url}/__fake/webhooks`, {
      method: 'POST',
      body: JSON.stringify({ url: `${proxy.url}${WEBHOOK_PATH}`, secret: SECRET }),
    });
    await hook.body.dump();
    const path = '/repos/carol/tomorrow';
    for (let read = 0; read < 100; read++) await (await request(`${proxy.url}${path}`)).body.dump();
    const upstream = fake.stats().byPath[path] ?? 0;
    const created = await control(fake, '/__fake/repos', { owner: 'carol', name: 'tomorrow' });
    const deliveries = (created.deliveries as string[] | undefined) ?? [];
    // The delivery is answered before the next read (the fake records the receiver's status).
    for (let attempt = 0; attempt < 200; attempt++) {
      const list = (await (await request(`${fake.url}/__fake/webhooks`)).body.json()) as {
        deliveries: Array<{ id: string; status: number | null }>;
      };
      if (deliveries.every((id) => list.deliveries.find((record) => record.id === id)?.status !== null)) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const after = await request(`${proxy.url}${path}`);
    await after.body.dump();
    return { reads: 100, upstream, afterCreate: { status: after.statusCode, upstream: fake.stats().byPath[path] ?? 0 } };
  } finally {
    await proxy.close();
    await fake.close();
  }
}

/** The five equivalent Accept values, then `.raw`. */
async function acceptGoal(): Promise<AnswersResults['accept']> {
  const fake = await startFake();
  const proxy = await startProxy(fake, {});
  try {
    const path = '/repos/octocat/hello-world/readme';
    const values = [undefined, '*/*', 'application/json', 'application/vnd.github+json', 'application/vnd.github.v3+json'];
    for (const accept of values)
      await (await request(`${proxy.url}${path}`, accept === undefined ? {} : { headers: { accept } })).body.dump();
    const upstream = fake.stats().byPath[path] ?? 0;
    await (await request(`${proxy.url}${path}`, { headers: { accept: 'application/vnd.github.raw' } })).body.dump();
    return { equivalent: values.length, upstream, rawUpstream: (fake.stats().byPath[path] ?? 0) - upstream };
  } finally {
    await proxy.close();
    await fake.close();
  }
}

export async function runAnswersBench(overrides: Partial<AnswersSettings> = {}): Promise<AnswersResults> {
  const settings = { ...ANSWERS_DEFAULTS, ...overrides };
  const redis = await startRedis();
  try {
    const replicas = await replicasGoal(redis.url);
    const [cached, baseline] = await Promise.all([dashboardRun(settings, true, redis.url), dashboardRun(settings, false, undefined)]);
    const ratio = baseline.points / Math.max(1, cached.points);
    return { settings, replicas, dashboard: { cached, baseline, ratio }, notFound: await notFoundGoal(), accept: await acceptGoal() };
  } finally {
    redis.stop();
  }
}

export function answersGoalFailures(results: AnswersResults): string[] {
  const out: string[] = [];
  const { replicas, dashboard, notFound, accept } = results;
  if (replicas.posts !== 1 || replicas.failures > 0 || replicas.distinctBodies !== 1)
    out.push(`replicas: ${replicas.posts} upstream POSTs for ${replicas.queries} identical queries (${replicas.failures} failed); goal 1`);
  if (dashboard.ratio < 20)
    out.push(
      `dashboard: points ${dashboard.cached.points} cached against ${dashboard.baseline.points} uncached = ${dashboard.ratio.toFixed(1)}x; goal >= 20x`,
    );
  if (dashboard.cached.maxStaleMs > 1_000)
    out.push(`dashboard: a change was missed ${dashboard.cached.maxStaleMs.toFixed(0)} ms after it was made; goal <= 1,000 ms`);
  if (dashboard.cached.errorsFromCache > 0)
    out.push(`dashboard: ${dashboard.cached.errorsFromCache} answers with errors served from the cache; goal 0`);
  if (dashboard.cached.failures > 0 || dashboard.baseline.failures > 0)
    out.push(`dashboard: ${dashboard.cached.failures + dashboard.baseline.failures} reads failed (not 200)`);
  if (notFound.upstream !== 1 || notFound.afterCreate.status !== 200 || notFound.afterCreate.upstream !== 2)
    out.push(
      `not-found: ${notFound.upstream} upstream requests for ${notFound.reads} reads, then ${notFound.afterCreate.status}; goal 1, then 200 from upstream`,
    );
  if (accept.upstream !== 1 || accept.rawUpstream !== 1)
    out.push(`accept: ${accept.upstream} upstream requests for the five values, ${accept.rawUpstream} for .raw; goal 1 and 1`);
  return out;
}

export function formatAnswers(results: AnswersResults): string {
  const { settings, replicas, dashboard, notFound, accept } = results;
  const row = (run: DashboardRun): string =>
    `  ${run.cached ? 'cached (2 replicas, Redis)' : 'baseline (no GraphQL cache)'}: ${run.reads} reads, ${run.upstreamPosts} upstream POSTs, ` +
    `${run.points} points, ${run.errorAnswers} answers with errors (${run.errorsFromCache} from the cache), ${run.changes} issues opened, ` +
    `longest miss of a change ${run.maxStaleMs.toFixed(0)} ms, ${run.failures} failed`;
  return [
    `every answer the cache can give: ${settings.minutes} simulated minutes of ${settings.minuteMs} ms`,
    `replicas: ${replicas.queries} concurrent identical queries over 2 replicas -> ${replicas.posts} upstream POST(s), ${replicas.distinctBodies} distinct answer(s)`,
    'dashboard: 20 queries x 50 clients a minute, an issue opened every half minute',
    row(dashboard.cached),
    row(dashboard.baseline),
    `  points: ${dashboard.ratio.toFixed(1)}x fewer with the cache`,
    `not-found: ${notFound.reads} reads of a missing repository -> ${notFound.upstream} upstream request(s); after repository created: ${notFound.afterCreate.status} (${notFound.afterCreate.upstream - notFound.upstream} upstream)`,
    `accept: ${accept.equivalent} equivalent values -> ${accept.upstream} upstream request(s); .raw -> ${accept.rawUpstream}`,
  ].join('\n');
}
