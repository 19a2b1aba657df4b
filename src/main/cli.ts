#!/usr/bin/env node
/**
 * etagere command line: argument parsing only (the help texts: src/main/cli-help.ts).
 *   etagere serve [--config FILE]
 *   etagere check-config [--config FILE]
 *   etagere fake-upstream [--port N] [--host H] [--tokens SPEC] [--anon-limit N] [--token-limit N]
 *                         [--window-seconds N] [--latency-ms N] [--faults KIND:RATE,...]
 *                         [--app ID:KEY_FILE:INSTALLATIONS]... [--installation-token-seconds N] [--base-path /api/v3]
 *                         [--webhook-url URL] [--webhook-secret SECRET]
 *   etagere demo [--port N] [--fake-port N] [--admin-port N] [--quiet] [--verbose]
 *   etagere purge (--path P | --prefix P) [--upstream NAME] [--json] [--admin URL | --config FILE]
 *   etagere cache inspect PATH [--upstream NAME] [--body] [--json] [--admin URL | --config FILE]
 *   etagere cache stats [--top N] [--json] [--admin URL | --config FILE]
 *   etagere quota [--window 5m|1h|24h] [--json] [--admin URL | --config FILE]
 *   etagere --help | <command> --help | --version | -v
 * Every error is one line on stderr saying what to do: exit 2 for a bad flag or config, 1 for a
 * failure at run time (no proxy answers, a port in use).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { stringify as toYaml } from 'yaml';
import { startApp, type App } from './app.js';
import { COMMANDS, USAGE, commandHelp, usageOf, version, type Command } from './cli-help.js';
import { ConfigError, loadAdminConfig, loadAdminToken, loadConfig } from '../platform/config/load.js';
import { maskedConfig } from '../platform/config/masked.js';
import { cluster, runPrimary, runWorker, workerCount } from './cluster.js';
import type { Config } from '../platform/config/schema.js';
import { startupSummary } from '../platform/config/summary.js';
import { demoBanner, summaryLine } from './demo-banner.js';
import { startDemoLoad } from '../../fake-github/demo-load.js';
import {
  AppSpecError,
  normaliseBasePath,
  parseAppSpec,
  parseFaultSpec,
  parseTokenSpec,
  startFakeUpstream,
  type FakeUpstreamOptions,
} from '../../fake-github/index.js';
import { basePrefixOf } from '../http/route.js';
import { packageRoot } from './package-root.js';
import {
  AdminUnreachable,
  adminCall,
  adminUrlOf,
  type AdminTarget,
  answerError,
  inspectText,
  graphqlText,
  pretty,
  purgeText,
  quotaPath,
  quotaText,
  statsText,
  type AdminAnswer,
} from './cli-admin.js';

/** One line on stderr (then `usage`, when given: a command's usage lines), and the exit status. */
function fail(message: string, code = 2, usage?: string): never {
  process.stderr.write(`etagere: ${message}\n${usage ?? ''}`);
  process.exit(code);
}

/** The config `serve` would run with; a config error exits 2 with its one line. */
function configOrExit(file: string | undefined): Config {
  try {
    return loadConfig({ file });
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
}

function intFlag(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) fail(`--${name} must be a non-negative integer, got "${value}"`);
  return Number(value);
}

/**
 * SIGTERM and SIGINT stop gracefully (a second one exits at once). With `reload` (etagere serve),
 * SIGHUP calls it (the tokens file) instead of ending the process, as daemons do.
 */
function onSignals(stop: (signal: NodeJS.Signals) => Promise<void>, reload?: () => Promise<unknown>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (stopping) {
      process.stderr.write(`etagere: second ${signal}, exiting now\n`);
      process.exit(1);
    }
    stopping = true;
    stop(signal).then(
      () => process.exit(0),
      (err: unknown) => fail(`shutdown failed: ${(err as Error).message}`, 1),
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  if (reload !== undefined)
    process.on('SIGHUP', () => {
      if (!stopping) void reload();
    });
}

async function serve(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { config: { type: 'string', short: 'c' } }, strict: true });
  const config = configOrExit(values.config);
  if (cluster.isWorker) {
    const worker = await runWorker(config);
    // SIGHUP (to the whole process group, say) changes nothing here: the primary reloads.
    onSignals(
      () => worker.close(),
      async () => undefined,
    );
    return;
  }
  // Signal handlers go in before the "listening" line: a supervisor that signals as soon as it reads
  // that line must get a graceful stop, not Node's default exit by signal.
  if (workerCount(config.workers) > 1) {
    const primary = await runPrimary(config);
    onSignals(
      () => primary.close(),
      () => primary.reload('signal'),
    );
    process.stdout.write(
      `etagere listening on port ${config.listen.port} with ${workerCount(config.workers)} workers (admin ${primary.adminUrl}) ${JSON.stringify(startupSummary(config))}\n`,
    );
    return;
  }
  const app = await startApp(config);
  onSignals(
    (signal) => app.close(signal),
    () => app.reloadTokens('signal'),
  );
  // One line says what it runs with: addresses, upstreams, tokens (a count), Redis, public URL.
  app.logger.info({ url: app.url, admin: app.adminUrl, ...startupSummary(config) }, 'etagere listening');
  app.logger.flush(); // the async destination would otherwise hold the line until 4 KiB accumulate
}

function fakeOptions(values: Record<string, string | string[] | boolean | undefined>): FakeUpstreamOptions {
  const str = (k: string): string | undefined => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  const opts: FakeUpstreamOptions = {
    port: intFlag('port', str('port')) ?? 9100,
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

/** Validates the config as `serve` would and prints it, secrets masked (`nginx -t`). */
async function checkConfig(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { config: { type: 'string', short: 'c' } }, strict: true });
  const config = configOrExit(values.config);
  process.stdout.write(`# etagere ${version()}: the effective configuration (file, environment, defaults); secrets masked\n`);
  process.stdout.write(toYaml(maskedConfig(config), { aliasDuplicateObjects: false }));
  process.stderr.write('etagere: the configuration is valid\n');
  return Promise.resolve();
}

async function fakeUpstream(args: string[]): Promise<void> {
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

async function demo(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      port: { type: 'string' },
      'fake-port': { type: 'string' },
      'admin-port': { type: 'string' },
      quiet: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const fake = await startFakeUpstream({ port: intFlag('fake-port', values['fake-port']) ?? 9100, host: '127.0.0.1' });
  const file = join(packageRoot(), 'config', 'examples', 'demo.yaml');
  let app: App;
  try {
    // The pool: two of the fake's demo tokens (public scopes, so equivalent), unless you give others.
    const tokens = process.env.ETAGERE_TOKENS || 'alice-public=demo_token_alice_public,bob-public=demo_token_bob_public';
    const config = loadConfig({
      file,
      env: { ...process.env, ETAGERE_CONFIG: undefined, UPSTREAM_URL: undefined, ETAGERE_TOKENS: tokens },
    });
    // The access log (a line per request) would drown the summary lines: only with --verbose.
    if (!values.verbose && (config.log.level === 'info' || config.log.level === 'debug' || config.log.level === 'trace'))
      config.log.level = 'warn';
    const adminPort = intFlag('admin-port', values['admin-port']);
    if (adminPort !== undefined) config.admin.port = adminPort;
    const port = intFlag('port', values.port);
    if (port !== undefined) {
      config.listen.port = port;
      if (config.public_url !== null) config.public_url = `http://127.0.0.1:${port}`;
    }
    // Every upstream of the demo config points at the fake, wherever it actually listens.
    for (const upstream of config.upstreams) upstream.url = fake.url + basePrefixOf(new URL(upstream.url).pathname);
    app = await startApp(config);
  } catch (err) {
    await fake.close();
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
  // A small built-in consumer load and a one-line-per-second summary (unless --quiet).
  const load = values.quiet ? undefined : startDemoLoad(app.url);
  const ticker = values.quiet
    ? undefined
    : setInterval(() => {
        process.stdout.write(`${summaryLine(app.metrics.recent.summary(), app.tokens())}\n`);
      }, 1000);
  onSignals(async () => {
    if (ticker !== undefined) clearInterval(ticker);
    await load?.stop();
    await app.close();
    await fake.close();
  });
  process.stdout.write(demoBanner(app, fake.url));
}

/**
 * The admin port to talk to: --admin, else the config's admin.host and admin.port (--config,
 * ETAGERE_CONFIG, ADMIN_HOST, ADMIN_PORT), with its admin.token (ETAGERE_ADMIN_TOKEN). Nothing
 * else of the config is read: no other secret.
 */
function adminTarget(admin: string | undefined, file: string | undefined): AdminTarget {
  if (admin !== undefined) {
    if (!/^https?:\/\/[^\s/]+\/?$/i.test(admin) || !URL.canParse(admin))
      fail("--admin must be the admin port's URL, e.g. http://127.0.0.1:9090");
    return { url: admin, token: loadAdminToken({ file }) };
  }
  try {
    const config = loadAdminConfig({ file });
    return { url: adminUrlOf(config), token: config.admin.token };
  } catch (err) {
    if (err instanceof ConfigError) fail(`${err.message} (or give the admin port's URL with --admin)`);
    throw err;
  }
}

/**
 * Prints an admin answer: JSON with --json, else as text (`text` renders its JSON). A status other
 * than 2xx is one line on stderr and exit 1.
 */
function report(answer: AdminAnswer, json: boolean, text: (value: Record<string, unknown>) => string): void {
  if (answer.status < 200 || answer.status >= 300) fail(answerError(answer), 1);
  let out = pretty(answer);
  if (!json) {
    try {
      out = text(JSON.parse(answer.body) as Record<string, unknown>);
    } catch {
      fail(`the admin port answered ${answer.status} with something other than JSON: is that an etagere admin port?`, 1);
    }
  }
  process.stdout.write(out, () => process.exit(0));
}

const ADMIN_FLAGS = {
  admin: { type: 'string' },
  config: { type: 'string', short: 'c' },
  upstream: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const;

async function purge(args: string[]): Promise<void> {
  const options = { ...ADMIN_FLAGS, path: { type: 'string' }, prefix: { type: 'string' }, tag: { type: 'string' } } as const;
  const { values } = parseArgs({ args, options, strict: true });
  const given = [values.path, values.prefix, values.tag].filter((value) => value !== undefined);
  if (given.length !== 1) fail('give exactly one of --path, --prefix and --tag', 2, usageOf('purge'));
  const body: Record<string, string> =
    values.tag !== undefined ? { tag: values.tag } : values.prefix !== undefined ? { prefix: values.prefix } : { path: values.path! };
  if (values.upstream !== undefined) body.upstream = values.upstream;
  report(await adminCall(adminTarget(values.admin, values.config), 'POST', '/admin/purge', body), values.json, purgeText);
}

async function cacheCommand(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  if (sub !== 'inspect' && sub !== 'stats')
    fail(sub === undefined ? 'cache needs inspect or stats' : `unknown cache command "${sub}" (inspect or stats)`, 2, usageOf('cache'));
  const { values, positionals } = parseArgs({
    args: rest,
    options: { ...ADMIN_FLAGS, body: { type: 'boolean', default: false }, top: { type: 'string' }, graphql: { type: 'string' } },
    strict: true,
    allowPositionals: true,
  });
  if (sub === 'stats') {
    if (positionals.length > 0) fail(`cache stats takes no path (got "${positionals[0]}")`, 2, usageOf('cache'));
    const top = intFlag('top', values.top);
    const admin = adminTarget(values.admin, values.config);
    report(await adminCall(admin, 'GET', `/admin/cache/stats${top === undefined ? '' : `?top=${top}`}`), values.json, statsText);
    return;
  }
  if (values.graphql !== undefined) {
    if (positionals.length > 0) fail('cache inspect takes a PATH or --graphql KEY, not both', 2, usageOf('cache'));
    const path = `/admin/cache?${new URLSearchParams({ graphql: values.graphql }).toString()}`;
    report(await adminCall(adminTarget(values.admin, values.config), 'GET', path), values.json, graphqlText);
    return;
  }
  if (positionals.length !== 1) fail('cache inspect needs one PATH, e.g. /repos/octo/hello', 2, usageOf('cache'));
  const query = new URLSearchParams({ path: positionals[0]! });
  if (values.upstream !== undefined) query.set('upstream', values.upstream);
  if (values.body) query.set('body', '1');
  const admin = adminTarget(values.admin, values.config);
  report(await adminCall(admin, 'GET', `/admin/cache?${query.toString()}`), values.json, inspectText);
}

async function quota(args: string[]): Promise<void> {
  const options = { admin: ADMIN_FLAGS.admin, config: ADMIN_FLAGS.config, json: ADMIN_FLAGS.json, window: { type: 'string' } } as const;
  const { values } = parseArgs({ args, options, strict: true });
  const target = quotaPath(values.window);
  if ('error' in target) fail(target.error, 2, usageOf('quota'));
  report(await adminCall(adminTarget(values.admin, values.config), 'GET', target.path), values.json, quotaText);
}

function run(command: string | undefined, rest: string[]): Promise<void> {
  switch (command) {
    case 'serve':
      return serve(rest);
    case 'check-config':
      return checkConfig(rest);
    case 'fake-upstream':
      return fakeUpstream(rest);
    case 'demo':
      return demo(rest);
    case 'purge':
      return purge(rest);
    case 'cache':
      return cacheCommand(rest);
    case 'quota':
      return quota(rest);
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(USAGE);
      return Promise.resolve();
    case '-v':
    case '-V':
    case '--version':
    case 'version':
      process.stdout.write(`etagere ${version()}\n`);
      return Promise.resolve();
    default:
      fail(
        command === undefined ? 'give a command (etagere --help lists them)' : `unknown command "${command}" (etagere --help lists them)`,
        2,
        USAGE,
      );
  }
}

/** parseArgs's complaint about a flag, on one line. */
function flagProblem(error: NodeJS.ErrnoException): string | undefined {
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown flag ${/'([^']+)'/.exec(error.message)?.[1] ?? ''}`.trimEnd();
  const missing = /'(?:-\w, )?(--[\w-]+) <value>' argument missing/.exec(error.message);
  if (missing !== null) return `${missing[1]} needs a value`;
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' || error.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL')
    return error.message.split(/\.(?: |$)/)[0]!;
  return undefined;
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const known = COMMANDS.includes(command as Command) ? (command as Command) : undefined;
  if (known !== undefined && (rest.includes('--help') || rest.includes('-h'))) {
    process.stdout.write(commandHelp(known));
    return;
  }
  try {
    await run(command, rest);
  } catch (err) {
    const problem = flagProblem(err as NodeJS.ErrnoException);
    if (problem !== undefined)
      fail(known === undefined ? problem : `${problem} for etagere ${known}`, 2, known === undefined ? USAGE : usageOf(known));
    throw err;
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  const error = err as NodeJS.ErrnoException;
  if (err instanceof AdminUnreachable) fail(error.message, 1);
  if (err instanceof ConfigError) fail(error.message);
  if (error.code === 'EADDRINUSE') fail(`address already in use: ${firstLine(error.message)}`, 1);
  // No stack trace: one line that names the failure (an unexpected one included).
  fail(`${firstLine(error.message ?? String(err))}${typeof error.code === 'string' ? ` (${error.code})` : ''}`, 1);
});

function firstLine(text: string): string {
  return text.split('\n')[0]!.trim();
}
