import type { Command } from 'commander';
import { humanBytes } from '../../core/units.js';
import { renderReportHtml } from '../../viewer/html.js';
import { viewerBundle } from '../../viewer/bundle-node.js';
import { ACCEPTED_FILES } from '../../viewer/drop-page.js';
import { writeOutput } from '../torch-common.js';

/** `memscope viewer`: the report page without data, which reads the file dropped on it. */
export function register(program: Command): void {
  program
    .command('viewer')
    .description('write the empty viewer: a self-contained HTML page that shows a snapshot, trace or capture dropped on it')
    .option('-o, --output <file>', 'HTML file to write', 'memscope.html')
    .action(async (opts: { output: string }) => {
      const html = renderReportHtml(null, await viewerBundle());
      writeOutput(opts.output, html, 'the viewer', { quiet: true });
      process.stderr.write(`memscope: viewer written to ${opts.output} (${humanBytes(Buffer.byteLength(html))}); open it in a browser and drop a file on it: ${ACCEPTED_FILES}\n`);
    });
}
