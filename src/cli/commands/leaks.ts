import type { Command } from 'commander';
import { findLeaks } from '../../capture/leaks.js';
import { readCaptureFile } from '../../capture/read-node.js';
import { formatLeaks } from '../../report/leaks-text.js';

export const EXIT_LEAKS_FOUND = 3;

export function register(program: Command): void {
  program
    .command('leaks')
    .description('list storages that outlive their training step and keep growing (tensors never disposed)')
    .argument('<capture>', 'a capture written by `memscope run`')
    .option('--json', 'print the leak groups as JSON')
    .option('--frames <n>', 'stack frames to print per leak', '8')
    .action((file: string, opts: { json?: boolean; frames: string }) => {
      const capture = readCaptureFile(file);
      if (capture.truncated) process.stderr.write(`memscope: ${file} is truncated: ${capture.truncated.reason} (line ${capture.truncated.line}); using what was written\n`);
      const report = findLeaks(capture);
      if (opts.json) process.stdout.write(JSON.stringify(report, null, 2) + '\n');
      else process.stdout.write(formatLeaks(report, { frames: Math.max(0, Number(opts.frames) || 0) }));
      // 3, not 1 (bad input) or 2 (usage): CI can fail a build on leaks alone.
      if (report.groups.length > 0) process.exitCode = EXIT_LEAKS_FOUND;
    });
}
