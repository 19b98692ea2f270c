#!/usr/bin/env node
import { Command } from 'commander';
import { MemscopeError } from '../core/errors.js';
import { commands } from './commands/index.js';

const program = new Command();
program
  .name('memscope')
  .description('Where did my tensor memory go? Memory tracking and profiling for TensorFlow.js and PyTorch files.')
  .version('0.1.0')
  .showHelpAfterError();

for (const register of commands) register(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  // Bad input is reported as one clear line, never a stack trace.
  if (err instanceof MemscopeError) {
    process.stderr.write(`memscope: ${err.message}\n`);
    process.exitCode = 2;
  } else {
    throw err;
  }
}
