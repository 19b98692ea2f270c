import { humanBytes } from '../core/units.js';
import { frameLocation, type LeakReport } from '../capture/leaks.js';
import { renderTable } from './table.js';

/** `memscope leaks` output: one block per leak group, largest first. */
export function formatLeaks(report: LeakReport, opts: { frames?: number } = {}): string {
  if (report.note) return `No verdict: ${report.note}.\n`;
  if (report.groups.length === 0) {
    return `No leaks: no unowned storage kept growing across the capture's ${report.steps} steps.\n`;
  }
  const frames = opts.frames ?? 8;
  const out: string[] = [];
  const total = report.groups.reduce((s, g) => s + g.bytes, 0);
  out.push(`${report.groups.length} leak${report.groups.length === 1 ? '' : 's'} over ${report.steps} steps: ${humanBytes(total)} still alive at the last step end.\n`);
  report.groups.forEach((g, i) => {
    const where = g.userFrame ? frameLocation(g.userFrame) : g.layer ? `layer ${g.layer}` : 'unknown site (run with --stacks)';
    out.push(`#${i + 1} ${humanBytes(g.bytes)} in ${g.count} storage${g.count === 1 ? '' : 's'} · kernel ${g.kernel ?? '(none)'} · ${g.device} · ${g.categories.join('/')}`);
    out.push(`   allocated at ${where}`);
    out.push(
      renderTable(
        ['step', 'still alive', 'bytes', 'live at step end'],
        g.perStep.map((r) => [String(r.step), String(r.count), humanBytes(r.bytes), humanBytes(g.liveAtStepEnd[r.step - 1] ?? 0)]),
        { align: ['right', 'right', 'right', 'right'] },
      )
        .split('\n')
        .map((l) => `   ${l}`)
        .join('\n'),
    );
    if (g.stack.length) {
      out.push('   stack:');
      for (const f of g.stack.slice(0, frames)) out.push(`     at ${f}`);
      if (g.stack.length > frames) out.push(`     … ${g.stack.length - frames} more frames`);
    }
    out.push('');
  });
  return out.join('\n');
}
