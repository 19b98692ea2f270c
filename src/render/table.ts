export type Align = 'left' | 'right';

// Box-drawing text tables. memscope draws its own (in cli-table3's compact
// layout) rather than using cli-table3: that package pulls in @colors/colors,
// which requires Node's `util` and `os`, and MemTracker's displays must bundle
// for the browser.

/** Display width: one column per code point (memscope's cells are ASCII, units and arrows). */
function width(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

function pad(text: string, to: number, align: Align): string {
  const gap = ' '.repeat(Math.max(0, to - width(text)));
  return align === 'right' ? gap + text : text + gap;
}

/**
 * A plain text table, no colours, so output is the same on a terminal, in a
 * log file and in a test snapshot. `align` gives one entry per column; missing
 * entries align left. Rows shorter than the header are padded with empty cells.
 */
export function renderTable(
  head: readonly string[],
  rows: readonly (readonly string[])[],
  options: { align?: readonly Align[] } = {},
): string {
  const columns = Math.max(head.length, ...rows.map((r) => r.length));
  const cell = (row: readonly string[], i: number) => row[i] ?? '';
  const widths = Array.from({ length: columns }, (_, i) =>
    Math.max(width(cell(head, i)), ...rows.map((r) => width(cell(r, i)))),
  );
  const rule = (left: string, mid: string, right: string) =>
    left + widths.map((w) => '─'.repeat(w + 2)).join(mid) + right;
  const line = (row: readonly string[]) =>
    '│' + widths.map((w, i) => ` ${pad(cell(row, i), w, options.align?.[i] ?? 'left')} `).join('│') + '│';
  const out = [rule('┌', '┬', '┐'), line(head), rule('├', '┼', '┤'), ...rows.map(line), rule('└', '┴', '┘')];
  return out.join('\n');
}
