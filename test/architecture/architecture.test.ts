/**
 * docs/ARCHITECTURE.md's import rules on the real src/: no import circle, no upward import, render/
 * importing only core/, no file over 600 lines but the listed PyTorch ports. A failure lists every
 * violation at once (the same list `node scripts/check-architecture.mjs` prints).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkArchitecture, formatViolations } from '../../scripts/check-architecture.mjs';
import { repoRoot } from '../support/fixtures.js';

describe('src/ keeps the architecture rules', () => {
  const result = checkArchitecture(join(repoRoot, 'src'));

  it('reads the whole tree and its imports', () => {
    expect(result.files).toContain('index.ts');
    expect(result.files.filter((f) => f.startsWith('core/')).length).toBeGreaterThan(3);
    expect(result.files.length).toBeGreaterThan(80);
    // Every file but the smallest leaves imports something: far more imports than files.
    expect(result.edges.length).toBeGreaterThan(2 * result.files.length);
  });

  it('has no violation', () => {
    expect(result.violations.length, `\n${formatViolations(result.violations)}\n`).toBe(0);
  });
});
