// How the demos load TFJS from the user's install: a package that is absent is told apart from
// one that is there but fails to load, and either way the message is one line.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { MemscopeError } from '../../src/core/errors.js';
import { defaultDemoBackend, importInstalled, parseDemoBackend } from '../../src/tfjs/demo-backend-node.js';

const dir = mkdtempSync(join(tmpdir(), 'memscope-demo-backend-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function moduleFile(name: string, source: string): string {
  const file = join(dir, name);
  writeFileSync(file, source);
  return pathToFileURL(file).href;
}

describe('importInstalled', () => {
  it('answers null for a package that is not installed', async () => {
    await expect(importInstalled('@tensorflow/tfjs-backend-not-installed')).resolves.toBeNull();
  });

  it('loads a package that is installed', async () => {
    const core = (await importInstalled('@tensorflow/tfjs-core')) as { version_core?: unknown } | null;
    expect(typeof core?.version_core).toBe('string');
  });

  it('refuses in one line when the package is there but one of its own imports is missing', async () => {
    const url = moduleFile('needs-missing.mjs', "import 'memscope-no-such-dependency';\n");
    const err = await importInstalled(url).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(MemscopeError);
    expect((err as MemscopeError).code).toBe('tfjs-load-failed');
    expect((err as MemscopeError).message).toMatch(/^cannot load file:.*needs-missing\.mjs: Cannot find package 'memscope-no-such-dependency'/);
    expect((err as MemscopeError).message).not.toContain('\n');
  });

  it('keeps only the first line of a load error', async () => {
    const url = moduleFile('throws.mjs', "throw new Error('broken build\\n    at somewhere (x.js:1:1)');\n");
    await expect(importInstalled(url)).rejects.toThrow(/^cannot load file:.*throws\.mjs: broken build$/);
  });
});

describe('the demo backend', () => {
  it('is cpu when its package is installed and no backend is asked for', async () => {
    await expect(defaultDemoBackend()).resolves.toBe('cpu');
  });

  it('is one of cpu and wasm when asked for', () => {
    expect(parseDemoBackend('wasm')).toBe('wasm');
    expect(() => parseDemoBackend('webgl')).toThrow(/--backend: unknown backend "webgl"; expected one of cpu, wasm/);
  });
});
