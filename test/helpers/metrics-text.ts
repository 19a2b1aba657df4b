/**
 * Reads a counter from the Prometheus text of /metrics: the sum of its samples whose labels
 * include the given ones (other labels, such as `route`, summed over), undefined when none.
 */
export function counterSum(text: string, name: string, labels: Record<string, string>): number | undefined {
  let sum: number | undefined;
  for (const match of text.matchAll(new RegExp(`^${name}\\{(.*)\\} (\\S+)$`, 'gm'))) {
    const found = Object.fromEntries([...match[1]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) sum = (sum ?? 0) + Number(match[2]);
  }
  return sum;
}

/** Each value of one label of a counter, with the sum of its samples. */
export function counterBy(text: string, name: string, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const match of text.matchAll(new RegExp(`^${name}\\{(.*)\\} (\\S+)$`, 'gm'))) {
    const value = new RegExp(`(?:^|,)${label}="((?:[^"\\\\]|\\\\.)*)"`).exec(match[1]!)?.[1];
    if (value !== undefined) out[value] = (out[value] ?? 0) + Number(match[2]);
  }
  return out;
}
