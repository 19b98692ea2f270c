// Prints one plain "N passed, N failed, N skipped" line after the run, so CI
// logs (which read closing lines) see the count without parsing vitest's own
// decorated summary.
import type { Reporter } from 'vitest/reporters';

interface TaskLike {
  type: string;
  mode?: string;
  result?: { state?: string };
  tasks?: TaskLike[];
}

function count(tasks: readonly TaskLike[], acc: { passed: number; failed: number; skipped: number }): void {
  for (const t of tasks) {
    if (t.tasks) count(t.tasks, acc);
    if (t.type !== 'test') continue;
    const state = t.result?.state;
    if (state === 'pass') acc.passed++;
    else if (state === 'fail') acc.failed++;
    else acc.skipped++;
  }
}

export default class PlainSummary implements Reporter {
  onFinished(files: readonly TaskLike[] = [], errors: readonly unknown[] = []): void {
    const acc = { passed: 0, failed: 0, skipped: 0 };
    count(files, acc);
    // A file that failed to load has no tests but is a failure all the same.
    for (const f of files) if (f.result?.state === 'fail' && !(f.tasks && f.tasks.length)) acc.failed++;
    acc.failed += errors.length;
    process.stdout.write(`\n${acc.passed} passed, ${acc.failed} failed, ${acc.skipped} skipped\n`);
  }
}
