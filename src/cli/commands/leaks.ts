import type { Command } from 'commander';
import { findLeaks, frameLocation, type LeakReport } from '../../capture/leaks.js';
import { readCaptureFile } from '../../capture/read-node.js';
import { nonNegativeInt, optionWithDefault, SITE_SKIP_HELP, siteRuleOption, siteSkipOption } from '../options.js';
import { formatLeaks } from '../../capture/leaks-text.js';
import { recordingOption } from '../../capture/types.js';

export const EXIT_LEAKS_FOUND = 3;


/** The leak report as `--json` prints it (`memscope leaks` and `memscope run`). */
export function leaksJson(report: LeakReport, capture: string): object {
  return {
    capture,
    steps: report.steps,
    stepKind: report.stepKind,
    note: report.note,
    coverage: report.coverage,
    leaks: report.groups.map((g) => ({
      ...g,
      site: g.userFrame ? frameLocation(g.userFrame) : null,
    })),
  };
}

export function register(program: Command): void {
  program
    .command('leaks')
    .description('list storages that outlive their step, keep growing and are still alive at exit (tensors never disposed)')
    .argument('<capture>', 'a capture written by `memscope run`')
    .option('--json', 'print the leak groups as JSON')
    .addOption(optionWithDefault('--frames <n>', 'stack frames to print per leak', '8'))
    .option('--site-skip <regex>', SITE_SKIP_HELP, siteSkipOption)
    .action(async (file: string, opts: { json?: boolean; frames: string; siteSkip?: string[] }) => {
      const frames = nonNegativeInt(opts.frames, '--frames');
      const site = siteRuleOption(opts.siteSkip);
      const capture = await readCaptureFile(file);
      if (capture.truncated) process.stderr.write(`memscope: ${file} is truncated: ${capture.truncated.reason} (line ${capture.truncated.line}); using what was written\n`);
      const report = findLeaks(capture, site);
      if (opts.json) process.stdout.write(JSON.stringify(leaksJson(report, file), null, 2) + '\n');
      else process.stdout.write(formatLeaks(report, { frames, stacksRecorded: capture.header.stacks, stacksOption: recordingOption(capture.header, 'stacks') }));
      // 3, not 1 (bad input) or 2 (usage): CI can fail a build on leaks alone.
      if (report.groups.length > 0) process.exitCode = EXIT_LEAKS_FOUND;
    });
}
