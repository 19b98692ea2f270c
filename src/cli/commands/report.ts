import type { Command } from 'commander';
import { MemscopeError } from '../../core/errors.js';
import { contentHead } from '../../core/file-chunks-node.js';
import { isGzip } from '../../core/gzip.js';
import { describeContent, readHeadSync, requireReadableFile } from '../../core/input-file.js';
import { humanBytes } from '../../core/units.js';
import { looksLikeCapture } from '../../capture/reader.js';
import { readCaptureFile } from '../../capture/read-node.js';
import { captureToReport, DEFAULT_CAPS, type ReportCaps, type ReportData } from '../../viewer/report-data.js';
import { renderReportHtml } from '../../viewer/html.js';
import { nodeEmbedCodec } from '../../viewer/report-embed-node.js';
import { viewerBundle } from '../../viewer/bundle-node.js';
import { positiveInt, SITE_SKIP_HELP, siteRuleOption, siteSkipOption } from '../options.js';
import { writeOutput } from '../torch-common.js';

interface ReportOptions {
  output?: string;
  maxEvents: number;
  maxAllocations: number;
  json?: boolean;
  siteSkip?: string[];
}

/** What `memscope report --json` prints: where the report went and what it holds. */
export interface ReportJson {
  readonly input: string;
  readonly output: string;
  readonly bytes: number;
  /** Events on the report's timelines: a capture's or trace's events, or a snapshot's trace events over all devices. */
  readonly timelineEvents: number;
  readonly leakGroups: number;
  /** Why the report holds less than the input (events merged, allocations left out), or null. */
  readonly truncated: string | null;
  /** A snapshot's reading notes: what was read other than exactly as written (empty for other sources). */
  readonly warnings: readonly string[];
}

/** Reads CAPTURE, SNAPSHOT or TRACE (told apart by their first bytes) into report data. */
export async function loadReportData(file: string, caps: ReportCaps): Promise<ReportData> {
  requireReadableFile(file);
  const start = readHeadSync(file, 4096);
  if (start.length === 0) throw new MemscopeError('empty-file', `${file}: the file is empty`);
  const { head } = isGzip(start) ? await contentHead(file, 4096) : { head: start };
  if (looksLikeCapture(Buffer.from(head).toString('utf8'))) return captureToReport(await readCaptureFile(file), file, caps);
  const looks = describeContent(start);
  // Pickles, gzip and JSON go to the PyTorch readers, which name what they find inside.
  if (!(start[0] === 0x80 || looks === 'gzip data' || looks.includes('JSON'))) {
    throw new MemscopeError('not-a-report-input', `${file}: not a memscope capture, PyTorch memory snapshot or Kineto trace: looks like ${looks}`);
  }
  const { torchToReport } = await import('../../viewer/torch-report-node.js');
  return torchToReport(file, caps);
}

export function register(program: Command): void {
  program
    .command('report')
    .description('write one self-contained interactive HTML report of a capture, a PyTorch snapshot or a profiler trace')
    .argument('<input>', 'a capture (memscope run), a PyTorch memory snapshot (.pickle) or a chrome trace (.json/.json.gz)')
    .option('-o, --output <file>', 'HTML file to write', 'memscope-report.html')
    .option('--max-events <n>', 'timeline events embedded exactly (more are merged)', (v) => positiveInt(v, '--max-events'), DEFAULT_CAPS.maxTimelineEvents)
    .option('--max-allocations <n>', 'allocations embedded with detail (the largest)', (v) => positiveInt(v, '--max-allocations'), DEFAULT_CAPS.maxAllocations)
    .option('--site-skip <regex>', SITE_SKIP_HELP, siteSkipOption)
    .option('--json', 'print where the report was written and its figures as JSON')
    .action(async (input: string, opts: ReportOptions) => {
      const caps: ReportCaps = {
        ...DEFAULT_CAPS,
        maxTimelineEvents: opts.maxEvents,
        maxAllocations: opts.maxAllocations,
        site: siteRuleOption(opts.siteSkip),
      };
      const data = await loadReportData(input, caps);
      const html = renderReportHtml(data, await viewerBundle(), nodeEmbedCodec);
      const out = opts.output ?? 'memscope-report.html';
      writeOutput(out, html, 'the report', { quiet: true });
      const json: ReportJson = {
        input,
        output: out,
        bytes: Buffer.byteLength(html),
        timelineEvents: data.timeline.dt.length + (data.memory?.devices.reduce((n, d) => n + d.eventDt.length, 0) ?? 0),
        leakGroups: data.leaks.length,
        truncated: data.truncated ?? null,
        warnings: data.warnings ?? [],
      };
      if (opts.json) {
        process.stdout.write(JSON.stringify(json, null, 2) + '\n');
        return;
      }
      if (data.truncated) process.stderr.write(`memscope: ${data.truncated}\n`);
      process.stderr.write(`memscope: report written to ${out} (${humanBytes(json.bytes)}, ${json.timelineEvents.toLocaleString('en-US')} timeline events, ${json.leakGroups} leak group${json.leakGroups === 1 ? '' : 's'})\n`);
    });
}
