/**
 * `etagere purge`, `etagere cache inspect|stats` and `etagere quota`: calls to a running proxy's
 * admin port (src/paths/admin/admin-cache.ts, admin-quota.ts), and their answers as text for a
 * terminal (`--json`: as JSON). The address is `--admin URL`, else the config's admin.host and
 * admin.port (the same file and ADMIN_HOST/ADMIN_PORT `etagere serve` reads; 0.0.0.0 and :: mean
 * this machine). The admin token goes as `Authorization: Bearer`: ETAGERE_ADMIN_TOKEN, else the
 * config's admin.token, as `etagere serve` reads them.
 */
import { request } from 'undici';
import type { Config } from '../platform/config/schema.js';
import { QUOTA_WINDOWS, isQuotaWindow } from '../platform/metrics/quota-windows.js';

export interface AdminAnswer {
  status: number;
  body: string;
}

/** Where a command calls: the admin port's URL, and the token it sends (null: none). */
export interface AdminTarget {
  readonly url: string;
  readonly token: string | null;
}

/** The admin port's URL from a config. */
export function adminUrlOf(config: Pick<Config, 'admin'>): string {
  const { host, port } = config.admin;
  const reachable = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`;
}

/** No proxy answered at the admin address (refused, timed out, not HTTP). */
export class AdminUnreachable extends Error {
  override name = 'AdminUnreachable';
}

/** One call; a connection failure throws AdminUnreachable, naming the address and what to do. */
export async function adminCall(target: AdminTarget, method: 'GET' | 'POST', path: string, body?: unknown): Promise<AdminAnswer> {
  const url = new URL(path, target.url);
  const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
  if (target.token !== null) headers.authorization = `Bearer ${target.token}`;
  try {
    const res = await request(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    return { status: res.statusCode, body: await res.body.text() };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const why = typeof code === 'string' ? code : (err as Error).message.split('\n')[0]!;
    throw new AdminUnreachable(`no proxy answers at ${url.origin} (${why}): start one, or give its admin port with --admin URL`);
  }
}

/** The JSON of an answer, indented for a terminal (the text as it came when it is not JSON). */
export function pretty(answer: AdminAnswer): string {
  try {
    return `${JSON.stringify(JSON.parse(answer.body), null, 2)}\n`;
  } catch {
    return `${answer.body}\n`;
  }
}

/** Control characters (a terminal's escape sequences among them) of text a proxy sent, made visible. */
function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

/** The one-line message of an answer other than 2xx: its JSON "message", else its first line. */
export function answerError(answer: AdminAnswer): string {
  let message: unknown;
  try {
    message = (JSON.parse(answer.body) as { message?: unknown }).message;
  } catch {
    message = undefined;
  }
  const text = typeof message === 'string' ? message : answer.body.split('\n')[0]!.slice(0, 200);
  const hint = answer.status === 401 ? " (set ETAGERE_ADMIN_TOKEN to the admin port's admin.token)" : '';
  return `the admin port answered ${answer.status}: ${printable(text)}${hint}`;
}

/** Rows under a header, each column as wide as its widest cell; numbers aligned right. */
export function table(header: readonly string[], rows: ReadonlyArray<readonly unknown[]>): string {
  const cells = [
    header.map(String),
    ...rows.map((row) => row.map((cell) => printable(cell === null || cell === undefined ? '-' : String(cell)))),
  ];
  const widths = header.map((_, column) => Math.max(...cells.map((row) => (row[column] ?? '').length)));
  const numeric = header.map((_, column) => rows.length > 0 && rows.every((row) => typeof row[column] === 'number'));
  return cells
    .map((row) =>
      row
        .map((cell, column) => (numeric[column] ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

type Json = Record<string, unknown>;
const asList = (value: unknown): Json[] => (Array.isArray(value) ? (value as Json[]) : []);
const plural = (count: unknown, word: string, words = `${word}s`): string => `${String(count)} ${count === 1 ? word : words}`;

function bytes(value: unknown): string {
  const count = Number(value);
  if (!Number.isFinite(count)) return String(value);
  if (count < 1024) return `${count} B`;
  return count < 1024 * 1024 ? `${(count / 1024).toFixed(1)} KiB` : `${(count / 1024 / 1024).toFixed(1)} MiB`;
}

/** POST /admin/purge's answer: what was marked, where. */
export function purgeText(value: Json): string {
  if (typeof value.tag === 'string') {
    const workers = value.workers === undefined ? '' : ` (${plural(value.workers, 'worker')})`;
    return `${printable(`dropped ${plural(value.purged, 'entry', 'entries')} filed under ${value.tag}; purge sent to ${String(value.replicas)}${workers}`)}\n`;
  }
  const scope = typeof value.prefix === 'string' ? `prefix ${String(value.prefix)}` : `path ${String(value.path)}`;
  const upstreams = Array.isArray(value.upstreams) ? value.upstreams.map(String).join(', ') : '?';
  const workers = value.workers === undefined ? '' : ` (${plural(value.workers, 'worker')})`;
  return (
    printable(
      `marked ${plural(value.marked, 'entry', 'entries')} stale under ${scope}, upstreams ${upstreams}; purge sent to ${String(value.replicas)}${workers}`,
    ) + '\n'
  );
}

/** GET /admin/cache's answer: one row per entry, then the stored bodies asked for. */
export function inspectText(value: Json): string {
  const entries = asList(value.entries);
  if (entries.length === 0) return `no entry for ${printable(String(value.path))}\n${printable(String(value.note ?? ''))}\n`;
  const rows = entries.map((entry) => [
    entry.upstream,
    `${String(entry.path)}${typeof entry.query === 'string' && entry.query !== '' ? `?${entry.query}` : ''}`,
    entry.pool_token === undefined ? entry.partition : `${String(entry.partition)} (${String(entry.pool_token)})`,
    entry.status,
    entry.age,
    entry.ttl,
    entry.size,
    entry.etag,
    entry.accept,
    entry.fetched_by,
  ]);
  let out = `${table(['UPSTREAM', 'PATH', 'PARTITION', 'STATUS', 'AGE', 'TTL', 'SIZE', 'ETAG', 'ACCEPT', 'FETCHED BY'], rows)}\n`;
  out += `${printable(String(value.note ?? ''))}\n`;
  entries.forEach((entry, index) => {
    if (entry.body === undefined && entry.body_withheld === undefined) return;
    out += `\n--- entry ${index + 1} body${entry.body_encoding === 'base64' ? ' (base64)' : ''}\n`;
    const body = typeof entry.body === 'string' ? entry.body : `(${String(entry.body_withheld ?? 'not stored')})`;
    // A body is the upstream's text: its line breaks and tabs stay, other control characters show.
    out += `${body
      .split('\n')
      .map((line) => printable(line.replace(/\t/g, '    ')))
      .join('\n')}\n`;
  });
  return out;
}

/** GET /admin/cache?graphql=KEY's answer: the entry (one per worker holding it) and its tags. */
export function graphqlText(value: Json): string {
  const entries = asList(value.entries);
  if (entries.length === 0) return `no GraphQL answer under ${printable(String(value.key))}\n`;
  const rows = entries.map((entry) => [
    entry.upstream,
    entry.operation,
    entry.partition,
    entry.tier,
    entry.status,
    entry.age,
    entry.ttl,
    entry.size,
    entry.fetched_by,
  ]);
  let out = `${table(['UPSTREAM', 'OPERATION', 'PARTITION', 'TIER', 'STATUS', 'AGE', 'TTL', 'SIZE', 'FETCHED BY'], rows)}\n`;
  const tags = Array.isArray(entries[0]!.tags) ? entries[0]!.tags.map(String) : [];
  out +=
    tags.length === 0 ? 'tags: none (purged by nothing but its TTL)\n' : `tags:\n${tags.map((tag) => `  ${printable(tag)}`).join('\n')}\n`;
  return out;
}

/** One titled ranking of an admin answer: its table, or "(none yet)". */
function ranking(title: string, columns: string[], rows: unknown[][]): string {
  return `\n${title}\n${rows.length === 0 ? '(none yet)' : table(columns, rows)}\n`;
}

/** GET /admin/cache/stats's answer: the totals, then the two rankings. */
export function statsText(value: Json): string {
  const workers = value.workers === undefined ? '' : `, over ${plural(value.workers, 'worker')}`;
  let out = `${plural(value.entries, 'entry', 'entries')} in L1, ${bytes(value.bytes)}, ${plural(value.marked_scopes, 'marked scope')}${workers}\n`;
  const columns = ['HITS', 'UPSTREAM REQS', 'QUOTA SPENT', 'UPSTREAM', 'PATH'];
  const row = (entry: Json): unknown[] => [entry.hits, entry.upstream_requests, entry.quota_spent, entry.upstream, entry.path];
  out += ranking('busiest paths by hits', columns, asList(value.top_by_hits).map(row));
  out += ranking('busiest paths by upstream requests', columns, asList(value.top_by_upstream).map(row));
  return out;
}

/** The admin path of `etagere quota --window W`, or why W is not a window. */
export function quotaPath(window: string | undefined): { path: string } | { error: string } {
  if (window === undefined) return { path: '/admin/quota' };
  if (!isQuotaWindow(window)) return { error: `--window must be one of ${Object.keys(QUOTA_WINDOWS).join(', ')}` };
  return { path: `/admin/quota?window=${window}` };
}

/** GET /admin/quota's answer: its totals, then the busiest consumer x route rows by upstream and by billable requests. */
export function quotaText(value: Json): string {
  const totals = (value.totals ?? {}) as Json;
  const head = `last ${String(value.window)} (consumer label: ${String(value.consumer_label)}): `;
  let out = `${printable(`${head}${plural(totals.upstream_requests, 'upstream request')}, ${String(totals.billable_requests)} billable`)}\n`;
  const columns = ['CONSUMER', 'UPSTREAM', 'ROUTE', 'UPSTREAM REQS', 'BILLABLE'];
  const row = (entry: Json): unknown[] => [entry.consumer, entry.upstream, entry.route, entry.upstream_requests, entry.billable_requests];
  out += ranking('by upstream requests', columns, asList(value.by_upstream_requests).map(row));
  out += ranking('by billable requests', columns, asList(value.by_billable_requests).map(row));
  return out;
}
