import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The real-file corpus in ../shared runs apart: `npm run test:corpus` (vitest.corpus.config.ts).
    exclude: [...configDefaults.exclude, 'test/corpus/**'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // TFJS keeps one global engine per process; isolate test files in forks so
    // one file's backend and patches can never leak into another's.
    pool: 'forks',
    // Silences TFJS's Node.js banner in every test process (see the file).
    setupFiles: ['./test/support/setup.ts'],
    reporters: ['default', './test/support/plain-summary.ts'],
  },
});
