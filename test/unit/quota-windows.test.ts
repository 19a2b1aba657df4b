/**
 * /admin/quota's windows: counts by consumer x upstream x route over 5 minutes, an hour and a day,
 * in fixed memory; the rule for what went upstream and what was billable; the window query (a bad
 * one is a 400 in GitHub's shape); and `etagere quota`'s table.
 */
import { describe, expect, it } from 'vitest';
import { MAX_ROWS, createQuotaWindows, quotaReport, upstreamSpend } from '../../src/platform/metrics/quota-windows.js';
import { quotaQuery } from '../../src/paths/admin/admin-quota.js';
import { quotaPath, quotaText } from '../../src/main/cli-admin.js';

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const MIN = 60_000;

describe('quota windows', () => {
  it('ranks consumer x route rows by upstream and by billable requests', () => {
    const quota = createQuotaWindows();
    for (let i = 0; i < 3; i++) quota.record('alpha', 'github', '/repos/:owner/:repo', false, T0);
    quota.record('alpha', 'github', '/user', true, T0);
    quota.record('beta', 'github', '/repos/:owner/:repo', true, T0);
    quota.record('beta', 'github', '/repos/:owner/:repo', true, T0);
    const report = quota.report('5m', 10, T0 + 1000);
    expect(report.totals).toEqual({ upstream_requests: 6, billable_requests: 3 });
    expect(report.by_upstream_requests.map((r) => [r.consumer, r.route, r.upstream_requests, r.billable_requests])).toEqual([
      ['alpha', '/repos/:owner/:repo', 3, 0],
      ['beta', '/repos/:owner/:repo', 2, 2],
      ['alpha', '/user', 1, 1],
    ]);
    expect(report.by_billable_requests.map((r) => [r.consumer, r.route])).toEqual([
      ['beta', '/repos/:owner/:repo'],
      ['alpha', '/user'],
    ]);
    expect(quota.report('5m', 1, T0).by_upstream_requests).toHaveLength(1);
  });

  it('forgets what is older than each window', () => {
    const quota = createQuotaWindows();
    quota.record('alpha', 'github', '/user', true, T0);
    const total = (window: '5m' | '1h' | '24h', at: number) => quota.report(window, 10, at).totals.upstream_requests;
    expect([total('5m', T0 + 4 * MIN), total('1h', T0 + 4 * MIN), total('24h', T0 + 4 * MIN)]).toEqual([1, 1, 1]);
    expect([total('5m', T0 + 6 * MIN), total('1h', T0 + 6 * MIN)]).toEqual([0, 1]);
    expect([total('1h', T0 + 61 * MIN), total('24h', T0 + 61 * MIN)]).toEqual([0, 1]);
    expect(total('24h', T0 + 25 * 60 * MIN)).toBe(0);
    // A slot reused a day later starts from zero.
    quota.record('beta', 'github', '/user', true, T0 + 24 * 60 * MIN);
    expect(quota.report('24h', 10, T0 + 24 * 60 * MIN).by_upstream_requests.map((r) => r.consumer)).toEqual(['beta']);
  });

  it('bounds each bucket: past MAX_ROWS rows the rest count as one "other" row', () => {
    const quota = createQuotaWindows();
    for (let i = 0; i < MAX_ROWS * 3; i++) quota.record(`c${i}`, 'github', `/r${i}`, true, T0);
    const rows = quota.rows('5m', T0);
    expect(rows.length).toBe(MAX_ROWS);
    const other = rows.find((row) => row.consumer === 'other');
    expect(other?.upstream_requests).toBe(MAX_ROWS * 3 - (MAX_ROWS - 1));
    expect(quota.report('24h', 10, T0).totals.upstream_requests).toBe(MAX_ROWS * 3);
  });

  it('sums the rows of several processes (a cluster primary)', () => {
    const row = { consumer: 'alpha', upstream: 'github', route: '/user', upstream_requests: 2, billable_requests: 1 };
    const report = quotaReport('1h', [[row], [{ ...row, upstream_requests: 3, billable_requests: 3 }]], 5);
    expect(report.by_upstream_requests).toEqual([{ ...row, upstream_requests: 5, billable_requests: 4 }]);
    expect(report).toMatchObject({ window: '1h', window_seconds: 3600, bucket_seconds: 60 });
  });
});

describe('upstreamSpend', () => {
  it.each([
    ['hit', undefined, true, 'none'],
    ['stale', undefined, true, 'none'],
    ['coalesced', 200, true, 'none'], // another request's exchange
    ['miss', 200, true, 'billable'],
    ['miss', 200, false, 'billable'],
    ['revalidated', 304, true, 'free'], // an authorised 304 is free on GitHub
    ['revalidated', 304, false, 'billable'],
    ['bypass', 304, true, 'free'],
    ['stale', 502, true, 'billable'], // stale-if-error after a 5xx
    ['error', undefined, true, 'none'], // no answer (a network failure, a pool refusal)
    [undefined, undefined, false, 'none'],
  ] as const)('%s with upstream %s (authorised %s) is %s', (outcome, status, authorized, spend) =>
    expect(upstreamSpend(outcome, status, authorized)).toBe(spend),
  );
});

describe('quotaQuery', () => {
  it('takes 5m, 1h or 24h, 1h by default', () => {
    expect(quotaQuery('/admin/quota')).toEqual({ ok: true, window: '1h' });
    expect(quotaQuery('/admin/quota?')).toEqual({ ok: true, window: '1h' });
    expect(quotaQuery('/admin/quota?window=5m')).toEqual({ ok: true, window: '5m' });
    expect(quotaQuery('/admin/quota?window=24h')).toEqual({ ok: true, window: '24h' });
  });

  it.each([
    '/admin/quota?window=2h',
    '/admin/quota?window=',
    '/admin/quota?window=1h&window=5m',
    '/admin/quota?window=__proto__',
    '/admin/quota?window=constructor',
    '/admin/quota?top=5',
    `/admin/quota?window=${'%00'.repeat(1000)}`,
  ])('refuses %s with a 400 in GitHub shape', (url) => {
    const query = quotaQuery(url);
    expect(query.ok).toBe(false);
    if (!query.ok) {
      expect(query.status).toBe(400);
      expect(query.message).toMatch(/window|parameter/);
      expect(query.documentation_url).toMatch(/^https:\/\//);
      expect(query.message.length).toBeLessThan(200);
    }
  });
});

describe('etagere quota', () => {
  it('checks --window before asking', () => {
    expect(quotaPath(undefined)).toEqual({ path: '/admin/quota' });
    expect(quotaPath('24h')).toEqual({ path: '/admin/quota?window=24h' });
    expect(quotaPath('1d')).toEqual({ error: '--window must be one of 5m, 1h, 24h' });
  });

  it('prints the answer as a table', () => {
    const quota = createQuotaWindows();
    quota.record('alpha', 'github', '/repos/:owner/:repo', true, T0);
    quota.record('alpha', 'github', '/repos/:owner/:repo', false, T0);
    quota.record('-', 'github', '/user', true, T0);
    const text = quotaText({ consumer_label: 'key', ...quota.report('1h', 25, T0) });
    expect(text).toContain('last 1h (consumer label: key): 3 upstream requests, 2 billable');
    expect(text).toMatch(/CONSUMER\s+UPSTREAM\s+ROUTE\s+UPSTREAM REQS\s+BILLABLE/);
    expect(text).toMatch(/alpha\s+github\s+\/repos\/:owner\/:repo\s+2\s+1/);
    expect(text).toMatch(/-\s+github\s+\/user\s+1\s+1/);
    // A route or label with control characters (a hostile admin answer) shows them, escaped.
    const hostile = quotaText({ window: '1h', totals: {}, by_upstream_requests: [{ consumer: '\u001b[2J', route: '/x' }] });
    expect(hostile).not.toContain('\u001b');
    expect(hostile).toContain('\\x1b[2J');
    expect(quotaText({})).toContain('(none yet)');
  });
});
