/**
 * The operator status page served at GET / on the admin port: one self-contained HTML document
 * (no external assets) that polls /admin/status every 2 s and shows each pool token's remaining
 * quota against its limit, its state, reset countdown and reported OAuth scopes (with a notice when
 * they differ: one cache partition per token then); the hit ratio and quota saved over the
 * last minutes; each consumer's figures and share (consumer keys on); the consumer x route rows
 * that sent the most requests upstream in the last hour (/admin/quota); and Redis and upstream health. Token names only: the JSON never holds a value,
 * and every string is put in the page with textContent. With admin.token the page asks for it and
 * sends it as `Authorization: Bearer` (kept in the tab's sessionStorage only).
 */
export const STATUS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>etagere status</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d2330; background: #f6f7f9; }
  h1 { font-size: 1.3rem; margin: 0 0 1rem; }
  h2 { font-size: 1rem; margin: 1.5rem 0 .5rem; }
  .tiles { display: flex; gap: .75rem; flex-wrap: wrap; }
  .tile { background: #fff; border: 1px solid #d8dce3; border-radius: 6px; padding: .6rem .9rem; min-width: 9rem; }
  .tile b { display: block; font-size: 1.4rem; }
  table { border-collapse: collapse; background: #fff; border: 1px solid #d8dce3; min-width: 40rem; }
  th, td { text-align: left; padding: .35rem .7rem; border-bottom: 1px solid #eceef2; }
  .bar { width: 14rem; height: .8rem; background: #eceef2; border-radius: 3px; overflow: hidden; }
  .bar > span { display: block; height: 100%; background: #2f8f4e; }
  .state-exhausted .bar > span, .state-paused .bar > span { background: #c9831b; }
  .state-dead .bar > span { background: #b3261e; }
  .ok { color: #2f8f4e; } .bad { color: #b3261e; } .muted { color: #6b7280; }
</style>
</head>
<body>
<h1>etagere <span class="muted" id="updated"></span></h1>
<form id="login" hidden><label>admin token <input id="token" type="password" autocomplete="off"></label> <button>show</button></form>
<div class="tiles">
  <div class="tile">hit ratio <b id="hit-ratio">-</b><span class="muted" id="window"></span></div>
  <div class="tile">quota saved <b id="quota-saved">-</b><span class="muted">requests that spent none</span></div>
  <div class="tile">requests <b id="requests">-</b><span class="muted" id="requests-window"></span></div>
  <div class="tile">Redis <b id="redis">-</b></div>
  <div class="tile">token budget <b id="budget">-</b></div>
</div>
<h2>Tokens</h2>
<p class="bad" id="scopes-differ" hidden></p>
<table id="tokens">
  <thead><tr><th>token</th><th>core remaining / limit</th><th></th><th>state</th><th>resets in</th><th>in flight</th><th>last error</th><th>other resources</th><th>scopes</th></tr></thead>
  <tbody></tbody>
</table>
<p class="muted" id="no-pool" hidden>No token pool is configured.</p>
<h2 id="consumers-title" hidden>Consumers</h2>
<table id="consumers" hidden>
  <thead><tr><th>consumer</th><th>weight</th><th>requests</th><th>hits</th><th>upstream</th><th>quota spent</th><th>core this window / share (reserve)</th><th>in flight</th><th>refused</th></tr></thead>
  <tbody></tbody>
</table>
<h2>Quota spent <span class="muted">last hour, top 10 (GET /admin/quota)</span></h2>
<table id="quota">
  <thead><tr><th>consumer</th><th>upstream</th><th>route</th><th>upstream requests</th><th>billable</th></tr></thead>
  <tbody></tbody>
</table>
<p class="muted" id="no-quota" hidden>No request went upstream in the last hour.</p>
<h2>Upstreams</h2>
<table id="upstreams">
  <thead><tr><th>upstream</th><th>requests</th><th>errors (5xx, failures)</th><th>last status</th></tr></thead>
  <tbody></tbody>
</table>
<script>
'use strict';
let last = null;
const $ = (id) => document.getElementById(id);
// With admin.token the page's data needs it: asked once, kept for this tab only.
let token = sessionStorage.getItem('etagere-admin-token') || '';
$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  token = $('token').value.trim();
  sessionStorage.setItem('etagere-admin-token', token);
  refresh();
});
function cell(tr, text, cls) { const td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td); return td; }
function countdown(reset) {
  if (reset === null) return '-';
  const s = Math.max(0, Math.round(reset - Date.now() / 1000));
  return s >= 3600 ? Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm' : s >= 60 ? Math.floor(s / 60) + 'm ' + (s % 60) + 's' : s + 's';
}
function render(st) {
  $('updated').textContent = 'updated ' + new Date(st.time).toLocaleTimeString();
  const r = st.recent;
  $('hit-ratio').textContent = r.hitRatio === null ? '-' : (r.hitRatio * 100).toFixed(1) + ' %';
  $('window').textContent = 'last ' + Math.round(r.windowSeconds / 60) + ' min';
  $('requests-window').textContent = 'last ' + Math.round(r.windowSeconds / 60) + ' min';
  $('quota-saved').textContent = String(r.saved);
  $('requests').textContent = String(r.requests);
  $('redis').textContent = !st.redis.configured ? 'not used' : st.redis.up ? 'up' : 'down';
  $('redis').className = !st.redis.configured ? 'muted' : st.redis.up ? 'ok' : 'bad';
  $('budget').textContent = st.budget === null ? '-' : st.budget + (st.replicas > 1 ? ' (' + st.replicas + ' replicas)' : '');
  const body = document.querySelector('#tokens tbody');
  body.textContent = '';
  $('no-pool').hidden = st.tokens.length > 0;
  $('tokens').hidden = st.tokens.length === 0;
  for (const t of st.tokens) {
    const tr = document.createElement('tr');
    tr.dataset.token = t.name;
    tr.className = 'state-' + t.state;
    cell(tr, t.name);
    // During a Redis outage, the part this replica may spend alone is shown beside the upstream's numbers.
    const alone = t.local_allowance === null || t.local_allowance === undefined ? '' : ' (this replica alone: ' + t.local_allowance + ')';
    cell(tr, t.unlimited ? 'unlimited' : t.remaining === null ? 'unknown' : t.remaining + ' / ' + t.limit + alone);
    const td = cell(tr, '');
    const bar = document.createElement('div'); bar.className = 'bar';
    const fill = document.createElement('span');
    fill.style.width = t.unlimited ? '100%' : t.limit ? Math.round((100 * (t.remaining || 0)) / t.limit) + '%' : '0%';
    bar.appendChild(fill); td.appendChild(bar);
    cell(tr, t.state, t.state === 'ok' ? 'ok' : t.state === 'unknown' ? 'muted' : 'bad');
    cell(tr, t.paused_until ? 'paused ' + countdown(Date.parse(t.paused_until) / 1000) : countdown(t.reset));
    cell(tr, String(t.in_flight));
    cell(tr, t.last_error || '', 'muted');
    // The other resources' windows, in a column of their own (the first columns are core's).
    const others = ['search', 'code_search', 'graphql'].filter((n) => t.resources && t.resources[n]);
    cell(tr, others.map((n) => n + ' ' + t.resources[n].remaining + ' / ' + t.resources[n].limit).join(' · '), 'muted');
    cell(tr, t.scopes ? t.scopes.join(', ') || '(none)' : t.scopes_from === 'not-sent' ? 'not reported' : '-', 'muted');
    body.appendChild(tr);
  }
  renderEquivalence(st.equivalence);
  renderConsumers(st.consumers || []);
  renderQuota(st.quota ? st.quota.by_upstream_requests : []);
  const ub = document.querySelector('#upstreams tbody');
  ub.textContent = '';
  for (const u of r.upstreams) {
    const tr = document.createElement('tr');
    tr.dataset.upstream = u.name;
    cell(tr, u.name);
    cell(tr, String(u.requests));
    cell(tr, String(u.errors), u.errors > 0 ? 'bad' : 'ok');
    cell(tr, u.lastStatus === null ? '-' : String(u.lastStatus), u.lastStatus === 'error' || u.lastStatus >= 500 ? 'bad' : '');
    ub.appendChild(tr);
  }
}
function renderEquivalence(eq) {
  const p = $('scopes-differ');
  p.hidden = !eq || !eq.scopes_differ;
  if (p.hidden) return;
  const groups = eq.scope_groups.map((g) => g.tokens.join(', ') + ': ' + (g.scopes.join(', ') || '(none)')).join('; ');
  p.textContent = 'The tokens report different OAuth scopes (' + groups + ')' +
    (eq.equivalent_configured ? ': pool.equivalent does not hold, each token has its own cache partition.' : '.');
}
function renderConsumers(list) {
  $('consumers').hidden = list.length === 0;
  $('consumers-title').hidden = list.length === 0;
  const body = document.querySelector('#consumers tbody');
  body.textContent = '';
  for (const c of list) {
    const tr = document.createElement('tr');
    tr.dataset.consumer = c.name;
    cell(tr, c.name);
    cell(tr, c.weight === undefined ? '-' : String(c.weight));
    cell(tr, String(c.requests));
    cell(tr, String(c.hits));
    cell(tr, String(c.upstream_requests));
    cell(tr, String(c.quota_spent));
    const core = c.resources && c.resources.core;
    cell(tr, core ? core.spent + ' / ' + Math.floor(core.share) + ' (' + Math.floor(core.reserve) + ')' : '-');
    cell(tr, c.in_flight === undefined ? '-' : String(c.in_flight));
    const refused = Object.entries(c.refused || {}).map((e) => e[0] + ' ' + e[1]).join(', ');
    cell(tr, refused || '0', refused ? 'bad' : 'muted');
    body.appendChild(tr);
  }
}
function renderQuota(rows) {
  $('quota').hidden = rows.length === 0;
  $('no-quota').hidden = rows.length > 0;
  const body = document.querySelector('#quota tbody');
  body.textContent = '';
  for (const q of rows) {
    const tr = document.createElement('tr');
    tr.dataset.consumer = q.consumer;
    tr.dataset.route = q.route;
    cell(tr, q.consumer, q.consumer === '-' ? 'muted' : '');
    cell(tr, q.upstream);
    cell(tr, q.route);
    cell(tr, String(q.upstream_requests));
    cell(tr, String(q.billable_requests));
    body.appendChild(tr);
  }
}
// The poll and a submitted token can overlap: an answer older than the one shown is dropped.
let sent = 0;
let shown = 0;
async function refresh() {
  const mine = ++sent;
  try {
    const res = await fetch('/admin/status', { cache: 'no-store', headers: token ? { authorization: 'Bearer ' + token } : {} });
    const st = res.status === 401 ? undefined : await res.json();
    if (mine < shown) return;
    shown = mine;
    $('login').hidden = res.status !== 401;
    if (st === undefined) {
      $('updated').textContent = token ? 'wrong admin token' : 'the admin port needs its token (admin.token)';
      return;
    }
    last = st;
    render(last);
  } catch (err) {
    if (mine < shown) return;
    $('updated').textContent = 'status unavailable: ' + err;
  }
}
refresh();
setInterval(refresh, 2000);
setInterval(() => { if (last) render(last); }, 1000);
</script>
</body>
</html>
`;
