import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { humanBytes } from '../../core/units.js';
import { DEFAULT_CAPS } from '../../viewer/report-data.js';
import { renderReportHtml } from '../../viewer/html.js';
import { nodeEmbedCodec } from '../../viewer/report-embed-node.js';
import { viewerBundle } from '../../viewer/bundle-node.js';
import { writeOutput } from '../torch-common.js';
import { loadReportData } from './report.js';

/**
 * The program that opens a file in the user's browser, as argv before the file's path, or null
 * where there is none to try. MEMSCOPE_OPENER names one (tests, or a preferred browser: its value
 * is split on spaces); `none` opens nothing.
 */
export function openerCommand(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string[] | null {
  const named = env['MEMSCOPE_OPENER']?.trim();
  if (named) return named === 'none' ? null : named.split(/\s+/);
  if (platform === 'darwin') return ['open'];
  // `start` is a cmd built-in; its first quoted argument is the window title.
  if (platform === 'win32') return ['cmd', '/c', 'start', '""'];
  // Elsewhere xdg-open, when there is a display for a browser to appear on.
  return env['DISPLAY'] || env['WAYLAND_DISPLAY'] ? ['xdg-open'] : null;
}

/**
 * Starts `command` on `file` and returns once it started (true) or could not (false): the opener
 * is never waited for, since some stay until the browser closes.
 */
function startOpener(command: string[], file: string): Promise<boolean> {
  return new Promise((done) => {
    let child;
    try {
      child = spawn(command[0]!, [...command.slice(1), file], { detached: true, stdio: 'ignore', windowsVerbatimArguments: command[0] === 'cmd' });
    } catch {
      done(false);
      return;
    }
    child.once('error', () => done(false));
    child.once('spawn', () => {
      child.unref();
      done(true);
    });
  });
}

function howToOpen(file: string): string {
  const url = `file://${file.startsWith('/') ? '' : '/'}${file.replace(/\\/g, '/')}`;
  return `open ${url} in a browser (or drop the file on one)`;
}

export function register(program: Command): void {
  program
    .command('view')
    .description('write the report of a capture, a PyTorch snapshot or a profiler trace and open it in the browser')
    .argument('<input>', 'a capture (memscope run), a PyTorch memory snapshot (.pickle) or a chrome trace (.json/.json.gz)')
    .option('-o, --output <file>', 'HTML file to write', 'memscope-report.html')
    .option('--no-open', 'write the report and print its path, without opening a browser')
    .action(async (input: string, opts: { output: string; open: boolean }) => {
      const data = await loadReportData(input, DEFAULT_CAPS);
      const html = renderReportHtml(data, await viewerBundle(), nodeEmbedCodec);
      writeOutput(opts.output, html, 'the report', { quiet: true });
      const path = resolve(opts.output);
      if (data.truncated) process.stderr.write(`memscope: ${data.truncated}\n`);
      const written = `memscope: report written to ${path} (${humanBytes(Buffer.byteLength(html))})`;
      const command = opts.open ? openerCommand() : null;
      if (command && (await startOpener(command, path))) {
        process.stderr.write(`${written}; opening it with ${command[0]}\n`);
        return;
      }
      const why = !opts.open ? '' : command ? ` (${command[0]} could not be started)` : ' (no browser to open it here)';
      process.stderr.write(`${written}${why}: ${howToOpen(path)}\n`);
    });
}
