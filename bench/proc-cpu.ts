/**
 * CPU time of a server's processes, from Linux /proc: user + system time of each root process
 * and of every descendant (cluster workers, nginx workers), all threads included. The bench
 * divides the difference over the measured window by the requests completed: server CPU µs per
 * request, a figure that moves much less with a busy machine than req/s does.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    const value = Number(out.stdout?.trim());
    ticksPerSecond = out.status === 0 && Number.isFinite(value) && value > 0 ? value : 100;
  }
  return ticksPerSecond;
}

interface ProcStat {
  readonly ppid: number;
  /** utime + stime, in clock ticks. */
  readonly ticks: number;
}

/** Fields of /proc/PID/stat after the command name (which may hold spaces and parentheses). */
function readStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
    const ppid = Number(fields[1]);
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ppid) && Number.isFinite(ticks) ? { ppid, ticks } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * CPU time in µs used so far by the processes `roots` and all their descendants; undefined
 * where /proc is missing (not Linux) or a root is gone.
 */
export function treeCpuMicros(roots: readonly number[]): number | undefined {
  if (process.platform !== 'linux' || roots.length === 0) return undefined;
  const stats = new Map<number, ProcStat>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat !== undefined) stats.set(Number(entry), stat);
  }
  if (roots.some((pid) => !stats.has(pid))) return undefined;
  const children = new Map<number, number[]>();
  for (const [pid, stat] of stats) children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), pid]);
  const seen = new Set<number>();
  const pending = [...roots];
  let ticks = 0;
  while (pending.length > 0) {
    const pid = pending.pop() as number;
    if (seen.has(pid)) continue;
    seen.add(pid);
    ticks += stats.get(pid)?.ticks ?? 0;
    pending.push(...(children.get(pid) ?? []));
  }
  return (ticks / clockTicks()) * 1e6;
}
