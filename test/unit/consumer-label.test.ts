/**
 * metrics.consumer_label: the first product token of a User-Agent, sanitised, and a bounded set of
 * labels however many User-Agents a client cycles through.
 */
import { describe, expect, it } from 'vitest';
import { MAX_AGENT_LABELS, consumerLabelMode, createConsumerLabels, productToken } from '../../src/platform/metrics/consumer-label.js';

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
    const labels = createConsumerLabels('user_agent');
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
    const first = createConsumerLabels('user_agent', 1);
    expect(first.of(undefined, 'a/1')).toBe('a');
    expect(first.of(undefined, 'b/1')).toBe('other');
    expect(createConsumerLabels('user_agent', 1).of(undefined, 'b/1')).toBe('b');
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
