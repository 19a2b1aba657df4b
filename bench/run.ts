/**
 * etagere benchmark harness: `npm run bench -- [options]`.
 *
 * Starts the fake upstream once and a fresh server per case, each in its own child process on
 * a loopback port; then warms up and measures each case with the load generator (wrk, else
 * autocannon; see measure.ts) and prints one table. See bench/README.md.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CASES, REPO_PATH, selectCases, withBefore, type BenchCase } from './cases.js';
import { detectLoadTool, type ToolName } from './load.js';
import { measureAll, type Started } from './measure.js';
import { formatResults, poolGoalFailures, runPoolSimulation, type SimResult } from './pool-sim.js';
import { formatQuota, quotaGoalFailures, quotaReportedGoals, runQuotaSimulation, type QuotaResults } from './quota.js';
import { formatMemory, memoryGoalFailures, type MemoryResults } from './memory.js';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { LOAD_CPU, pinSelf, pinUnavailable } from './pin.js';
import { installCleanup, stopAll } from './processes.js';
import { header, machineFacts, table, type CaseResult, type RunSettings } from './report.js';
import { ensureNginx, recordResponse, startCaseServer, startFake, type RunningServer, type ServerContext } from './servers.js';

const USAGE = `usage: npm run bench -- [options]
  --duration S       measured seconds per case (default 10)
  --warmup S         warm-up seconds per case, not measured (default 2)
  --connections N    concurrent connections (default 64)
  --repeat N         rounds: every case measured N times, interleaved; median shown (default 1)
  --only LIST        comma-separated case ids or names (default: all); "pool-sim" is the token-pool simulation
  --smoke            2 s per case after 1 s warm-up; exit 1 if any case had errors or no requests
  --json FILE        also write the results as JSON
  --tool T           wrk or autocannon (default: wrk when available, else autocannon)
  --log-level L      etagere log level (default info: one access log line per request)
  --dist             run etagere from dist/ (npm run build first) instead of src/ through tsx
  --before DIR       also run each etagere case from the checkout DIR (its own node_modules; with --dist, its
                     dist/ built), in the same rounds: "<case> (before)", whose vs ref is before / after
  --pin              servers on CPU 0, the load generator, fake upstream and harness on CPU 1 (taskset)
  --list             list the cases and exit
  -h, --help
`;

/** Servers starting at once (see startAllLimited). */
const START_CONCURRENCY = 4;

interface Options {
  durationSec: number;
  warmupSec: number;
  connections: number;
  repeat: number;
  only: string | undefined;
  smoke: boolean;
  json: string | undefined;
  tool: ToolName | undefined;
  logLevel: string;
  useDist: boolean;
  before: string | undefined;
  pin: boolean;
  list: boolean;
}

function fail(message: string): never {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(2);
}

function positiveInt(name: string, value: string | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min) fail(`--${name} must be an integer >= ${min}, got "${value}"`);
  return Number(value);
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      repeat: { type: 'string' },
      only: { type: 'string' },
      smoke: { type: 'boolean', default: false },
      json: { type: 'string' },
      tool: { type: 'string' },
      'log-level': { type: 'string' },
      dist: { type: 'boolean', default: false },
      before: { type: 'string' },
      pin: { type: 'boolean', default: false },
      list: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const tool = values.tool;
  if (tool !== undefined && tool !== 'wrk' && tool !== 'autocannon') fail(`--tool must be wrk or autocannon, got "${tool}"`);
  const smoke = values.smoke;
  return {
    durationSec: positiveInt('duration', values.duration, smoke ? 2 : 10),
    warmupSec: positiveInt('warmup', values.warmup, smoke ? 1 : 2, 0),
    connections: positiveInt('connections', values.connections, 64),
    repeat: positiveInt('repeat', values.repeat, 1),
    only: values.only,
    smoke,
    json: values.json,
    tool,
    logLevel: values['log-level'] ?? 'info',
    useDist: values.dist,
    before: values.before === undefined ? undefined : resolve(values.before),
    pin: values.pin,
    list: values.list,
  };
}

/** Starts the server of a case, never rejecting (so that starts can run side by side). */
function startFor(benchCase: BenchCase, ctx: ServerContext, fake: RunningServer, responseFile: string): Promise<Started> {
  return startCaseServer(benchCase.server, ctx, fake, responseFile).then(
    (server): Started => ({ ok: true, server }),
    (err: unknown): Started => ({ ok: false, error: err instanceof Error ? err : new Error(String(err)) }),
  );
}

/**
 * Starts the servers of every case, at most `limit` at a time: each start has its own
 * deadline, which 20-odd servers loading modules at once on a small busy machine would miss.
 */
async function startAllLimited(
  cases: readonly BenchCase[],
  limit: number,
  start: (benchCase: BenchCase) => Promise<Started>,
): Promise<Started[]> {
  const out = new Array<Started>(cases.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < cases.length) {
      const index = next++;
      const benchCase = cases[index];
      if (benchCase !== undefined) out[index] = await start(benchCase);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, cases.length) }, worker));
  return out;
}

function smokeFailures(results: readonly CaseResult[]): string[] {
  const out: string[] = [];
  for (const result of results) {
    if (!result.ok) out.push(`${result.name}: failed (${result.error.split('\n')[0] ?? ''})`);
    else if (result.load.requests === 0) out.push(`${result.name}: no requests completed`);
    else if (result.errors > 0) out.push(`${result.name}: ${result.errors} non-2xx responses or socket errors`);
  }
  return out;
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (opts.list) {
    for (const benchCase of CASES)
      process.stdout.write(`${benchCase.id.padEnd(14)} ${benchCase.name}\n${' '.repeat(15)}${benchCase.measures}\n`);
    process.stdout.write(
      `${'pool-sim'.padEnd(14)} token-pool simulation\n${' '.repeat(15)}share of the pool's quota spent before the first client 429, and upstream 403/429 (goals >= 99 %, 0)\n`,
    );
    process.stdout.write(
      `${'quota'.padEnd(14)} quota-efficiency simulation (bench/quota.ts)\n${' '.repeat(15)}billable upstream calls per 1,000 client requests against the floor of real changes (goal <= 1.05x)\n`,
    );
    process.stdout.write(
      `${'memory'.padEnd(14)} L1 memory (bench/memory.ts, own process)\n${' '.repeat(15)}RSS after filling L1 with up to 1M small entries against cache.max_bytes (goal <= 1.25x + 100 MB)\n`,
    );
    return 0;
  }
  const only = opts.only?.split(',').map((s) => s.trim());
  const withPoolSim = only === undefined || only.includes('pool-sim');
  const withQuota = only === undefined || only.includes('quota');
  const withMemory = only === undefined || only.includes('memory');
  const SIMULATIONS = ['pool-sim', 'quota', 'memory'];
  const throughputOnly = only?.filter((s) => !SIMULATIONS.includes(s));
  let cases: BenchCase[] = [];
  try {
    if (throughputOnly === undefined || throughputOnly.length > 0) cases = withBefore(selectCases(throughputOnly?.join(',')), opts.before);
  } catch (err) {
    fail((err as Error).message);
  }
  const log = (line: string): void => void process.stderr.write(`bench: ${line}\n`);
  if (cases.some((c) => c.server.kind === 'nginx') && ensureNginx(log) === undefined) {
    log('nginx is not installed and could not be installed: the nginx proxy_cache case is skipped');
    cases = cases.filter((c) => c.server.kind !== 'nginx');
  }
  // The run directory, once created, is listed here so that a signal removes it.
  const createdDirs: string[] = [];
  installCleanup((signal) => {
    log(`${signal}: stopping child processes`);
    for (const dir of createdDirs) rmSync(dir, { recursive: true, force: true });
  });

  if (opts.pin) {
    const why = pinUnavailable();
    if (why !== undefined) fail(why);
    // The harness (and autocannon, which runs inside it) stays off the servers' core.
    pinSelf(LOAD_CPU);
  }
  const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
  const tool = detectLoadTool(opts.tool, log);
  const runDir = mkdtempSync(join(tmpdir(), 'etagere-bench-'));
  createdDirs.push(runDir);
  const settings: RunSettings = {
    durationSec: opts.durationSec,
    warmupSec: opts.warmupSec,
    connections: opts.connections,
    repeat: opts.repeat,
    logLevel: opts.logLevel,
    source: opts.useDist ? 'dist' : 'src (tsx)',
    pin: opts.pin,
  };
  const facts = await machineFacts(tool, root);
  process.stdout.write(`${header(facts, settings)}\n\n`);

  const servers: ServerContext = { root, tmpDir: runDir, useDist: opts.useDist, logLevel: opts.logLevel, pin: opts.pin };
  const results: CaseResult[] = [];
  let keepTmp = false;
  try {
    if (cases.length > 0) {
      const fake = await startFake(servers);
      const responseFile = join(runDir, 'ceiling-response.json');
      await recordResponse(fake.origin, REPO_PATH, responseFile);
      // Every case gets its own fresh server. They start (a few side by side) before anything is
      // measured (start-up is mostly module loading), then sit idle until their turn.
      log(`starting ${cases.length} server(s) ...`);
      const starts = await startAllLimited(cases, START_CONCURRENCY, (c) => startFor(c, servers, fake, responseFile));
      results.push(
        ...(await measureAll(cases, starts, {
          tool,
          fake,
          tmpDir: runDir,
          connections: opts.connections,
          durationSec: opts.durationSec,
          warmupSec: opts.warmupSec,
          repeat: opts.repeat,
          pin: opts.pin,
          ...(opts.smoke ? { warmAllLimit: 1_000 } : {}),
          log,
        })),
      );
      keepTmp = results.some((r) => !r.ok);
      await fake.process.stop();
    }
  } finally {
    await stopAll();
  }

  if (results.length > 0) {
    process.stdout.write(`${table(results)}\n`);
    process.stdout.write(
      '\n(× ceiling = req/s of the case / req/s of the ceiling case; CPU µs/req = user + system time of the server processes (and their own Redis) ' +
        "over the measured run / requests; CPU × ceiling = that / the ceiling's; vs ref = req/s / req/s of the named case; " +
        'ratios are medians of per-round ratios; errors = non-2xx + socket errors)\n',
    );
  }
  let pool: SimResult[] = [];
  if (withPoolSim) {
    log('token-pool simulation ...');
    pool = await runPoolSimulation();
    process.stdout.write(`\ntoken pool simulation (goals: share >= 99 %, upstream 403/429 = 0)\n${formatResults(pool)}\n`);
  }
  let quota: QuotaResults | undefined;
  if (withQuota) {
    log('quota-efficiency simulation ...');
    quota = await runQuotaSimulation(opts.smoke ? { minutes: 3 } : {});
    process.stdout.write(`\n${formatQuota(quota)}\n`);
  }
  let memory: MemoryResults | undefined;
  if (withMemory) {
    // Its own process (with --expose-gc), so the harness's heap is not in the RSS it reports.
    log('L1 memory bench ...');
    const out = join(runDir, 'memory.json');
    const args = ['--expose-gc', '--import', 'tsx', join(root, 'bench', 'memory.ts'), '--json', out, ...(opts.smoke ? ['--smoke'] : [])];
    const child = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
    if (child.status !== 0 && child.status !== 1) throw new Error(`bench/memory.ts failed:\n${child.stderr}`);
    memory = JSON.parse(readFileSync(out, 'utf8')) as MemoryResults;
    process.stdout.write(`\n${formatMemory(memory)}\n`);
  }
  if (opts.json !== undefined) {
    writeFileSync(opts.json, `${JSON.stringify({ machine: facts, settings, results, pool, quota, memory }, null, 2)}\n`);
    log(`results written to ${opts.json}`);
  }
  if (keepTmp) log(`server logs kept in ${runDir}`);
  else rmSync(runDir, { recursive: true, force: true });

  const failed = results.filter((r) => !r.ok).length;
  if (opts.smoke) {
    // Smoke asserts that everything completes, plus the simulations' goals; the memory goal is
    // reported only (at the smoke's 32 MiB the process's own baseline dominates the bound), and so
    // is the webhook scenario's 10x target (3 simulated minutes are mostly first fetches).
    const problems = [...smokeFailures(results), ...poolGoalFailures(pool), ...(quota === undefined ? [] : quotaGoalFailures(quota))];
    if (memory !== undefined) for (const failure of memoryGoalFailures(memory)) log(`memory (reported, not failed in smoke): ${failure}`);
    if (quota !== undefined) for (const line of quotaReportedGoals(quota)) log(`quota (reported, not failed in smoke): ${line}`);
    if (problems.length > 0) {
      log(`smoke FAILED:\n  ${problems.join('\n  ')}`);
      return 1;
    }
    log('smoke passed');
    return 0;
  }
  return failed > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    process.stderr.write(`bench: fatal: ${(err as Error).stack ?? String(err)}\n`);
    await stopAll();
    process.exit(1);
  },
);
