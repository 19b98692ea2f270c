import { openSync, readSync, closeSync, writeFileSync, statSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { MemscopeError } from '../../core/errors.js';
import { humanBytes } from '../../core/units.js';
import { looksLikeCapture } from '../../capture/reader.js';
import { readCaptureFile } from '../../capture/read-node.js';
import { captureToReport, DEFAULT_CAPS, type ReportCaps, type ReportData } from '../../viewer/report-data.js';
import { renderReportHtml } from '../../viewer/html.js';
import { viewerBundle } from '../../viewer/bundle-node.js';

interface ReportOptions {
  output?: string;
  maxEvents: number;
  maxAllocations: number;
}

function head(path: string, n = 4096): Buffer {
  let fd: number;
  try {
    if (!statSync(path).isFile()) throw new Error('not a file');
    fd = openSync(path, 'r');
  } catch (err) {
    throw new MemscopeError('bad-argument', `report: cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  try {
    const buf = Buffer.alloc(n);
    const got = readSync(fd, buf, 0, n, 0);
    return buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('expected a positive integer.');
  return n;
}

/** Reads CAPTURE, SNAPSHOT or TRACE (told apart by their first bytes) into report data. */
export async function loadReportData(file: string, caps: ReportCaps): Promise<ReportData> {
  const start = head(file);
  if (looksLikeCapture(start.toString('utf8'))) return captureToReport(readCaptureFile(file), file, caps);
  const { torchToReport } = await import('../../viewer/torch-report-node.js');
  return torchToReport(file, caps);
}

export function register(program: Command): void {
  program
    .command('report')
    .description('write one self-contained interactive HTML report of a capture, a PyTorch snapshot or a profiler trace')
    .argument('<input>', 'a capture (memscope run), a PyTorch memory snapshot (.pickle) or a chrome trace (.json/.json.gz)')
    .option('-o, --output <file>', 'HTML file to write', 'memscope-report.html')
    .option('--max-events <n>', 'timeline events embedded exactly (more are merged)', positiveInt, DEFAULT_CAPS.maxTimelineEvents)
    .option('--max-allocations <n>', 'allocations embedded with detail (the largest)', positiveInt, DEFAULT_CAPS.maxAllocations)
    .action(async (input: string, opts: ReportOptions) => {
      const caps: ReportCaps = {
        ...DEFAULT_CAPS,
        maxTimelineEvents: opts.maxEvents,
        maxAllocations: opts.maxAllocations,
      };
      const data = await loadReportData(input, caps);
      const html = renderReportHtml(data, await viewerBundle());
      const out = opts.output ?? 'memscope-report.html';
      writeFileSync(out, html);
      if (data.truncated) process.stderr.write(`memscope: ${data.truncated}\n`);
      process.stderr.write(`memscope: report written to ${out} (${humanBytes(Buffer.byteLength(html))}, ${data.timeline.dt.length.toLocaleString('en-US')} timeline events, ${data.leaks.length} leak group${data.leaks.length === 1 ? '' : 's'})\n`);
    });
}
