/**
 * torch.cuda.memory_summary's table, character for character: the same rows,
 * columns and unit scaling (sizes scale by the "all" row's value at 768 KiB,
 * counts at 750 K), so a memscope summary diffs cleanly against PyTorch's.
 */

const SIZE_PREFIXES = ['B  ', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
const COUNT_PREFIXES = [' ', 'K', 'M'];

function padStart(text: string, width: number): string {
  return text.length >= width ? text : ' '.repeat(width - text.length) + text;
}

function padEnd(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

/** `_format_size(sz, pref_sz)`: the unit is chosen by `pref` (the pool-total row), not by `size`. */
export function formatSummarySize(size: number, pref: number): string {
  let prefix = SIZE_PREFIXES[0];
  let sz = size;
  let p = pref;
  for (const next of SIZE_PREFIXES.slice(1)) {
    if (p < 768 * 1024) break;
    prefix = next;
    sz = Math.floor(sz / 1024);
    p /= 1024;
  }
  return `${padStart(String(sz), 6)} ${prefix}`;
}

/** `_format_count(cnt, pref_cnt)`. */
export function formatSummaryCount(count: number, pref: number): string {
  let prefix = COUNT_PREFIXES[0];
  let c = count;
  let p = pref;
  for (const next of COUNT_PREFIXES.slice(1)) {
    if (p < 750 * 1000) break;
    prefix = next;
    c = Math.floor(c / 1000);
    p /= 1000;
  }
  return `${padStart(String(c), 7)} ${prefix} `;
}

type Formatter = (value: number, pref: number) => string;

const POOL_METRICS: [string, string, Formatter][] = [
  ['allocated_bytes', 'Allocated memory', formatSummarySize],
  ['active_bytes', 'Active memory', formatSummarySize],
  ['requested_bytes', 'Requested memory', formatSummarySize],
  ['reserved_bytes', 'GPU reserved memory', formatSummarySize],
  ['inactive_split_bytes', 'Non-releasable memory', formatSummarySize],
  ['allocation', 'Allocations', formatSummaryCount],
  ['active', 'Active allocs', formatSummaryCount],
  ['segment', 'GPU reserved segments', formatSummaryCount],
  ['inactive_split', 'Non-releasable allocs', formatSummaryCount],
];

const OVERSIZE_METRICS: [string, string, Formatter][] = [
  ['oversize_allocations', 'Oversize allocations', formatSummaryCount],
  ['oversize_segments', 'Oversize GPU segments', formatSummaryCount],
];

const COLUMNS = ['current', 'peak', 'allocated', 'freed'] as const;

/**
 * Renders the table from flat memory_stats keys (`allocated_bytes.all.current`, ...). For a
 * device type other than CUDA (memscope/webgpu's 'webgpu') the heading names it, at the same width.
 */
export function renderMemorySummary(stats: Readonly<Record<string, number>>, device: number, abbreviated = false, deviceTitle = 'CUDA'): string {
  const get = (key: string): number => {
    const v = stats[key];
    if (typeof v !== 'number') throw new Error(`memory summary: stats lack ${key}`);
    return v;
  };
  const lines: string[] = [];
  lines.push('='.repeat(75));
  const heading = ` ${' '.repeat(16)} PyTorch CUDA memory summary, device ID ${padEnd(String(device), 17)} `;
  lines.push(deviceTitle === 'CUDA' ? heading : padEnd(` ${' '.repeat(16)} ${deviceTitle} memory summary, device ID ${device}`, heading.length));
  lines.push('-'.repeat(75));
  const cudaLine = `  ${' '.repeat(9)} CUDA OOMs: ${padEnd(String(get('num_ooms')), 12)} | ${' '.repeat(6)} cudaMalloc retries: ${padEnd(String(get('num_alloc_retries')), 8)}  `;
  // Another device has neither CUDA's OOM count nor its cudaMalloc retries: its own words, same width.
  lines.push(
    deviceTitle === 'CUDA'
      ? cudaLine
      : padEnd(`  ${' '.repeat(9)} ${deviceTitle} OOMs: ${get('num_ooms')} | device allocation retries: ${get('num_alloc_retries')}`, cudaLine.length),
  );
  lines.push('='.repeat(75));
  lines.push('        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ');
  for (const [key, name, fmt] of POOL_METRICS) {
    lines.push('-'.repeat(75));
    const rows: [string, string][] = [['all', name]];
    if (!abbreviated) {
      rows.push(['large_pool', '      from large pool']);
      rows.push(['small_pool', '      from small pool']);
    }
    const pref = COLUMNS.map((c) => get(`${key}.all.${c}`));
    for (const [pool, label] of rows) {
      const cells = COLUMNS.map((c, i) => fmt(get(`${key}.${pool}.${c}`), pref[i]));
      lines.push(` ${padEnd(label, 21)} | ${cells.join(' | ')} `);
    }
  }
  for (const [key, name, fmt] of OVERSIZE_METRICS) {
    lines.push('-'.repeat(75));
    const cells = COLUMNS.map((c) => {
      const v = get(`${key}.${c}`);
      return fmt(v, v);
    });
    lines.push(` ${padEnd(name, 21)} | ${cells.join(' | ')} `);
  }
  lines.push('='.repeat(75));
  return '|' + lines.join('|\n|') + '|\n';
}
