/**
 * GET /admin/quota?window=5m|1h|24h (default 1h): who spent the upstream quota on what, the busiest
 * consumer x route rows by upstream requests and by billable ones (src/platform/metrics/quota-windows.ts).
 * The window is the only input: anything else in it is a 400 in GitHub's error shape.
 */
import { DOCUMENTATION_URL } from '../../http/errors.js';
import type { ConsumerLabelMode } from '../../platform/metrics/labels.js';
import {
  DEFAULT_QUOTA_WINDOW,
  QUOTA_WINDOWS,
  isQuotaWindow,
  type QuotaReport,
  type QuotaWindow,
} from '../../platform/metrics/quota-windows.js';

/** Rows in each ranking of /admin/quota; the status page shows the first STATUS_TOP. */
export const QUOTA_TOP = 25;
export const STATUS_TOP = 10;

export type QuotaAnswer = QuotaReport & { consumer_label: ConsumerLabelMode };

export type QuotaQuery = { ok: true; window: QuotaWindow } | { ok: false; status: 400; message: string; documentation_url: string };

const bad = (message: string): QuotaQuery => ({ ok: false, status: 400, message, documentation_url: DOCUMENTATION_URL });

/** The window a request's query asks for (`url` as the request line gives it). */
export function quotaQuery(url: string): QuotaQuery {
  const mark = url.indexOf('?');
  if (mark < 0) return { ok: true, window: DEFAULT_QUOTA_WINDOW };
  const params = new URLSearchParams(url.slice(mark + 1));
  const windows = params.getAll('window');
  const names = Object.keys(QUOTA_WINDOWS).join(', ');
  for (const key of params.keys()) if (key !== 'window') return bad(`Unknown parameter: /admin/quota takes window (${names})`);
  if (windows.length === 0) return { ok: true, window: DEFAULT_QUOTA_WINDOW };
  const window = windows[0]!;
  if (windows.length > 1 || !isQuotaWindow(window)) return bad(`window must be one of ${names}`);
  return { ok: true, window };
}
