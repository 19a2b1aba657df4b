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
    const fields = line.trim().split(/\s+/).slice(1).map(Number);
    if (fields[0] === undefined || fields.length < 8 || fields.some((n) => !Number.isFinite(n))) return undefined;
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
    const busy = user + nice + system + irq + softirq;
    return { busy, total: busy + idle + iowait + steal, steal };
  } catch {
    return undefined;
  }
}

function fromOs(): CpuSnapshot {
  let busy = 0;
  let total = 0;
  for (const cpu of cpus()) {
    const cpuBusy = cpu.times.user + cpu.times.nice + cpu.times.sys + cpu.times.irq;
    busy += cpuBusy;
    total += cpuBusy + cpu.times.idle;
  }
  return { busy, total, steal: undefined };
}

export function cpuSnapshot(): CpuSnapshot {
  return fromProcStat() ?? fromOs();
}

/** Share of CPU time that was busy between two snapshots. */
export function busyShare(before: CpuSnapshot, after: CpuSnapshot): number {
  const total = after.total - before.total;
  return total > 0 ? (after.busy - before.busy) / total : 0;
}

/** Share of CPU time stolen by the hypervisor between two snapshots (undefined where unknown). */
export function stealShare(before: CpuSnapshot, after: CpuSnapshot): number | undefined {
  if (before.steal === undefined || after.steal === undefined) return undefined;
  const total = after.total - before.total;
  return total > 0 ? (after.steal - before.steal) / total : 0;
}

/** Share of CPU time spent busy over `ms` milliseconds. */
export async function busyOver(ms: number): Promise<number> {
  const before = cpuSnapshot();
  await sleep(ms);
  return busyShare(before, cpuSnapshot());
}
