/**
 * Real clients against a zero-config proxy (test/clients/, test/e2e/zero-config-redirects.test.ts):
 * the bundled fake upstream behind a proxy configured with nothing but the upstream URL and pool
 * tokens (no public_url, no trust_forwarded), the check at the fake's counters that no client
 * request went around the proxy, and running a client program (execFile, a timeout, a clean
 * environment, its output captured for the secrets scan).
 */
import { execFile, execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { capture, capturing, inTestFile } from './capture.js';
import { startTestProxy, type TestProxy } from './proxy.js';

/**
 * Every request the fake saw was made with one of the pool's tokens (by the fake's login for it):
 * none came from a client directly, which holds no token and would be counted as anonymous.
 */
export function expectAllThroughProxy(fake: FakeUpstream, poolLogins: readonly string[]): void {
  const { byCredential, total } = fake.stats();
  expect(byCredential.anonymous ?? 0, 'requests that reached the fake without a token').toBe(0);
  expect(byCredential.invalid ?? 0, 'requests that reached the fake with a token it does not know').toBe(0);
  const pooled = poolLogins.reduce((sum, login) => sum + (byCredential[login] ?? 0), 0);
  expect(pooled, `requests on the pool's tokens, of ${JSON.stringify(byCredential)}`).toBe(total);
}

/** The fake and a zero-config proxy in front of it. */
export interface ZeroConfig {
  fake: FakeUpstream;
  proxy: TestProxy;
  /** The fake's logins of the pool's tokens (for expectAllThroughProxy). */
  poolLogins: readonly string[];
  close(): Promise<void>;
}

/**
 * Starts the fake with two tokens that see public data only (scope public_repo, so whichever token
 * serves a request, the answer is the same), and a proxy whose whole configuration is the upstream
 * URL and those tokens in its pool.
 */
export async function startZeroConfig(prefix: string): Promise<ZeroConfig> {
  const [one, two] = [`${prefix}_pool_token_one`, `${prefix}_pool_token_two`];
  const fake = await startFakeUpstream({ tokens: parseTokenSpec(`${one}@bob:public_repo,${two}@carol:public_repo`) });
  const proxy = await startTestProxy({
    upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
    pool: {
      tokens: [
        { name: 'one', value: one },
        { name: 'two', value: two },
      ],
    },
  });
  return {
    fake,
    proxy,
    poolLogins: ['bob', 'carol'],
    close: async () => {
      await proxy.close();
      await fake.close();
    },
  };
}

/** What a client program did. */
export interface Ran {
  /** The exit code (null when it was killed: by the timeout, or a signal). */
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `file` with `args` (no shell), in `env` only (nothing of the test process's environment:
 * no token of the machine reaches the client), and waits for it to exit or the timeout to kill it.
 */
export function runClient(file: string, args: readonly string[], env: Record<string, string>, timeoutMs = 20_000): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(file, args, { env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
      if (capturing()) capture(`${file} ${args.join(' ')}${inTestFile()}: stdout and stderr`, `${stdout}\n${stderr}`);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The environment a client program gets: a PATH and a UTF-8 locale, plus `extra`. */
export function clientEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', ...extra };
}

/** Whether `file args` runs and exits 0 (a quick probe for an installed tool). */
export function probe(file: string, args: readonly string[], env: Record<string, string> = clientEnv()): boolean {
  try {
    execFileSync(file, args, { env, stdio: 'ignore', timeout: 15_000 });
    return true;
  } catch {
    return false;
  }
}

/** Every item of a list endpoint, read from the fake directly (without credentials, 100 a page). */
export async function listAll<Item>(fake: FakeUpstream, path: string): Promise<Item[]> {
  const items: Item[] = [];
  for (let page = 1; ; page++) {
    const res = await fetch(`${fake.url}${path}?per_page=100&page=${page}`);
    expect(res.status, path).toBe(200);
    const got = (await res.json()) as Item[];
    if (got.length === 0) return items;
    items.push(...got);
  }
}

/** The environment of a gh run kept to `home`: its own config, state and cache, no prompts, no update check, no colour. */
export function ghEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    GH_CONFIG_DIR: join(home, 'gh'),
    HOME: home,
    XDG_CONFIG_HOME: join(home, 'config'),
    XDG_STATE_HOME: join(home, 'state'),
    XDG_DATA_HOME: join(home, 'data'),
    XDG_CACHE_HOME: join(home, 'cache'),
    GH_NO_UPDATE_NOTIFIER: '1',
    GH_PROMPT_DISABLED: '1',
    NO_COLOR: '1',
    ...extra,
  };
}
