/**
 * How wide one request's path is: the project files (under src/) and functions whose code runs for
 * one request, by V8's precise coverage, after a warm-up. Three requests are measured, each alone:
 *
 *   hit          an L1 hit on the default configuration (GET /repos/octocat/hello-world, fresh in
 *                L1), from a client without Accept-Encoding (wrk's: the gzip entry decoded for it)
 *   hit-gzip     the same from a client that takes gzip (Octokit, PyGithub, gh: the stored bytes)
 *   pooled-miss  a miss on a token-pool upstream of 2 tokens (a path not cached yet, fetched on a pool token)
 *   allon-hit    an L1 hit on the production configuration without Redis (50 tokens not
 *                equivalent, a consumer key in X-Etagere-Key)
 *
 *   npx tsx bench/coverage-width.ts [--functions] [--json FILE] [--root DIR]
 *
 * --root DIR measures the etagere of another checkout (its src/, with its own node_modules).
 *
 * Each request is sent over a real loopback connection kept alive (as wrk's are), with no header but
 * Host (and X-Etagere-Key for allon-hit); counting starts once the warm-up's last answer is in and
 * the event loop has gone quiet, and stops once the measured answer is in and the
 * work it left (its access line, a background write) has run: one setImmediate and a 50 ms wait.
 * The fake upstream runs in this process but is not counted (it is fake-github/, not src/).
 * Timers that fire on their own during the window (none are due in it) would be counted too.
 */
import { Agent, request } from 'node:http';
import { Session } from 'node:inspector/promises';
import { setImmediate as tick, setTimeout as sleep } from 'node:timers/promises';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, relative, resolve } from 'node:path';
import { startFakeUpstream } from '../fake-github/index.js';
import { parseTokenSpec } from '../fake-github/tokens.js';
import { fakeTokenSpec, poolTokensEnv } from './bench-tokens.js';
import { CONSUMER_KEY, REPO_PATH } from './cases.js';

const HERE = resolve(dirname(fileURLToPath(import.meta.url)), '..');

interface Width {
  readonly files: number;
  readonly folders: number;
  readonly functions: number;
  /** file -> the functions that ran in it. */
  readonly detail: Record<string, string[]>;
}

/** The src/ functions of the checkout at `root` that ran since the last take (takePreciseCoverage resets the counts). */
async function widthSince(session: Session, root: string): Promise<Width> {
  const src = `${resolve(root, 'src')}/`;
  const { result } = await session.post('Profiler.takePreciseCoverage');
  const detail: Record<string, string[]> = {};
  let functions = 0;
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue;
    const path = fileURLToPath(script.url);
    if (!path.startsWith(src)) continue;
    const ran = script.functions.filter((fn) => fn.ranges[0] !== undefined && fn.ranges[0].count > 0);
    if (ran.length === 0) continue;
    detail[relative(root, path)] = ran.map((fn) => fn.functionName || '(anonymous)');
    functions += ran.length;
  }
  const files = Object.keys(detail);
  return { files: files.length, folders: new Set(files.map((file) => dirname(file))).size, functions, detail };
}

/** One GET on a kept-alive connection (as wrk sends them), with exactly these headers besides Host. */
function get(agent: Agent, url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

/** One request measured alone: `warm` sent first (not counted), then `measured`, all on one kept-alive connection. */
async function measure(
  session: Session,
  root: string,
  url: string,
  headers: Record<string, string>,
  warm: readonly string[],
  measured: string,
): Promise<Width> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (const path of warm) {
      const status = await get(agent, `${url}${path}`, headers);
      if (status !== 200) throw new Error(`warm-up ${path}: ${status}`);
    }
    await tick();
    await sleep(50);
    await widthSince(session, root); // resets the counts
    const status = await get(agent, `${url}${measured}`, headers);
    if (status !== 200) throw new Error(`${measured}: ${status}`);
    await tick();
    await sleep(50);
    return await widthSince(session, root);
  } finally {
    agent.destroy();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { functions: { type: 'boolean', default: false }, json: { type: 'string' }, root: { type: 'string' } },
  });
  const root = resolve(values.root ?? HERE);
  const { startApp } = (await import(pathToFileURL(`${root}/src/main/app.ts`).href)) as typeof import('../src/main/app.js');
  const { applyEnv, parseConfig } = (await import(
    pathToFileURL(`${root}/src/platform/config/load.ts`).href
  )) as typeof import('../src/platform/config/load.js');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: true });
  const fake = await startFakeUpstream({ anonymousLimit: 1e9, tokenLimit: 1e9, tokens: parseTokenSpec(fakeTokenSpec()) });
  const base = { listen: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 }, log: { level: 'info' } };
  const plain = { ...base, upstreams: [{ name: 'github', prefix: '/', url: fake.url }] };
  const pooled = (tokens: number, raw: Record<string, unknown>) => parseConfig(applyEnv(raw, { ETAGERE_TOKENS: poolTokensEnv(tokens) }));
  const hot = Array.from({ length: 200 }, () => REPO_PATH);
  // Access lines go to stdout, as etagere writes them: they are not this script's output.
  const cases: Array<{
    name: string;
    config: ReturnType<typeof parseConfig>;
    headers: Record<string, string>;
    warm: readonly string[];
    measured: string;
  }> = [
    { name: 'hit', config: parseConfig(plain), headers: {}, warm: hot, measured: REPO_PATH },
    { name: 'hit-gzip', config: parseConfig(plain), headers: { 'accept-encoding': 'gzip' }, warm: hot, measured: REPO_PATH },
    {
      name: 'pooled-miss',
      config: pooled(2, { ...base, upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }] }),
      headers: {},
      // Misses on other paths warm the miss path; the measured one is a path never asked.
      warm: Array.from({ length: 200 }, (_, index) => `${REPO_PATH}?warm=${index}`),
      measured: `${REPO_PATH}?measured=1`,
    },
    {
      name: 'allon-hit',
      config: pooled(50, {
        ...base,
        upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
        pool: { equivalent: false },
        consumers: { enabled: true, keys: [{ name: CONSUMER_KEY.name, value: CONSUMER_KEY.value }] },
      }),
      headers: { 'x-etagere-key': CONSUMER_KEY.value },
      warm: hot,
      measured: REPO_PATH,
    },
  ];
  const results: Record<string, Width> = {};
  for (const { name, config, headers, warm, measured } of cases) {
    const app = await startApp(config);
    results[name] = await measure(session, root, app.url, headers, warm, measured);
    await app.close();
  }
  await fake.close();
  session.disconnect();
  for (const [name, width] of Object.entries(results)) {
    process.stderr.write(`${name}: ${width.files} files in ${width.folders} folders, ${width.functions} functions\n`);
    if (values.functions) for (const [file, fns] of Object.entries(width.detail)) process.stderr.write(`  ${file}: ${fns.join(', ')}\n`);
  }
  if (values.json !== undefined) writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
}

await main();
