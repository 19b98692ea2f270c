import Module from 'node:module';
import { createModelTracking, type ModelRegistry, type TfjsPackage } from './auto-track.js';

export type { ModelRegistry } from './auto-track.js';

/** The TFJS packages model discovery wraps, by the path Node loads them from. */
const PACKAGE_OF_FILE: ReadonlyArray<readonly [RegExp, TfjsPackage]> = [
  [/[\\/]@tensorflow[\\/]tfjs-layers[\\/]/, 'layers'],
  [/[\\/]@tensorflow[\\/]tfjs-converter[\\/]/, 'converter'],
  [/[\\/]@tensorflow[\\/]tfjs-core[\\/]/, 'core'],
];

/**
 * Zero-code model discovery for `memscope run` (auto-track.ts): it watches Node's module
 * loading (`Module._load`, which both `require` and ESM imports of these CommonJS packages pass
 * through) for the program's own copies of tfjs-layers, tfjs-core and tfjs-converter, and hands
 * their exports to the prototype wrapping. `restore()` removes the loader hook and every wrapper.
 */
export function installAutoTracking(session: ModelRegistry, onError: (err: unknown) => void): { restore(): void } {
  const tracking = createModelTracking(session, onError);
  type Loader = (request: string, parent: unknown, isMain: boolean) => unknown;
  const mod = Module as unknown as { _load: Loader; _resolveFilename: (r: string, p: unknown, m: boolean) => string };
  const originalLoad = mod._load;
  const load: Loader = function (this: unknown, request, parent, isMain) {
    const exports = originalLoad.call(this, request, parent, isMain);
    if (request.includes('tfjs')) {
      try {
        const filename = request.startsWith('@') ? mod._resolveFilename(request, parent, isMain) : request;
        const pkg = PACKAGE_OF_FILE.find(([pattern]) => pattern.test(filename))?.[1];
        if (pkg !== undefined) tracking.watch(exports, pkg);
      } catch (err) {
        onError(err);
      }
    }
    return exports;
  };
  mod._load = load;

  return {
    restore() {
      if (mod._load === load) mod._load = originalLoad;
      tracking.restore();
    },
  };
}
