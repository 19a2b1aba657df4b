/**
 * The command line answers at once and says what is wrong in one go, through the built CLI:
 * `--version` and `--help` load no module of the proxy and no dependency, `check-config` only the
 * config's (zod, YAML); `etagere serve --port/--host/--admin-port` beat their variables and the
 * file, and bad values are one line, exit 2; `check-config` names every variable that is not set.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { finished, runCli, type CliProcess } from '../helpers/cli.js';
import { until } from '../helpers/proxy.js';
import { deadPort } from '../helpers/upstream.js';

const dir = mkdtempSync(join(tmpdir(), 'etagere-cli-flags-'));
const RECORDER = fileURLToPath(new URL('../helpers/record-imports.mjs', import.meta.url));
const ISOLATED = { ETAGERE_CONFIG: undefined, ETAGERE_TOKENS: undefined, ETAGERE_TOKENS_FILE: undefined, REDIS_URL: undefined };

/** The modules (file URLs) the CLI loads for `args`. */
async function loadedBy(args: string[], env: Record<string, string | undefined> = {}): Promise<string[]> {
  const record = join(dir, `imports-${args.join('-').replace(/\W+/g, '_')}.txt`);
  writeFileSync(record, '');
  const cli = runCli(args, { ...ISOLATED, ...env, RECORD_IMPORTS_TO: record, NODE_OPTIONS: `--import=${RECORDER}` });
  const { code } = await finished(cli);
  expect(code, cli.stderr()).toBe(0);
  return readFileSync(record, 'utf8')
    .split('\n')
    .filter((line) => line !== '');
}

const packagesOf = (urls: string[]): Set<string> =>
  new Set(urls.flatMap((url) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? []));

describe('a command line that answers at once', () => {
  it.each([[['--version']], [['--help']], [['serve', '--help']], [['demo', '--help']]])(
    'etagere %j loads no dependency and no module of the proxy',
    { timeout: 20_000 },
    async (args) => {
      const loaded = await loadedBy(args);
      expect([...packagesOf(loaded)]).toEqual([]);
      const ours = loaded.filter((url) => url.includes('/dist/')).map((url) => url.slice(url.indexOf('/dist/') + 6));
      expect(ours.length).toBeGreaterThan(0);
      expect(
        ours.filter(
          (path) =>
            !/^(src\/main\/cli(-help|-common)?|src\/main\/package-root|src\/platform\/config\/env-vars|fake-github\/flags)\.js$/.test(path),
        ),
      ).toEqual([]);
    },
  );

  it(
    'etagere check-config loads the config modules (zod, yaml) and no server, logger, metrics, Redis or tracing',
    { timeout: 20_000 },
    async () => {
      const loaded = await loadedBy(['check-config', '--config', 'config/default.yaml']);
      expect([...packagesOf(loaded)].sort()).toEqual(['yaml', 'zod']);
      expect(loaded.filter((url) => /\/dist\/src\/(main\/(app|services|handler|cluster)|paths|cache|pool|upstream)[./]/.test(url))).toEqual(
        [],
      );
    },
  );
});

describe('etagere serve --port, --host, --admin-port', () => {
  let running: CliProcess | undefined;
  afterEach(async () => {
    running?.child.kill('SIGTERM');
    await running?.exited;
    running = undefined;
  });

  it('a flag beats its environment variable, which beats the file', { timeout: 30_000 }, async () => {
    const [filePort, envPort, flagPort, envAdmin, flagAdmin] = await Promise.all([1, 2, 3, 4, 5].map(() => deadPort()));
    const config = join(dir, 'ports.yaml');
    writeFileSync(config, `listen: { port: ${filePort}, host: 127.0.0.2 }\nadmin: { port: ${envAdmin} }\n`);
    running = runCli(['serve', '--config', config, '--port', String(flagPort), '--host', '127.0.0.1', '--admin-port', String(flagAdmin)], {
      ...ISOLATED,
      PORT: String(envPort),
      HOST: '127.0.0.3',
      ADMIN_PORT: String(envAdmin),
      UPSTREAM_URL: `http://127.0.0.1:${await deadPort()}`,
    });
    const cli = running;
    await until(() => cli.stdout().includes('etagere listening'), 20_000, 'the listening line');
    expect(cli.stdout()).toContain(`"url":"http://127.0.0.1:${flagPort}"`);
    expect(cli.stdout()).toContain(`"admin":"http://127.0.0.1:${flagAdmin}"`);
    const health = await fetch(`http://127.0.0.1:${flagAdmin}/healthz`);
    expect(health.status).toBe(200);
    const proxied = await fetch(`http://127.0.0.1:${flagPort}/zen`);
    expect(proxied.status).toBe(502); // the proxy port answers (its upstream is down)
  });

  it("docs/configuration.md's serve example runs as written (on free ports)", { timeout: 30_000 }, async () => {
    const doc = readFileSync(fileURLToPath(new URL('../../docs/configuration.md', import.meta.url)), 'utf8');
    const example = /^etagere serve --config (\S+) --port (\d+) --admin-port (\d+)$/m.exec(doc);
    expect(example, 'the example is in the doc').not.toBeNull();
    const [port, admin] = [await deadPort(), await deadPort()];
    running = runCli(['serve', '--config', example![1]!, '--port', String(port), '--admin-port', String(admin)], ISOLATED);
    const cli = running;
    await until(() => cli.stdout().includes('etagere listening'), 20_000, 'the listening line');
    expect((await fetch(`http://127.0.0.1:${admin}/healthz`)).status).toBe(200);
  });

  it.each([
    [['--port', 'abc'], 'etagere: --port must be a port number, 0-65535, got "abc"'],
    [['--port', '70000'], 'etagere: --port must be a port number, 0-65535, got "70000"'],
    [['--admin-port=-1'], 'etagere: --admin-port must be a port number, 0-65535, got "-1"'],
    [['--admin-port', '-1'], 'etagere: --admin-port needs a value (one that starts with "-": --admin-port=VALUE) for etagere serve'],
    [['--port'], 'etagere: --port needs a value for etagere serve'],
  ])('hostile: serve %j is one line, exit 2, no stack', { timeout: 20_000 }, async (flags, line) => {
    const cli = runCli(['serve', ...flags], ISOLATED);
    const { code, lines } = await finished(cli);
    expect(code).toBe(2);
    expect(lines[0]).toBe(line);
    expect(cli.stderr()).not.toMatch(/^\s+at /m);
    expect(cli.stdout()).toBe('');
  });
});

describe('the other commands take ports the same way', () => {
  it.each([
    [['demo', '--port', '70000'], 'etagere: --port must be a port number, 0-65535, got "70000"'],
    [['demo', '--fake-port', 'x'], 'etagere: --fake-port must be a port number, 0-65535, got "x"'],
    [['fake-upstream', '--port', '99999'], 'etagere: --port must be a port number, 0-65535, got "99999"'],
  ])('hostile: %j is one line, exit 2', { timeout: 20_000 }, async (args, line) => {
    const cli = runCli(args, ISOLATED);
    const { code, lines } = await finished(cli);
    expect(code).toBe(2);
    expect(lines).toEqual([line]);
  });
});

describe('etagere check-config names every problem at once', () => {
  it('three variables that are not set: one line naming all three, exit 2', { timeout: 20_000 }, async () => {
    const config = join(dir, 'unset.yaml');
    writeFileSync(
      config,
      [
        'pool:',
        '  tokens: [{ name: ci, env: CHECK_UNSET_ONE }, { name: bot, env: CHECK_UNSET_TWO }]',
        'consumers: { enabled: true, keys: [{ name: web, env: CHECK_UNSET_THREE }] }',
      ].join('\n'),
    );
    const cli = runCli(['check-config', '--config', config], ISOLATED);
    const { code, lines } = await finished(cli);
    expect(code).toBe(2);
    expect(lines).toEqual([
      'etagere: pool.tokens[0].env: environment variable CHECK_UNSET_ONE is not set; ' +
        'pool.tokens[1].env: environment variable CHECK_UNSET_TWO is not set; ' +
        'consumers.keys[0].env: environment variable CHECK_UNSET_THREE is not set',
    ]);
  });

  it('WORKERS=lots says what WORKERS takes', { timeout: 20_000 }, async () => {
    const cli = runCli(['check-config'], { ...ISOLATED, WORKERS: 'lots' });
    const { code, lines } = await finished(cli);
    expect(code).toBe(2);
    expect(lines).toEqual([
      'etagere: invalid config (environment): WORKERS: must be a whole number from 1 to 256, or "auto" (one per CPU) (workers)',
    ]);
  });
});
