/** Tests whose quota window is an hour on the clock. */
import { until } from './proxy.js';

const HOUR = 3_600_000;
/** How close to the hour's end a test waits for the next hour instead. */
const EDGE_MS = 20_000;
/** What a test that calls awayFromHourEdge adds to its own timeout: the longest wait, with room. */
export const HOUR_EDGE_WAIT_MS = EDGE_MS + 5_000;

/** A test that spends a window does not straddle two: within 20 s of the hour, wait for the next one. */
export async function awayFromHourEdge(): Promise<void> {
  if (HOUR - (Date.now() % HOUR) < EDGE_MS)
    await until(() => Date.now() % HOUR > 1_000 && Date.now() % HOUR < EDGE_MS, HOUR_EDGE_WAIT_MS, 'the next hour');
}
