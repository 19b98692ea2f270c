// The snapshot lanes compare with constants that are numbers in their own code: a const enum
// member or the lane file's own `const`. An imported `const` number is, to V8's optimised code, a
// read of the exporting module's cell at every use, which costs the ES-module read of a big
// snapshot a few percent (docs/PICKLE.md, "Why the reader is shaped this way").
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const torchDir = new URL('../../src/torch/', import.meta.url);
const LANE_FILES = ['snapshot-builder.ts', 'snapshot-frame-list-lane.ts'];

/** The value imports of a module's source (type-only imports and `type X` names left out). */
function valueImports(source: string): { from: string; names: string[] }[] {
  const out: { from: string; names: string[] }[] = [];
  for (const m of source.matchAll(/^import (type )?\{([^}]*)\} from '([^']+)';/gm)) {
    if (m[1] !== undefined) continue;
    const names = m[2]!
      .split(',')
      .map((n) => n.trim())
      .filter((n) => n !== '' && !n.startsWith('type '))
      .map((n) => n.split(/\s+as\s+/)[0]!);
    out.push({ from: m[3]!, names });
  }
  return out;
}

describe('the lanes import no number constants', () => {
  it('finds the imports it checks (a parse that finds nothing would pass anything)', () => {
    const imports = valueImports(readFileSync(new URL('snapshot-builder.ts', torchDir), 'utf8'));
    expect(imports.map((i) => i.from)).toContain('./snapshot-tables.js');
    expect(imports.flatMap((i) => i.names)).toContain('nodeFor');
  });

  for (const file of LANE_FILES) {
    it(`${file}: every imported value is a function, class, enum or table, not a number`, async () => {
      const numbers: string[] = [];
      for (const { from, names } of valueImports(readFileSync(new URL(file, torchDir), 'utf8'))) {
        if (!from.startsWith('.')) continue;
        const mod = (await import(fileURLToPath(new URL(from.replace(/\.js$/, '.ts'), torchDir)))) as Record<string, unknown>;
        for (const name of names) {
          expect(mod[name], `${name} from ${from}`).toBeDefined();
          if (typeof mod[name] === 'number') numbers.push(`${name} from ${from}`);
        }
      }
      expect(numbers).toEqual([]);
    });
  }
});
