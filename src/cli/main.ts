#!/usr/bin/env node
// The CLI with every verb, from source or from tsc's output (`tsx src/cli/main.ts …`,
// `node dist/cli/main.js …`). The installed `memscope` bin (src/cli/bin.ts) imports it for every
// verb but `run`'s fast path and the PyTorch-file verbs.
import { runCli } from './cli.js';
import { VERB_MODULES } from './commands/index.js';

await runCli(process.argv, VERB_MODULES);
