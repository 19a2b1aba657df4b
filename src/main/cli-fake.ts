/**
 * `etagere fake-upstream [flags]`: the fake GitHub on a port (docs/fake-upstream.md). Loads the
 * fake and nothing of the proxy.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  AppSpecError,
  normaliseBasePath,
  parseAppSpec,
  parseFaultSpec,
  parseTokenSpec,
  startFakeUpstream,
  type FakeUpstreamOptions,
} from '../../fake-github/index.js';
import { fail, intFlag, onSignals, portFlag } from './cli-common.js';

function fakeOptions(values: Record<string, string | string[] | boolean | undefined>): FakeUpstreamOptions {
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  const opts: FakeUpstreamOptions = {
    port: portFlag('port', str('port')) ?? 9100,
    host: str('host') ?? '127.0.0.1',
  };
  /** A flag's value through its parser; a parse error exits naming the flag. */
  const parsed = <T>(flag: string, parse: (value: string) => T): T | undefined => {
    const value = str(flag);
    if (value === undefined) return undefined;
    try {
      return parse(value);
    } catch (err) {
      fail(`--${flag}: ${(err as Error).message}`);
    }
  };
  const tokens = parsed('tokens', parseTokenSpec);
  if (tokens !== undefined) opts.tokens = tokens;
  const setIntOption = (
    flag: string,
    key: 'anonymousLimit' | 'tokenLimit' | 'windowSeconds' | 'latencyMs' | 'installationTokenSeconds',
  ): void => {
    const value = intFlag(flag, str(flag));
    if (value !== undefined) opts[key] = value;
  };
  setIntOption('anon-limit', 'anonymousLimit');
  setIntOption('token-limit', 'tokenLimit');
  setIntOption('window-seconds', 'windowSeconds');
  setIntOption('latency-ms', 'latencyMs');
  setIntOption('installation-token-seconds', 'installationTokenSeconds');
  const faults = parsed('faults', parseFaultSpec);
  if (faults !== undefined) opts.faults = faults;
  const basePath = parsed('base-path', normaliseBasePath);
  if (basePath !== undefined) opts.basePath = basePath;
  if (values['no-rate-limits'] === true) opts.rateLimits = false;
  const webhookUrl = parsed('webhook-url', (value) => {
    if (!/^https?:\/\/\S+$/i.test(value)) throw new Error('must be an http:// or https:// URL');
    return value;
  });
  if (webhookUrl !== undefined) opts.webhookUrl = webhookUrl;
  const webhookSecret = str('webhook-secret');
  if (webhookSecret !== undefined && webhookUrl === undefined) fail('--webhook-secret needs --webhook-url');
  if (webhookSecret !== undefined) opts.webhookSecret = webhookSecret;
  const apps = values.app;
  if (Array.isArray(apps)) {
    opts.apps = apps.map((spec) => {
      try {
        return parseAppSpec(spec, (path) => readFileSync(path, 'utf8'));
      } catch (err) {
        fail(`--app: ${(err as Error).message}`);
      }
    });
  }
  return opts;
}

const FAKE_FLAGS = {
  port: { type: 'string' },
  host: { type: 'string' },
  tokens: { type: 'string' },
  'anon-limit': { type: 'string' },
  'token-limit': { type: 'string' },
  'window-seconds': { type: 'string' },
  'latency-ms': { type: 'string' },
  faults: { type: 'string' },
  app: { type: 'string', multiple: true },
  'installation-token-seconds': { type: 'string' },
  'base-path': { type: 'string' },
  'no-rate-limits': { type: 'boolean' },
  'webhook-url': { type: 'string' },
  'webhook-secret': { type: 'string' },
} as const;

export async function fakeUpstream(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: FAKE_FLAGS, strict: true });
  const opts = fakeOptions(values);
  let fake;
  try {
    fake = await startFakeUpstream(opts);
  } catch (err) {
    // A bad App (unknown account, a key that is not RSA, a taken id): a flag error, exit 2.
    if (err instanceof AppSpecError) fail(`--app: ${err.message}`);
    throw err;
  }
  let banner = `fake upstream listening on ${fake.url} (stats: ${fake.url}/__fake/stats)\n`;
  if (fake.apiUrl !== fake.url) banner += `API under ${fake.apiUrl}\n`;
  if (opts.rateLimits === false) banner += 'rate limits off (GitHub Enterprise Server default): /rate_limit answers 404\n';
  if (opts.webhookUrl !== undefined)
    banner += `webhooks to ${opts.webhookUrl}${opts.webhookSecret === undefined ? ' (unsigned)' : ' (signed)'}\n`;
  if (opts.faults !== undefined && opts.faults.length > 0) {
    const rules = opts.faults.map((fault) => `${fault.kind}:${fault.rate ?? 1}`).join(', ');
    banner += `fault injection on: ${rules} (rules: ${fake.url}/__fake/faults)\n`;
  }
  onSignals(() => fake.close());
  // One write: whoever waits for "listening" reads the fault line with it.
  process.stdout.write(banner);
}
