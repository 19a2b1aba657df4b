/**
 * A GraphQL operation's name as a metric label (etagere_cache_requests_total): names are the
 * client's to choose, so the labels are bounded. The first MAX_OPERATION_LABELS distinct names an
 * instance sees keep their own label, later ones count as "other", an unnamed operation as
 * "anonymous". A name is GraphQL's `[_A-Za-z][_0-9A-Za-z]*` (the document parsed), cut at 64 characters.
 */
export const MAX_OPERATION_LABELS = 50;
export const OTHER_OPERATION = 'other';
export const ANONYMOUS_OPERATION = 'anonymous';
const MAX_LABEL_CHARS = 64;

export interface OperationLabels {
  of(operationName: string | undefined): string;
}

export function createOperationLabels(max = MAX_OPERATION_LABELS): OperationLabels {
  const seen = new Set<string>();
  return {
    of(operationName) {
      if (operationName === undefined || !/^[_A-Za-z][_0-9A-Za-z]*$/.test(operationName)) return ANONYMOUS_OPERATION;
      const name = operationName.slice(0, MAX_LABEL_CHARS);
      if (seen.has(name)) return name;
      if (seen.size >= max) return OTHER_OPERATION;
      seen.add(name);
      return name;
    },
  };
}
