/**
 * Webhook deliveries in tests: signed like GitHub's (or not), sent to a proxy's receiver, and the
 * fake upstream's own webhooks (its control endpoints) pointed at a proxy and waited for.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { request } from 'undici';
import type { FakeUpstream } from '../../fake-github/index.js';
import { until } from './proxy.js';

export const WEBHOOK_PATH = '/_etagere/webhooks/github';

export interface DeliveryOptions {
  /** Sign with this secret (default: the one given); null: no signature header. */
  signWith?: string | null;
  delivery?: string | null;
  contentType?: string;
  /** Extra headers (a Content-Length that lies, say). */
  headers?: Record<string, string>;
}

export interface Sent {
  status: number;
  body: string;
  delivery: string | undefined;
}

/** POSTs one delivery of `event` to `proxyUrl`'s receiver, as GitHub would. */
export async function deliver(
  proxyUrl: string,
  secret: string,
  event: string,
  payload: unknown,
  opts: DeliveryOptions = {},
): Promise<Sent> {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(JSON.stringify(payload));
  const delivery = opts.delivery === null ? undefined : (opts.delivery ?? randomUUID());
  const signWith = opts.signWith === undefined ? secret : opts.signWith;
  const headers: Record<string, string> = {
    'content-type': opts.contentType ?? 'application/json',
    'user-agent': 'GitHub-Hookshot/test',
    'x-github-event': event,
    ...(delivery === undefined ? {} : { 'x-github-delivery': delivery }),
    ...(signWith === null ? {} : { 'x-hub-signature-256': `sha256=${createHmac('sha256', signWith).update(body).digest('hex')}` }),
    ...opts.headers,
  };
  const res = await request(`${proxyUrl}${WEBHOOK_PATH}`, { method: 'POST', headers, body });
  return { status: res.statusCode, body: await res.body.text(), delivery };
}

/** Points the fake's webhooks at a proxy's receiver. */
export async function pointFakeAt(fake: FakeUpstream, proxyUrl: string, secret: string): Promise<void> {
  const res = await request(`${fake.url}/__fake/webhooks`, {
    method: 'POST',
    body: JSON.stringify({ url: `${proxyUrl}${WEBHOOK_PATH}`, secret }),
  });
  if (res.statusCode !== 200) throw new Error(`configuring the fake's webhooks: ${res.statusCode} ${await res.body.text()}`);
  await res.body.dump();
}

export interface DeliveryRecord {
  id: string;
  event: string;
  status: number | null;
  error: string | null;
  redelivery: boolean;
}

export async function fakeDeliveries(fake: FakeUpstream): Promise<DeliveryRecord[]> {
  const res = await request(`${fake.url}/__fake/webhooks`);
  return ((await res.body.json()) as { deliveries: DeliveryRecord[] }).deliveries;
}

/** Waits until the fake's deliveries `ids` have an answer (or failed); returns their records. */
export async function answered(fake: FakeUpstream, ids: readonly string[], timeoutMs = 5_000): Promise<DeliveryRecord[]> {
  let records: DeliveryRecord[] = [];
  await until(
    async () => {
      const all = await fakeDeliveries(fake);
      records = ids.map((id) => all.find((record) => record.id === id)!).filter((record) => record !== undefined);
      return records.length === ids.length && records.every((record) => record.status !== null || record.error !== null);
    },
    timeoutMs,
    `the fake's deliveries ${ids.join(', ')}`,
  );
  return records;
}

/** POST /__fake/mutate on a repository: its delivery GUIDs (none when no webhook is configured). */
export async function mutate(fake: FakeUpstream, path: string): Promise<{ stars: number; deliveries: string[] }> {
  const res = await request(`${fake.url}/__fake/mutate`, { method: 'POST', body: JSON.stringify({ path }) });
  const out = (await res.body.json()) as { changed: { stargazers_count: { to: number } }; deliveries?: string[] };
  return { stars: out.changed.stargazers_count.to, deliveries: out.deliveries ?? [] };
}

/** A raw connection POSTing to a receiver: its headers at once, then its body as the test feeds it. */
export interface RawSender {
  /** Sends the next `count` bytes of the body now. */
  send(count: number): void;
  /** Sends `count` bytes of the body every `ms` until the body is sent, the answer comes or `stop`. */
  trickle(ms: number, count?: number): void;
  stop(): void;
  /** What came back: the status (0 when none) and the time from connection to its first byte. */
  readonly answer: Promise<{ status: number; text: string; afterMs: number }>;
  /** Resolves when the proxy has closed the connection. */
  readonly closed: Promise<void>;
}

/** Opens a raw POST of `body` (announced by Content-Length) to `proxyUrl`'s receiver with `headers`; nothing of the body is sent yet. */
export function rawSender(proxyUrl: string, headers: Record<string, string>, body: Buffer): RawSender {
  const url = new URL(proxyUrl);
  const socket = connect(Number(url.port), url.hostname);
  const started = Date.now();
  let sent = 0;
  let timer: NodeJS.Timeout | undefined;
  const lines = Object.entries({ host: url.host, 'content-type': 'application/json', 'content-length': String(body.length), ...headers });
  socket.write(`POST ${WEBHOOK_PATH} HTTP/1.1\r\n${lines.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n`);
  socket.on('error', () => undefined);
  const stop = (): void => clearInterval(timer);
  let text = '';
  let firstByte: number | undefined;
  const answer = new Promise<{ status: number; text: string; afterMs: number }>((resolve) => {
    const settle = (): void => {
      stop();
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text, afterMs: (firstByte ?? Date.now()) - started });
    };
    socket.on('data', (chunk: Buffer) => {
      firstByte ??= Date.now();
      text += chunk.toString('latin1');
      if (/\r\n\r\n/.test(text) && text.length >= text.indexOf('\r\n\r\n') + 4 + Number(/content-length: (\d+)/i.exec(text)?.[1] ?? 0))
        settle();
    });
    socket.once('close', settle);
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const send = (count: number): void => {
    if (socket.writable) socket.write(body.subarray(sent, sent + count));
    sent += count;
  };
  return {
    send,
    trickle(ms, count = 1) {
      timer = setInterval(() => (sent < body.length ? send(count) : stop()), ms);
    },
    stop,
    answer,
    closed,
  };
}
