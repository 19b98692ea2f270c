// `memscope demo` end to end in-process: it trains, and what it prints is the
// MemTracker's tables for the built-in model.
import { describe, expect, it } from 'vitest';
import { runDemo } from '../../src/cli/commands/demo.js';
import { MemscopeError } from '../../src/core/errors.js';

const defaults = { backend: 'cpu', steps: '2', batchSize: '4', units: 'KiB', depth: '2' };

describe('memscope demo', () => {
  it('trains the built-in model and prints the peak, current and module-wise tables', async () => {
    const out: string[] = [];
    await runDemo(defaults, (text) => out.push(text));
    const text = out.join('\n');
    expect(text).toMatch(/^memscope demo: Dense\(32→64, relu\) → BatchNorm → Dense\(64→8\), Adam, batch 4, 2 step\(s\) on the cpu backend; loss \d+\.\d{4} → \d+\.\d{4}/);
    expect(text).toContain('Peak memory');
    expect(text.match(/^Module: .*$/gm)).toEqual(['Module:  demo', 'Module:  demo.bn', 'Module:  demo.dense_in', 'Module:  demo.dense_out']);
    // Statistics were reset before the last step: one call per state.
    expect(text).toContain('Post-Backward # 1');
    expect(text).not.toContain('# 2');
    // Every figure is in the requested unit.
    expect(text).toMatch(/│ cpu +│ +\d+\.\d\d KiB │/);
  });

  it('rejects bad arguments with MemscopeError before training', async () => {
    const print = () => {};
    await expect(runDemo({ ...defaults, steps: '0' }, print)).rejects.toThrow(/--steps must be a positive integer, got "0"/);
    await expect(runDemo({ ...defaults, units: 'MB' }, print)).rejects.toThrow(MemscopeError);
    await expect(runDemo({ ...defaults, backend: 'cuda' }, print)).rejects.toThrow(/unknown backend "cuda"/);
  });
});
