import type { Command } from 'commander';
import { formatSnapshotSummary, formatTraceSummary, snapshotSummaryJson, traceSummaryJson } from '../../torch/text-reports.js';
import { nonNegativeInt, SITE_SKIP_HELP, siteRuleOption, siteSkipOption } from '../options.js';
import { openWithProgress, printJson, textStyle, printText } from '../torch-common.js';

export function register(program: Command): void {
  program
    .command('summary')
    .description('summarise a PyTorch memory snapshot (memory_summary table, largest allocations, totals by frame) or a profiler trace (peaks per device, memory added per operator)')
    .argument('<file>', 'a snapshot pickle, a Kineto trace (.json or .json.gz) or export_memory_timeline JSON')
    .option('--top <n>', 'rows in the allocation / frame / operator tables', (v) => nonNegativeInt(v, '--top'), 10)
    .option('--frames <n>', 'stack frames shown per allocation', (v) => nonNegativeInt(v, '--frames'), 3)
    .option('--site-skip <regex>', SITE_SKIP_HELP, siteSkipOption)
    .option('--json', 'print the figures as JSON')
    .action(async (file: string, opts: { top: number; frames: number; json?: boolean; siteSkip?: string[] }) => {
      const { top, frames } = opts;
      const site = siteRuleOption(opts.siteSkip);
      const opened = await openWithProgress(file);
      if (opened.kind === 'snapshot') {
        if (opts.json) printJson(snapshotSummaryJson(opened.snapshot, top, frames, site));
        else printText(formatSnapshotSummary(opened.snapshot, { top, frames, style: textStyle(), site }));
      } else {
        if (opts.json) printJson(traceSummaryJson(opened.trace, top));
        else printText(formatTraceSummary(opened.trace, { top, style: textStyle() }));
      }
    });
}
