/**
 * The quota cost of token rotation: GitHub's ETag depends on the credential, so once a
 * pool token is re-minted (an App installation token, every hour) the first revalidation of each
 * cached entry with the new token cannot match the old token's ETag, and is a full 200 that spends
 * quota instead of a free 304. This measures that cost, and what the ways around it give.
 *
 *   npm run bench:quota -- --rotation [--entries N] [--rotations N] [--seed N] [--json FILE]
 *
 * Workload (deterministic from the seed): N repositories of the fake, all cached by the proxy
 * (policy revalidate: every request revalidates upstream). A simulated hour is 12 sweeps (one every
 * 5 simulated minutes); a sweep asks for every repository once through the proxy. After each sweep
 * 1 % of the repositories change (`POST /__fake/mutate`). The pool has one member, whose token is
 * re-minted as App installation tokens are: a new token at minute 55 (5 minutes before the old one
 * expires, as the pool refreshes them), the old one expiring at minute 60 (revoked in the fake:
 * 401 from then on). Time is sweeps, not the wall clock: nothing in it waits.
 *
 * Options (each with its own fake and proxy, on the same schedule):
 * - `none`: no rotation (the control: what the workload costs anyway);
 * - `replace`: the member keeps its name and takes the new token at minute 55 (what the pool does
 *   today: tokens file reload, App refresh): entries revalidate with the new token at once;
 * - `overlap`: the old token stays a member until it expires and entries fetched with it are
 *   revalidated with it (sticky by name) while it lives; the new one joins beside it under a new
 *   name, and the old one leaves at minute 60;
 * - `last-modified`: as `replace`, with `cache.rotated_token_revalidation: last_modified`: an
 *   entry stored by another credential is revalidated with If-Modified-Since, which does not depend
 *   on the credential, and the 304 brings the new token's ETag.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startApp, type App } from '../src/main/app.js';
import { parseConfig, resolveSecrets } from '../src/platform/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../fake-github/index.js';
import { parseTokenSpec } from '../fake-github/tokens.js';
import { createLogger } from '../src/platform/log/logger.js';
import { mulberry32 } from './zipf.js';
import { UNPACED } from './pacing.js';

export type RotationOption = 'none' | 'replace' | 'overlap' | 'last-modified';

export const ROTATION_OPTIONS: readonly RotationOption[] = ['none', 'replace', 'overlap', 'last-modified'];

const OPTION_TEXT: Record<RotationOption, string> = {
  none: 'no rotation (control)',
  replace: 'rotation: member takes the new token (today)',
  overlap: 'rotation: old token kept until it expires',
  'last-modified': 'rotation: If-Modified-Since on a new credential',
};

export interface RotationSettings {
  /** Repositories cached and revalidated. Default 1,000. */
  entries: number;
  /** Rotations (simulated hours after the first). Default 3. */
  rotations: number;
  /** Sweeps per simulated hour. Default 12 (every 5 simulated minutes). */
  sweepsPerHour: number;
  /** Share of the repositories changed after each sweep. Default 0.01. */
  changeShare: number;
  /** Requests in flight at once during a sweep. Default 16. */
  concurrency: number;
  seed: number;
  options: readonly RotationOption[];
}

export const ROTATION_DEFAULTS: RotationSettings = {
  entries: 1000,
  rotations: 3,
  sweepsPerHour: 12,
  changeShare: 0.01,
  concurrency: 16,
  seed: 20261130,
  options: ROTATION_OPTIONS,
};

export interface RotationResult {
  option: RotationOption;
  name: string;
  requests: number;
  /** Client answers other than 200. */
  errors: number;
  /** Answers older than the repository's current version. */
  stale: number;
  upstreamRequests: number;
  upstream304: number;
  /** The fake's quotaSpent delta (200s; a 304 to a token is free). */
  billable: number;
  /** Billable calls of each sweep, in order. */
  billableBySweep: number[];
  /** (billable - the control's) / rotations: what one rotation costs. */
  extraPerRotation: number | null;
  wallSeconds: number;
}

export interface RotationResults {
  settings: RotationSettings;
  sweeps: number;
  mutations: number;
  results: RotationResult[];
}

/** The fake names its repositories with three-digit padding: repo-001 ... repo-1000 ... */
const repoPath = (rank: number): string => `/repos/etagere-org/repo-${String(rank).padStart(3, '0')}`;

/** Generation g's token: the fake accepts one per generation, all alice's with the same scope (same bodies). */
const tokenOf = (generation: number): string => `rotation_bench_gen_${generation}`;

/** The repositories changed after each sweep (distinct within a sweep), from the seed. */
function changeSchedule(settings: RotationSettings, sweeps: number): number[][] {
  const random = mulberry32(settings.seed);
  const perSweep = Math.max(0, Math.round(settings.entries * settings.changeShare));
  return Array.from({ length: sweeps }, () => {
    const changed = new Set<number>();
    while (changed.size < Math.min(perSweep, settings.entries)) changed.add(1 + Math.floor(random() * settings.entries));
    return [...changed];
  });
}

/** What happens to the pool before a sweep: the tokens file's new text, and a token that expires. */
interface PoolEvent {
  file?: string;
  expires?: number;
}

/** The pool's events before sweep `sweep` under `option` (a new token at minute 55, the old one gone at 60). */
function eventBefore(option: RotationOption, sweep: number, settings: RotationSettings): PoolEvent {
  if (option === 'none') return {};
  const hour = settings.sweepsPerHour;
  const mints = sweep % hour === hour - 1 && Math.floor(sweep / hour) < settings.rotations;
  const expires = sweep > 0 && sweep % hour === 0 && sweep / hour <= settings.rotations;
  const generation = Math.floor(sweep / hour); // the token minted last at the start of this hour
  if (mints && option === 'overlap')
    return { file: `sim-${generation}=${tokenOf(generation)}\nsim-${generation + 1}=${tokenOf(generation + 1)}\n` };
  if (mints) return { file: `sim=${tokenOf(generation + 1)}\n` };
  if (expires && option === 'overlap') return { file: `sim-${generation}=${tokenOf(generation)}\n`, expires: generation - 1 };
  if (expires) return { expires: generation - 1 };
  return {};
}

const STARS = '"stargazers_count":';

function starsOf(body: string): number {
  const index = body.indexOf(STARS);
  return index === -1 ? Number.NaN : Number.parseInt(body.slice(index + STARS.length, index + STARS.length + 12), 10);
}

async function control(fake: FakeUpstream, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await request(`${fake.url}${path}`, { method: 'POST', body: JSON.stringify(body) });
  const out = (await res.body.json()) as Record<string, unknown>;
  if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${JSON.stringify(out)}`);
  return out;
}

interface Rig {
  fake: FakeUpstream;
  app: App;
  file: string;
  close(): Promise<void>;
}

async function startRig(option: RotationOption, settings: RotationSettings): Promise<Rig> {
  const spec = Array.from({ length: settings.rotations + 1 }, (_, generation) => `${tokenOf(generation)}@alice:public_repo`).join(',');
  const fake = await startFakeUpstream({ orgRepoCount: settings.entries, tokens: parseTokenSpec(spec), tokenLimit: 1_000_000_000 });
  const dir = mkdtempSync(join(tmpdir(), 'etagere-rotation-bench-'));
  const file = join(dir, 'tokens');
  writeFileSync(file, option === 'overlap' ? `sim-0=${tokenOf(0)}\n` : `sim=${tokenOf(0)}\n`);
  const cache = {
    policy: 'revalidate',
    ...(option === 'last-modified' ? { rotated_token_revalidation: 'last_modified' } : {}),
  };
  const raw = resolveSecrets(
    {
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      log: { level: 'silent' },
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache }],
      pool: { tokens_file: file, points_per_minute: UNPACED },
    },
    {},
  );
  const app = await startApp(parseConfig(raw), { logger: createLogger({ level: 'silent' }), watchTokensFile: false });
  return {
    fake,
    app,
    file,
    close: async () => {
      await app.close();
      await fake.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function applyEvent(rig: Rig, event: PoolEvent): Promise<void> {
  if (event.file !== undefined) {
    writeFileSync(rig.file, event.file);
    const outcome = await rig.app.reloadTokens('signal');
    if (outcome.result !== 'ok') throw new Error(`tokens file reload: ${JSON.stringify(outcome)}`);
  }
  if (event.expires !== undefined) await control(rig.fake, '/__fake/tokens', { token: tokenOf(event.expires), revoked: true });
}

/** One sweep: every repository once, `concurrency` at a time; counts errors and stale answers. */
async function sweep(rig: Rig, settings: RotationSettings, expectedStars: Int32Array, changed: Uint8Array): Promise<[number, number]> {
  let next = 1;
  let errors = 0;
  let stale = 0;
  const worker = async (): Promise<void> => {
    while (next <= settings.entries) {
      const rank = next++;
      const res = await request(`${rig.app.url}${repoPath(rank)}`);
      const text = await res.body.text();
      if (res.statusCode !== 200) errors++;
      else if (changed[rank] === 1 && starsOf(text) !== expectedStars[rank]) stale++;
    }
  };
  await Promise.all(Array.from({ length: settings.concurrency }, worker));
  return [errors, stale];
}

async function runOption(
  option: RotationOption,
  settings: RotationSettings,
  changes: number[][],
): Promise<Omit<RotationResult, 'extraPerRotation'>> {
  const rig = await startRig(option, settings);
  const expectedStars = new Int32Array(settings.entries + 1);
  const changed = new Uint8Array(settings.entries + 1);
  const billableBySweep: number[] = [];
  let errors = 0;
  let stale = 0;
  const started = performance.now();
  const before = rig.fake.stats();
  try {
    for (let index = 0; index < changes.length; index++) {
      await applyEvent(rig, eventBefore(option, index, settings));
      const spentBefore = rig.fake.stats().quotaSpent;
      const [sweepErrors, sweepStale] = await sweep(rig, settings, expectedStars, changed);
      errors += sweepErrors;
      stale += sweepStale;
      billableBySweep.push(rig.fake.stats().quotaSpent - spentBefore);
      for (const rank of changes[index] ?? []) {
        const out = (await control(rig.fake, '/__fake/mutate', { path: repoPath(rank) })) as {
          changed?: { stargazers_count?: { to?: number } };
        };
        expectedStars[rank] = out.changed?.stargazers_count?.to ?? Number.NaN;
        changed[rank] = 1;
      }
    }
    const after = rig.fake.stats();
    return {
      option,
      name: OPTION_TEXT[option],
      requests: changes.length * settings.entries,
      errors,
      stale,
      upstreamRequests: after.total - before.total,
      upstream304: after.notModified - before.notModified,
      billable: after.quotaSpent - before.quotaSpent,
      billableBySweep,
      wallSeconds: (performance.now() - started) / 1000,
    };
  } finally {
    await rig.close();
  }
}

export async function runRotationBench(opts: Partial<RotationSettings> = {}): Promise<RotationResults> {
  const settings: RotationSettings = { ...ROTATION_DEFAULTS, ...opts };
  if (!Number.isInteger(settings.entries) || settings.entries < 1 || settings.entries > 65535)
    throw new RangeError(`entries must be an integer from 1 to 65,535, got ${settings.entries}`);
  if (!Number.isInteger(settings.rotations) || settings.rotations < 1) throw new RangeError(`rotations must be a positive integer`);
  const sweeps = settings.sweepsPerHour * (settings.rotations + 1);
  const changes = changeSchedule(settings, sweeps);
  const results: RotationResult[] = [];
  // One option at a time: the machine is shared, and each option's figures are counts, not speeds.
  for (const option of settings.options) results.push({ ...(await runOption(option, settings, changes)), extraPerRotation: null });
  const controlRun = results.find((result) => result.option === 'none');
  for (const result of results)
    if (controlRun !== undefined && result.option !== 'none')
      result.extraPerRotation = (result.billable - controlRun.billable) / settings.rotations;
  return { settings, sweeps, mutations: changes.reduce((sum, list) => sum + list.length, 0), results };
}

const count = (value: number): string => value.toLocaleString('en-US');

export function formatRotation(results: RotationResults): string {
  const { settings } = results;
  const hour = settings.sweepsPerHour;
  const rows = [
    ['option', 'requests', 'upstream (304)', 'billable', 'extra per rotation', 'per cached entry', 'stale', 'errors', 'wall s'],
    ...results.results.map((result) => [
      result.name,
      count(result.requests),
      `${count(result.upstreamRequests)} (${count(result.upstream304)})`,
      count(result.billable),
      result.extraPerRotation === null ? '-' : result.extraPerRotation.toFixed(1),
      result.extraPerRotation === null ? '-' : (result.extraPerRotation / settings.entries).toFixed(3),
      count(result.stale),
      count(result.errors),
      result.wallSeconds.toFixed(1),
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  const table = rows.map((row) => `| ${row.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')} |`).join('\n');
  const around = (result: RotationResult): string =>
    Array.from({ length: settings.rotations }, (_, index) => {
      const at = (index + 1) * hour;
      return result.billableBySweep.slice(at - 2, at + 2).join('/');
    }).join(', ');
  return [
    `token rotation: ${count(settings.entries)} cached repositories, every one revalidated ${hour} times a simulated hour (policy revalidate), ` +
      `${(settings.changeShare * 100).toFixed(1)} % changed after each sweep, ${settings.rotations} rotations (new token at minute 55, old one expires at 60), seed ${settings.seed}`,
    `${results.sweeps} sweeps, ${count(results.mutations)} changes`,
    '',
    table,
    '',
    "billable = the fake's quotaSpent delta; extra per rotation = (billable - the control's) / rotations; stale = answers older than the current version.",
    'billable per sweep at minutes 50/55/60/65 of each rotation:',
    ...results.results.map((result) => `  ${result.name}: ${around(result)}`),
  ].join('\n');
}

/** Goals: no errors, nothing stale, and If-Modified-Since makes a rotation (nearly) free. */
export function rotationGoalFailures(results: RotationResults): string[] {
  const out: string[] = [];
  for (const result of results.results) {
    if (result.errors > 0) out.push(`${result.name}: ${result.errors} answers other than 200`);
    if (result.stale > 0) out.push(`${result.name}: ${result.stale} stale answers`);
  }
  return out;
}
