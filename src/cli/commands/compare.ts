import type { Command } from 'commander';
import { compareSnapshots, formatComparison } from '../../torch/text-reports.js';
import { renderFlameGraph } from '../../render/flamegraph-svg.js';
import { compareFlameStacks } from '../../torch/snapshot-flamegraph.js';
import { nonNegativeInt, SITE_SKIP_HELP, siteRuleOption, siteSkipOption } from '../options.js';
import { openSnapshotWithProgress, writeOutput, printJson, textStyle, printText } from '../torch-common.js';

export function register(program: Command): void {
  program
    .command('compare')
    .description('what changed between two memory snapshots: live memory by allocating frame, and segments only in one of them')
    .argument('<before>', 'the earlier snapshot pickle')
    .argument('<after>', 'the later snapshot pickle')
    .option('--top <n>', 'frames listed', (v) => nonNegativeInt(v, '--top'), 20)
    .option('-o, --output <file>', 'also write a flame graph (SVG) of the segments found in only one snapshot, like _memory_viz.py compare')
    .option('--site-skip <regex>', SITE_SKIP_HELP, siteSkipOption)
    .option('--json', 'print the comparison as JSON')
    .action(async (beforeFile: string, afterFile: string, opts: { top: number; json?: boolean; output?: string; siteSkip?: string[] }) => {
      const site = siteRuleOption(opts.siteSkip);
      const { top } = opts;
      const before = await openSnapshotWithProgress(beforeFile, 'compare');
      const after = await openSnapshotWithProgress(afterFile, 'compare');
      const cmp = compareSnapshots(before, after, site);
      if (opts.output) {
        const svg = renderFlameGraph(compareFlameStacks(before, after), {
          title: 'Segments only in one snapshot',
          subtitle: `${beforeFile} (only_before) vs ${afterFile} (only_after); widths are bytes`,
        });
        writeOutput(opts.output, svg, 'a flame graph');
      }
      if (opts.json) printJson(cmp);
      else printText(formatComparison(cmp, { top, style: textStyle(), before: beforeFile, after: afterFile }));
    });
}
