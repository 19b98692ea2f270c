let pipeGuard = false;

/**
 * A reader that stops early (`memscope trace f | head`, quitting `memscope leaks c | less`) closes
 * the pipe: the program then ends quietly instead of with an EPIPE stack trace, whichever verb writes.
 */
export function endQuietlyOnClosedPipe(): void {
  if (pipeGuard) return;
  pipeGuard = true;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}
