/**
 * Starts a proxy for tests: ephemeral ports, a log capture, and a config built from overrides.
 * For the secrets scan after the suite (test/helpers/secrets-scan.ts) it records the proxy's
 * secrets (pool tokens, consumer keys, partition secret, GitHub App keys), watches its listeners' answers, and at
 * close captures its log text, /metrics and the admin answers.
 */
import { IncomingMessage, ServerResponse, type Server } from 'node:http';
import { Duplex, Writable } from 'node:stream';
import { pino } from 'pino';
import { startApp, type App, type AppOptions } from '../../src/main/app.js';
import { consumerKeysFromFile, parseConfig } from '../../src/platform/config/load.js';
import type { Config } from '../../src/platform/config/schema.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { atFileEnd, capture, capturing, inTestFile, registerOrigin } from './capture.js';
import { recordSecret } from './secrets.js';

export { until } from './until.js';

export interface TestProxy extends App {
  /** Every log line written so far, parsed. */
  logs(): Array<Record<string, unknown>>;
  /** Raw log text (for secret scans). */
  logText(): string;
}

/** `options`: what startApp takes besides the config and logger (the GitHub App sources' clocks). */
export async function startTestProxy(raw: Record<string, unknown>, options: Pick<AppOptions, 'appTiming'> = {}): Promise<TestProxy> {
  const config: Config = parseConfig({
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    ...raw,
    log: { level: 'info' },
  });
  let text = '';
  const dest = new Writable({
    write(chunk: Buffer, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  const logger = createLogger({ level: 'info', destination: dest as unknown as pino.DestinationStream });
  for (const token of config.pool.tokens)
    recordSecret(`pool token ${token.name ?? '(unnamed)'} of a test proxy${inTestFile()}`, token.value);
  for (const key of [...config.consumers.keys, ...consumerKeysFromFile(config)])
    if (key.value !== undefined) recordSecret(`consumer key ${key.name} of a test proxy${inTestFile()}`, key.value);
  for (const app of config.pool.apps) {
    const lines = (app.private_key ?? '').split('\n').filter((line) => line.length >= 40 && !line.startsWith('-----'));
    lines.forEach((line, index) =>
      recordSecret(`GitHub App ${app.name}'s private key line ${index + 1} of a test proxy${inTestFile()}`, line),
    );
  }
  if (config.cache.partition_secret !== null)
    recordSecret(`cache.partition_secret of a test proxy${inTestFile()}`, config.cache.partition_secret);
  if (config.webhooks.secret !== null) recordSecret(`webhooks.secret of a test proxy${inTestFile()}`, config.webhooks.secret);
  if (config.admin.token !== null) recordSecret(`admin.token of a test proxy${inTestFile()}`, config.admin.token);
  const app = await startApp(config, { logger, ...options });
  if (capturing()) watchForScan(app, config, () => text);
  return Object.assign(app, {
    logs: () =>
      text
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    logText: () => text,
  });
}

/** Admin paths captured at close (rendered by the admin listener's own handler, even once closed). */
const ADMIN_PATHS = ['/metrics', '/admin/tokens', '/admin/consumers', '/admin/status', '/admin/cache/stats', '/readyz', '/healthz'];

/** Registers the app's listeners and captures its logs and admin answers when it closes (or at the end of the file). */
function watchForScan(app: App, config: Config, logText: () => string): void {
  registerOrigin(app.url, 'proxy');
  registerOrigin(app.adminUrl, 'admin');
  const where = `test proxy ${app.url}${inTestFile()}`;
  const captureAll = async (): Promise<void> => {
    capture(`${where}: log`, logText());
    for (const path of ADMIN_PATHS) capture(`${where}: admin ${path}`, await renderAdmin(app.admin, path, config.admin.token));
  };
  const pending = atFileEnd(() => capture(`${where}: log (never closed)`, logText()));
  const close = app.close;
  let captured: Promise<void> | undefined;
  (app as { close: App['close'] }).close = () => {
    captured ??= close().then(async () => {
      pending.done();
      await captureAll().catch(() => undefined);
    });
    return captured;
  };
}

/** The raw HTTP answer of a server's request handler to GET `path`, without the network. */
async function renderAdmin(server: Server, path: string, token: string | null): Promise<string> {
  const listener = server.listeners('request')[0] as ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  if (listener === undefined) return '';
  const chunks: Buffer[] = [];
  const socket = new Duplex({
    read() {},
    write(chunk: Buffer, _encoding, cb) {
      chunks.push(Buffer.from(chunk));
      cb();
    },
  });
  const req = new IncomingMessage(socket as unknown as ConstructorParameters<typeof IncomingMessage>[0]);
  req.method = 'GET';
  req.url = path;
  req.headers = { host: 'localhost' }; // the admin port answers only to a loopback Host
  if (token !== null) req.headers.authorization = `Bearer ${token}`;
  req.push(null);
  const res = new ServerResponse(req);
  res.assignSocket(socket as unknown as Parameters<ServerResponse['assignSocket']>[0]);
  let timer: NodeJS.Timeout | undefined;
  const finished = new Promise<void>((resolve) => res.once('finish', () => resolve()));
  listener(req, res);
  await Promise.race([finished, new Promise<void>((resolve) => (timer = setTimeout(resolve, 2_000)))]);
  clearTimeout(timer);
  return Buffer.concat(chunks).toString('utf8');
}
