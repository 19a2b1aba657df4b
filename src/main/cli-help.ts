/**
 * Pure: the command line's help texts (`etagere --help`, `etagere <command> --help`) and version.
 * Each command's help lists its flags; `etagere --help` lists every environment variable, from
 * ENV_VARS, the one list load.ts reads, so the help cannot drift from it. Imports no dependency.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENV_VARS } from '../platform/config/env-vars.js';
import { fakeUpstreamFlags } from '../../fake-github/flags.js';
import { packageRoot } from './package-root.js';

export const COMMANDS = ['serve', 'check-config', 'fake-upstream', 'demo', 'purge', 'cache', 'quota'] as const;
export type Command = (typeof COMMANDS)[number];

/** The version in package.json (the same file from src/ and from dist/). */
export function version(): string {
  const text = readFileSync(join(packageRoot(), 'package.json'), 'utf8');
  const parsed = JSON.parse(text) as { version?: unknown };
  return typeof parsed.version === 'string' ? parsed.version : 'unknown';
}

function columns(rows: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...rows.map(([left]) => left.length)) + 2;
  return rows.map(([left, right]) => `  ${left.padEnd(width)}${right}`).join('\n');
}

function envSection(): string {
  return `environment (each overrides its key of the config file):\n${columns(Object.entries(ENV_VARS))}`;
}

const SERVE = `usage: etagere serve [--config FILE] [--port N] [--host H] [--admin-port N]

Runs the proxy. Its configuration: the YAML file (--config, else ETAGERE_CONFIG), then the
environment variables (etagere --help lists them), then these flags, else built-in defaults
(GitHub at https://api.github.com, port 8080, admin port 9090, both on 127.0.0.1). A flag beats
its variable (--port beats PORT), which beats the file. Reference: docs/configuration.md.

signals: SIGTERM or SIGINT drain and stop; SIGHUP reloads the tokens file (ETAGERE_TOKENS_FILE),
which is also reloaded when it changes, and lists the GitHub Apps' installations again.

flags:
${columns([
  ['-c, --config FILE', 'the YAML config file'],
  ['--port N', 'listen.port: the proxy port (else PORT, the file, 8080)'],
  ['--host H', 'listen.host: the address the proxy listens on (else HOST, the file, 127.0.0.1)'],
  ['--admin-port N', 'admin.port: health, metrics, status page, /admin/* (else ADMIN_PORT, the file, 9090)'],
  ['-h, --help', 'this help'],
])}
`;

const CHECK_CONFIG = `usage: etagere check-config [--config FILE]

Checks the configuration as \`etagere serve\` would load it (the file, the environment variables
that etagere --help lists, the secrets and files they name) and prints the effective
configuration as YAML with every secret masked: token and consumer key values, App private keys,
the webhook and partition secrets, URL passwords. Exits 0 when it is valid; 2 with one line
naming each bad key (and the variable that set it) when not, like \`nginx -t\`.

flags:
${columns([
  ['-c, --config FILE', 'the YAML config file (else ETAGERE_CONFIG)'],
  ['-h, --help', 'this help'],
])}
`;

const DEMO = `usage: etagere demo [--port N] [--fake-port N] [--admin-port N] [--quiet] [--verbose]

Starts the fake upstream and a proxy in front of it (config/examples/demo.yaml), with a small
built-in consumer load and a summary line per second. The pool uses two of the fake's demo tokens
unless ETAGERE_TOKENS names others.

flags:
${columns([
  ['--port N', "the proxy's port (default 8080)"],
  ['--fake-port N', "the fake upstream's port (default 9100)"],
  ['--admin-port N', 'the admin port: status page, metrics, health (default 9090)'],
  ['--quiet', 'no consumer load and no summary lines'],
  ['--verbose', "the proxy's log lines too (the access log: one line per request); LOG_LEVEL sets the level"],
  ['-h, --help', 'this help'],
])}
`;

function placeholder(flag: string): string {
  if (flag === '--no-rate-limits') return '';
  if (flag === '--host') return 'H';
  if (flag === '--webhook-url') return 'URL';
  if (flag === '--webhook-secret') return 'SECRET';
  return flag === '--tokens' || flag === '--faults' ? 'SPEC' : 'N';
}

const ADMIN_ROWS: ReadonlyArray<readonly [string, string]> = [
  ['--admin URL', "the running proxy's admin port, e.g. http://127.0.0.1:9090"],
  [
    '-c, --config FILE',
    'else: the admin.host and admin.port of this config (ETAGERE_CONFIG, ADMIN_HOST, ADMIN_PORT apply); its admin.token, or ETAGERE_ADMIN_TOKEN, is sent as the bearer token',
  ],
  ['--upstream NAME', 'only this upstream (default: every upstream)'],
  ['--json', "the admin port's answer as JSON (default: text for a terminal)"],
];

const PURGE = `usage: etagere purge (--path P | --prefix P | --tag T) [--upstream NAME] [--json] [--admin URL | --config FILE]

Marks cached entries stale on a running proxy, on every replica (through Redis): the next request
for each revalidates it (POST /admin/purge). Paths are as clients request them through the proxy;
a prefix covers whole segments ("/repos/o/" covers /repos/o/r, never /repos/other). Prints the
answer, with the entries marked in the process that took the call. A tag drops every GraphQL
answer and stored 404 filed under it instead.

flags:
${columns([
  ['--path P', 'one path: every query, credential and representation stored under it'],
  ['--prefix P', 'a path and everything below it'],
  ['--tag T', 'repo:OWNER/NAME, owner:LOGIN or node:ID (every upstream)'],
  ...ADMIN_ROWS,
  ['-h, --help', 'this help'],
])}

`;

const CACHE = `usage: etagere cache inspect PATH [--upstream NAME] [--body] [--json] [--admin URL | --config FILE]
       etagere cache inspect --graphql KEY [--json] [--admin URL | --config FILE]
       etagere cache stats [--top N] [--json] [--admin URL | --config FILE]

inspect: the entries a running proxy holds for one path (GET /admin/cache): partition (anonymous,
pool, credential: never a credential), Accept, API version, age, TTL, ETag, size, who fetched it.
With --graphql, the GraphQL answer under KEY (the key="gql:..." of its Cache-Status) and its tags.
stats: entries, bytes, and the busiest paths by hits and by upstream requests (GET /admin/cache/stats).

flags:
${columns([
  ['--graphql KEY', 'inspect: a GraphQL answer by its key, with the tags that purge it'],
  ['--body', 'inspect: the stored bodies too (anonymous and pool entries only)'],
  ['--top N', 'stats: how many paths in each ranking (default 10, at most 100)'],
  ...ADMIN_ROWS,
  ['-h, --help', 'this help'],
])}

`;

const QUOTA = `usage: etagere quota [--window 5m|1h|24h] [--json] [--admin URL | --config FILE]

Who spent a running proxy's upstream quota on what (GET /admin/quota): the busiest consumer x
route rows by requests sent upstream and by billable ones (all but 304s to authorised requests),
over the last 5 minutes, hour (the default) or day. Consumers are as metrics.consumer_label says.

flags:
${columns([
  ['--window W', '5m, 1h or 24h (default 1h)'],
  ...ADMIN_ROWS.filter(([flag]) => !flag.startsWith('--upstream')),
  ['-h, --help', 'this help'],
])}

`;

const FAKE = `usage: etagere fake-upstream [options]

Runs the fake upstream: a GitHub-like read API with rate limits, ETags and fault injection
(docs/fake-upstream.md). It reads no environment variable.

flags:
${columns([
  ...fakeUpstreamFlags.map((flag) => [`${flag.flag} ${placeholder(flag.flag)}`.trimEnd(), flag.description] as const),
  ['-h, --help', 'this help'],
])}
  fault kinds: refuse, reset, reset-headers, reset-body, truncate, slow-headers, slow-body,
  status, bad-json, bad-gzip, huge; more rules (and a seed) through POST /__fake/faults
`;

/** `etagere <command> --help`: that command's flags (the environment variables: `etagere --help`). */
export function commandHelp(command: Command): string {
  if (command === 'serve') return SERVE;
  if (command === 'check-config') return CHECK_CONFIG;
  if (command === 'demo') return DEMO;
  if (command === 'purge') return PURGE;
  if (command === 'cache') return CACHE;
  if (command === 'quota') return QUOTA;
  return FAKE;
}

/** A command's usage lines (what a bad flag prints under its one-line error), and where every flag is. */
export function usageOf(command: Command): string {
  const help = commandHelp(command);
  return `${help.slice(0, help.indexOf('\n\n'))}\n  (etagere ${command} --help lists every flag)\n`;
}

/** `etagere --help`, and what an unknown command prints. */
export const USAGE = `usage: etagere <command> [flags]

commands:
${columns([
  ['serve [--config FILE] [--port N]', 'run the proxy (etagere serve --help: every flag)'],
  ['check-config [--config FILE]', 'check the config as serve would; print it, secrets masked'],
  ['fake-upstream [flags]', 'run the fake upstream API'],
  ['demo [flags]', 'the fake upstream, a proxy in front of it, a consumer load and a live summary'],
  ['purge --prefix P | --path P', 'mark cached entries stale on a running proxy (its admin port)'],
  ['cache inspect PATH | cache stats', "a running proxy's entries for a path; its cache figures"],
  ['quota [--window W] [--json]', "who spent a running proxy's upstream quota on what"],
])}

  etagere <command> --help   every flag of a command
  etagere -v, --version      the version

${envSection()}
`;
