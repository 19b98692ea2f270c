/**
 * Where tests find their input files. Unit tests read copies in test/fixtures (npm test needs
 * nothing outside the clone); the corpus test reads ../shared beside the clone. Both fail with a
 * message naming the missing file instead of letting a test pass or skip without its input.
 */
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root (the folder holding package.json). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** `test/fixtures/<rel>`; throws when the file is not there. */
export function fixture(rel: string): string {
  const path = resolve(repoRoot, 'test/fixtures', rel);
  if (!existsSync(path)) throw new Error(`test fixture missing: test/fixtures/${rel} (see test/fixtures/README.md)`);
  return path;
}

/** `../shared/<rel>` beside the clone; throws when it is not there (only the corpus test and benches use it). */
export function sharedFile(rel: string): string {
  const path = resolve(repoRoot, '..', 'shared', rel);
  if (!existsSync(path)) {
    throw new Error(`../shared/${rel} is missing: the corpus test needs the shared folder beside the clone (as .ci/run lays it out)`);
  }
  return path;
}
