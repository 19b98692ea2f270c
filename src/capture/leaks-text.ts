import { humanBytes } from '../core/units.js';
import { frameLocation, leakStepCells, type LeakGroup, type LeakReport } from './leaks.js';
import { renderTable } from '../render/table.js';

/** `memscope leaks` output: one block per leak group, largest first. */
export function formatLeaks(report: LeakReport, opts: { frames?: number; stacksRecorded?: boolean; stacksOption?: string } = {}): string {
  const coverage = report.coverage ? `Partial capture: ${report.coverage}.\n` : '';
  if (report.note) return `No verdict: ${report.note}.\n${coverage}`;
  const steps = `${report.steps} ${report.stepKind === 'inference' || report.stepKind === 'marked' ? `${report.stepKind} ` : ''}steps`;
  if (report.groups.length === 0) {
    return `No leaks: no unowned storage kept growing across the capture's ${steps} and stayed alive to the end.\n${coverage}`;
  }
  const frames = opts.frames ?? 8;
  const out: string[] = [];
  const total = report.groups.reduce((s, g) => s + g.bytes, 0);
  out.push(`${report.groups.length} leak${report.groups.length === 1 ? '' : 's'} over ${steps}: ${humanBytes(total)} still alive when the program ended.\n${coverage}`);
  report.groups.forEach((g, i) => {
    out.push(`#${i + 1} ${humanBytes(g.bytes)} in ${g.count} storage${g.count === 1 ? '' : 's'} · kernel ${g.kernel ?? '(none)'} · ${g.device} · ${g.categories.join('/')}`);
    out.push(`   allocated at ${allocationSite(g, opts.stacksRecorded ?? g.stack.length > 0, opts.stacksOption ?? '--stacks')}`);
    out.push(
      renderTable(
        ['step', 'still alive', 'bytes', 'live at step end'],
        stepRows(g),
        { align: ['right', 'right', 'right', 'right'] },
      )
        .split('\n')
        .map((l) => `   ${l}`)
        .join('\n'),
    );
    if (g.stack.length) {
      out.push('   stack:');
      // Folded runs of library frames ("[N frames in pkg]") are not frames themselves.
      for (const f of g.stack.slice(0, frames)) out.push(f.startsWith('[') ? `     ${f}` : `     at ${f}`);
      if (g.stack.length > frames) out.push(`     … ${g.stack.length - frames} more frames`);
    }
    out.push('');
  });
  return out.join('\n');
}

/** Rows of the step table shown whole up to this many; a longer run shows its ends and sums the middle. */
const MAX_STEP_ROWS = 12;
const END_ROWS = 5;

/**
 * A group's table rows, a step each. A leak over thousands of steps would print thousands of rows
 * that say the same: its first and last steps are listed and the steps between are one row with
 * their sums (`--json` keeps every step).
 */
function stepRows(g: LeakGroup): string[][] {
  const row = (r: LeakGroup['perStep'][number]): string[] => leakStepCells(g, r);
  if (g.perStep.length <= MAX_STEP_ROWS) return g.perStep.map(row);
  const middle = g.perStep.slice(END_ROWS, -END_ROWS);
  const count = middle.reduce((n, r) => n + r.count, 0);
  const bytes = middle.reduce((n, r) => n + r.bytes, 0);
  const summed = [`… ${middle.length} steps (${middle[0]!.step}–${middle.at(-1)!.step})`, String(count), humanBytes(bytes), '…'];
  return [...g.perStep.slice(0, END_ROWS).map(row), summed, ...g.perStep.slice(-END_ROWS).map(row)];
}

/**
 * Where a leak was made, in one phrase: the program's own line when the stack
 * reaches it; else the layer; else what is missing (a capture without stacks,
 * or a stack made entirely of library frames, which is then printed below).
 */
function allocationSite(g: LeakGroup, stacksRecorded: boolean, stacksOption: string): string {
  if (g.userFrame) return frameLocation(g.userFrame);
  const layer = g.layer ? `layer ${g.layer}` : null;
  if (!stacksRecorded) return `${layer ?? 'an unknown site'} (record with ${stacksOption} for the program's line)`;
  if (g.stack.length > 0) return `${layer ?? 'a site'} inside library code (no frame of the program's own in the stack below)`;
  return layer ?? 'an unknown site (no stack was recorded for these storages)';
}
