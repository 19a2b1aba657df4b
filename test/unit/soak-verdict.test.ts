import { describe, expect, it } from 'vitest';
import { metricValue, verdict, type Sample } from '../../bench/soak.js';

const MiB = 2 ** 20;
const sample = (seconds: number, rss: number, heap: number, handles: number): Sample => ({
  t: seconds,
  rssBytes: rss * MiB,
  heapBytes: heap * MiB,
  handles,
  lagP99Seconds: 0.01,
});

describe('soak verdict', () => {
  it('passes a run whose resources stay flat after the warm-up, ignoring the warm-up itself', () => {
    const samples = [
      sample(30, 60, 10, 20),
      sample(60, 120, 30, 30),
      sample(90, 124, 28, 31),
      sample(120, 121, 33, 29),
      sample(150, 126, 29, 33),
      sample(180, 123, 31, 30),
      sample(210, 125, 30, 32),
    ];
    const result = verdict(samples, 60, 0);
    expect(result.ok).toBe(true);
    expect(result.lines.join('\n')).toContain('rss: 122.0 MiB -> 124.0 MiB');
  });

  it('fails a steady growth of heap, rss or handles beyond 10 %', () => {
    const growing = [0, 1, 2, 3, 4, 5].map((i) => sample(60 + 30 * i, 100 + 10 * i, 20, 30));
    expect(verdict(growing, 60, 0).ok).toBe(false);
    const leakingHandles = [0, 1, 2, 3, 4, 5].map((i) => sample(60 + 30 * i, 100, 20, 30 + 20 * i));
    const result = verdict(leakingHandles, 60, 0);
    expect(result.ok).toBe(false);
    expect(result.lines.find((l) => l.startsWith('handles'))).toContain('GROWING');
  });

  it('fails on any client error, and on too few samples to judge', () => {
    const flat = [0, 1, 2].map((i) => sample(60 + 30 * i, 100, 20, 30));
    expect(verdict(flat, 60, 1).ok).toBe(false);
    expect(verdict(flat.slice(0, 2), 60, 0).ok).toBe(false);
  });

  it('reads a metric family from the Prometheus text, summing its series', () => {
    const text = [
      '# HELP etagere_nodejs_active_handles Number of active libuv handles grouped by handle type.',
      'etagere_nodejs_active_handles{type="Socket"} 12',
      'etagere_nodejs_active_handles{type="Timer"} 3',
      'etagere_nodejs_active_handles_total 99',
      'etagere_process_resident_memory_bytes 123456',
    ].join('\n');
    expect(metricValue(text, 'etagere_nodejs_active_handles')).toBe(15);
    expect(metricValue(text, 'etagere_process_resident_memory_bytes')).toBe(123456);
    expect(metricValue(text, 'etagere_missing')).toBeNaN();
  });
});
