/**
 * metrics.consumer_label: the first product token of a User-Agent, sanitised, and a bounded set of
 * labels however many User-Agents a client cycles through, held by the busiest agents of the last
 * hour (re-ranked each minute: one-shot agents age out). On an injected clock.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import {
  MAX_AGENT_LABELS,
  RANK_MINUTES,
  consumerLabelMode,
  createConsumerLabels,
  productToken,
} from '../../src/platform/metrics/labels.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { AccessLog, createLogger } from '../../src/platform/log/logger.js';
import { Recorder, Trace } from '../../src/main/recorder.js';
import type { UpstreamRuntime } from '../../src/paths/upstreams.js';
import type { RequestContext } from '../../src/paths/context.js';

/** A clock the test moves: the start of a minute, so that a whole minute passes before the next rank. */
function clock() {
  let at = Math.floor(1_900_000_000_000 / 60_000) * 60_000;
  return {
    now: () => at,
    advance: (ms: number) => {
      at += ms;
    },
  };
}

describe('productToken', () => {
  it.each([
    ['alpha-bot/1.2 (linux)', 'alpha-bot'],
    ['alpha-bot', 'alpha-bot'],
    ['  Mozilla/5.0 (X11; Linux x86_64)', 'Mozilla'],
    ['curl/8.5.0', 'curl'],
    ['octokit-rest.js/20.0.2 octokit-core.js/5.0.1', 'octokit-rest.js'],
    ['GitHub-Hookshot/abc', 'GitHub-Hookshot'],
    ['my bot/1', 'my'],
    ['bot;v=1', 'bot'],
    ['ev"il{x="1"}/2', 'evilx1'], // only letters, digits, ".", "_" and "-" are kept
    ['<script>', 'script'],
    ['\u00e9t\u00e9/1', 't'],
  ])('%j is %j', (agent, label) => expect(productToken(agent)).toBe(label));

  it('caps the length at 40 characters', () => {
    expect(productToken(`${'a'.repeat(100)}/1`)).toBe('a'.repeat(40));
  });

  it.each([[undefined], [''], ['   '], ['/1.0'], ['(compatible)'], ['-dash/1'], ['___'], ['\u00e9\u00e9/1']])(
    'garbage %j is "unknown"',
    (agent) => expect(productToken(agent)).toBe('unknown'),
  );

  it('reads only the head of a huge header', () => {
    expect(productToken(`${' '.repeat(200)}late/1`)).toBe('unknown');
    expect(productToken(`ok/${'x'.repeat(100_000)}`)).toBe('ok');
  });
});

describe('createConsumerLabels', () => {
  it('key: the consumer key name, nothing for requests without one', () => {
    const labels = createConsumerLabels('key');
    expect(labels.of('web', 'alpha-bot/1')).toBe('web');
    expect(labels.of(undefined, 'alpha-bot/1')).toBeUndefined();
  });

  it('user_agent: the product token, whatever key the request carries (a label grants nothing)', () => {
    const labels = createConsumerLabels('user_agent');
    expect(labels.of('web', 'alpha-bot/1.2 (linux)')).toBe('alpha-bot');
    expect(labels.of(undefined, 'alpha-bot/2')).toBe('alpha-bot');
    expect(labels.of(undefined, undefined)).toBe('unknown');
  });

  it('none: no label', () => {
    expect(createConsumerLabels('none').of('web', 'alpha-bot/1')).toBeUndefined();
  });

  it('a client cycling thousands of User-Agents gets at most 50 labels, then "other"', () => {
    const labels = createConsumerLabels('user_agent', MAX_AGENT_LABELS, clock().now);
    const seen = new Set<string>();
    for (let i = 0; i < 5000; i++) seen.add(labels.of(undefined, `bot${i}/1.0 (rotating)`)!);
    expect(labels.agents).toBe(MAX_AGENT_LABELS);
    expect(seen.size).toBe(MAX_AGENT_LABELS + 1);
    expect(seen.has('other')).toBe(true);
    // The first ones keep their label; garbage stays "unknown" past the bound.
    expect(labels.of(undefined, 'bot0/9')).toBe('bot0');
    expect(labels.of(undefined, 'bot4999/9')).toBe('other');
    expect(labels.of(undefined, '')).toBe('unknown');
    expect(labels.agents).toBe(MAX_AGENT_LABELS);
  });

  it('each instance counts its own labels (no module state)', () => {
    const time = clock();
    const first = createConsumerLabels('user_agent', 1, time.now);
    expect(first.of(undefined, 'a/1')).toBe('a');
    expect(first.of(undefined, 'b/1')).toBe('other');
    expect(createConsumerLabels('user_agent', 1, time.now).of(undefined, 'b/1')).toBe('b');
  });

  it('one-shot agents age out: a client sending steadily after 50 of them gets its label within a minute', () => {
    const time = clock();
    const labels = createConsumerLabels('user_agent', MAX_AGENT_LABELS, time.now);
    for (let i = 0; i < 50; i++) expect(labels.of(undefined, `squatter${i}/1`)).toBe(`squatter${i}`);
    // A real client, once a second: "other" while every label is held, its own within a minute.
    let second = 0;
    for (; second < 60 && labels.of(undefined, 'octokit-rest.js/20.0.2') === 'other'; second++) time.advance(1_000);
    expect(second).toBeLessThanOrEqual(60);
    expect(labels.of(undefined, 'octokit-rest.js/20.0.2')).toBe('octokit-rest.js');
    expect(labels.agents).toBe(MAX_AGENT_LABELS);
    expect(labels.retired()).toHaveLength(1); // one squatter gave its label up
    // A second steady client too, and the first keeps its label.
    for (let i = 0; i < 61; i++, time.advance(1_000)) labels.of(undefined, 'renovate/37');
    expect(labels.of(undefined, 'renovate/37')).toBe('renovate');
    expect(labels.of(undefined, 'octokit-rest.js/20')).toBe('octokit-rest.js');
  });

  it('labels go to the busiest agents of the last hour, ties kept by their holder; an agent silent for an hour gives its label up', () => {
    const time = clock();
    const labels = createConsumerLabels('user_agent', 2, time.now);
    expect(labels.of(undefined, 'a/1')).toBe('a');
    expect(labels.of(undefined, 'b/1')).toBe('b');
    expect(labels.of(undefined, 'c/1')).toBe('other');
    time.advance(60_000);
    expect(labels.of(undefined, 'c/1')).toBe('other'); // as many requests as a and b over the hour: they keep theirs
    expect(labels.generation).toBe(0);
    time.advance(60_000);
    expect(labels.of(undefined, 'c/1')).toBe('c'); // two requests against b's one
    expect(labels.generation).toBe(1);
    expect(labels.retired()).toEqual(['b']);
    expect(labels.retired()).toEqual([]);
    // Only a keeps sending: c's label goes once its requests are an hour old, and the room is first come again.
    let minutes = 0;
    while (labels.generation === 1 && minutes <= RANK_MINUTES + 1) {
      time.advance(60_000);
      minutes++;
      expect(labels.of(undefined, 'a/1')).toBe('a');
    }
    expect(minutes).toBe(RANK_MINUTES);
    expect(labels.retired()).toEqual(['c']);
    expect(labels.of(undefined, 'd/1')).toBe('d');
    expect(labels.of(undefined, 'b/1')).toBe('other');
  });

  it('hostile: a flood of 3,000 one-shot agents a minute holds at most 50 labels; a client sending once a second still gets its own', () => {
    const time = clock();
    const labels = createConsumerLabels('user_agent', MAX_AGENT_LABELS, time.now);
    const started = performance.now();
    let steady: string | undefined;
    for (let second = 0; second < 180; second++) {
      // 50 new agents each second (3,000 a minute, each sent once), then the steady client's request.
      for (let i = 0; i < 50; i++) labels.of(undefined, `flood-${second}-${i}/1`);
      steady = labels.of(undefined, 'steady-bot/1');
      if (second === 120) expect(steady).toBe('steady-bot'); // within a minute of the first rank
      time.advance(1_000);
    }
    expect(steady).toBe('steady-bot');
    expect(labels.agents).toBeLessThanOrEqual(MAX_AGENT_LABELS);
    expect(performance.now() - started).toBeLessThan(2_000); // 9,180 requests: the cost per request stays small
  });

  it('a label given up takes its series out of /metrics (the label set stays bounded), and counts again if it comes back', async () => {
    const time = clock();
    const metrics = createMetrics({ defaultMetrics: false });
    const labels = createConsumerLabels('user_agent', 1, time.now);
    const recorder = new Recorder(metrics, new AccessLog(createLogger({ level: 'silent' })), labels, { access: 'all', access_ratio: 0.01 });
    const upstream = { cfg: { name: 'github', prefix: '/' }, routes: { match: () => '/users/:user' } } as unknown as UpstreamRuntime;
    const send = (agent: string): void => {
      const ctx = { upstream, cred: { kind: 'anonymous' }, pathname: '/users/x' } as unknown as RequestContext;
      const trace = new Trace(agent, undefined);
      trace.routed(upstream, '/users/x');
      trace.ctx = ctx;
      trace.served = { outcome: 'hit', upstreamStatus: undefined, token: undefined };
      const req = { method: 'GET', url: '/users/x' } as IncomingMessage;
      const res = { statusCode: 200, writableFinished: true } as ServerResponse;
      recorder.record(req, res, 'id', trace, performance.now(), 2);
    };
    send('squatter/1');
    expect(await metrics.registry.metrics()).toContain('etagere_consumer_requests_total{consumer="squatter",route="/users/:user"} 1');
    time.advance(60_000);
    send('steady/1');
    send('steady/1');
    time.advance(60_000);
    send('steady/1');
    const text = await metrics.registry.metrics();
    expect(text).toContain('etagere_consumer_requests_total{consumer="steady",route="/users/:user"} 1');
    expect(text).not.toContain('consumer="squatter"');
    expect(text).toContain('consumer="other"');
  });
});

describe('consumerLabelMode', () => {
  it('defaults to key with consumer keys on, none otherwise; a configured mode wins', () => {
    expect(consumerLabelMode(undefined, true)).toBe('key');
    expect(consumerLabelMode(undefined, false)).toBe('none');
    expect(consumerLabelMode('user_agent', true)).toBe('user_agent');
    expect(consumerLabelMode('none', true)).toBe('none');
  });
});
