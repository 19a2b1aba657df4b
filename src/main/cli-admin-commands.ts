/**
 * `etagere purge`, `etagere cache inspect|stats` and `etagere quota`: flags, the admin port to call
 * (--admin, else the config's admin section alone) and what is printed. Loads no proxy module.
 */
import { parseArgs } from 'node:util';
import { usageOf } from './cli-help.js';
import { ConfigError, loadAdminConfig, loadAdminToken } from '../platform/config/load.js';
import {
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
import { fail, intFlag } from './cli-common.js';

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

export async function purge(args: string[]): Promise<void> {
  const options = { ...ADMIN_FLAGS, path: { type: 'string' }, prefix: { type: 'string' }, tag: { type: 'string' } } as const;
  const { values } = parseArgs({ args, options, strict: true });
  const given = [values.path, values.prefix, values.tag].filter((value) => value !== undefined);
  if (given.length !== 1) fail('give exactly one of --path, --prefix and --tag', 2, usageOf('purge'));
  const body: Record<string, string> =
    values.tag !== undefined ? { tag: values.tag } : values.prefix !== undefined ? { prefix: values.prefix } : { path: values.path! };
  if (values.upstream !== undefined) body.upstream = values.upstream;
  report(await adminCall(adminTarget(values.admin, values.config), 'POST', '/admin/purge', body), values.json, purgeText);
}

export async function cacheCommand(args: string[]): Promise<void> {
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

export async function quota(args: string[]): Promise<void> {
  const options = { admin: ADMIN_FLAGS.admin, config: ADMIN_FLAGS.config, json: ADMIN_FLAGS.json, window: { type: 'string' } } as const;
  const { values } = parseArgs({ args, options, strict: true });
  const target = quotaPath(values.window);
  if ('error' in target) fail(target.error, 2, usageOf('quota'));
  report(await adminCall(adminTarget(values.admin, values.config), 'GET', target.path), values.json, quotaText);
}
