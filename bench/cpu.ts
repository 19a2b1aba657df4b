/**
 * CPU accounting of the whole machine, to tell when a measurement was disturbed: how busy the
 * CPUs were before a run, and how much time the hypervisor stole from this VM during a run.
 */
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

export interface CpuSnapshot {
  readonly busy: number;
  readonly total: number;
  /** Time stolen by the hypervisor (Linux /proc/stat); undefined where unknown. */
  readonly steal: number | undefined;
}

function fromProcStat(): CpuSnapshot | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    // cpu  user nice system idle iowait irq softirq steal guest guest_nice
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    if (f[0] === undefined || f.length < 8 || f.some((n) => !Number.isFinite(n))) return undefined;
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
    const busy = user + nice + system + irq + softirq;
    return { busy, total: busy + idle + iowait + steal, steal };
  } catch {
    return undefined;
  }
}

function fromOs(): CpuSnapshot {
  let busy = 0;
  let total = 0;
  for (const c of cpus()) {
    const t = c.times.user + c.times.nice + c.times.sys + c.times.irq;
    busy += t;
    total += t + c.times.idle;
  }
  return { busy, total, steal: undefined };
}

export function cpuSnapshot(): CpuSnapshot {
  return fromProcStat() ?? fromOs();
}

/** Share of CPU time that was busy between two snapshots. */
export function busyShare(a: CpuSnapshot, b: CpuSnapshot): number {
  const total = b.total - a.total;
  return total > 0 ? (b.busy - a.busy) / total : 0;
}

/** Share of CPU time stolen by the hypervisor between two snapshots (undefined where unknown). */
export function stealShare(a: CpuSnapshot, b: CpuSnapshot): number | undefined {
  if (a.steal === undefined || b.steal === undefined) return undefined;
  const total = b.total - a.total;
  return total > 0 ? (b.steal - a.steal) / total : 0;
}

/** Share of CPU time spent busy over `ms` milliseconds. */
export async function busyOver(ms: number): Promise<number> {
  const a = cpuSnapshot();
  await sleep(ms);
  return busyShare(a, cpuSnapshot());
}
