import Table from 'cli-table3';

export type Align = 'left' | 'right';

/**
 * A plain text table (box-drawn by cli-table3, no colours, so output is the
 * same on a terminal, in a log file and in a test snapshot). `align` gives one
 * entry per column; missing entries align left.
 */
export function renderTable(
  head: readonly string[],
  rows: readonly (readonly string[])[],
  options: { align?: readonly Align[] } = {},
): string {
  const table = new Table({
    head: [...head],
    colAligns: head.map((_, i) => options.align?.[i] ?? 'left'),
    style: { head: [], border: [], compact: true, 'padding-left': 1, 'padding-right': 1 },
  });
  for (const row of rows) table.push([...row]);
  return table.toString();
}
