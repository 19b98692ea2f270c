import { defineConfig } from 'vitest/config';

// `npm run test:corpus`: every verb and both reading paths over the real snapshots and traces in
// ../shared/fixtures (test/corpus/). Apart from `npm test`, which needs nothing outside the clone.
export default defineConfig({
  test: {
    include: ['test/corpus/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: 'forks',
    // Two cores: one test file at a time, while each spawns its CLI runs two at a time.
    fileParallelism: false,
    reporters: ['default', './test/support/plain-summary.ts'],
  },
});
