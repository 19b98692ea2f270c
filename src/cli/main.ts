#!/usr/bin/env node
// The CLI from source or from tsc's output (`tsx src/cli/main.ts …`, `node dist/cli/main.js …`).
// The installed `memscope` bin is src/cli/bin.ts, which runs the same `runCli` from a bundle.
import { runCli } from './cli.js';

await runCli(process.argv, () => import('./commands/index.js'));
