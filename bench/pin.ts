/**
 * `--pin`: the server side (the server under test and its own redis-server) on CPU 0, the load
 * side (the load generator, the shared fake upstream and this harness) on CPU 1, with taskset.
 * Measures per-core capacity without the generator taking cycles from the server's core.
 */
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';

/** The CPU of the server side and of the load side. */
export const SERVER_CPU = 0;
export const LOAD_CPU = 1;

/** Why --pin cannot work here, or undefined when it can. */
export function pinUnavailable(): string | undefined {
  if (process.platform !== 'linux') return '--pin needs Linux (taskset)';
  if (spawnSync('taskset', ['--version'], { stdio: 'ignore' }).error !== undefined) return '--pin needs taskset (util-linux)';
  if (availableParallelism() < 2) return '--pin needs at least 2 CPUs';
  return undefined;
}

/** The command line that runs `command args` on `cpu` (taskset execs it: same pid), or unchanged when cpu is undefined. */
export function pinned(cpu: number | undefined, command: string, args: readonly string[]): { command: string; args: string[] } {
  if (cpu === undefined) return { command, args: [...args] };
  return { command: 'taskset', args: ['-c', String(cpu), command, ...args] };
}

/** Moves every thread of this process (the harness) to `cpu`; throws when taskset fails. */
export function pinSelf(cpu: number): void {
  const result = spawnSync('taskset', ['-a', '-p', '-c', String(cpu), String(process.pid)], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`taskset could not pin the harness to CPU ${cpu}: ${result.stderr.trim()}`);
}
