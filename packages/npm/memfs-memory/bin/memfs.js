#!/usr/bin/env node
// `memfs` on PATH (npx memfs ...): runs the binary of this platform's package.
import { spawnSync } from 'node:child_process';

import { MemfsError, findMemfs } from '../dist/src/binary.js';

let binary;
try {
  binary = findMemfs();
} catch (e) {
  if (!(e instanceof MemfsError)) throw e;
  process.stderr.write(`memfs: ${e.message}\n`);
  process.exit(127);
}
const run = spawnSync(binary, process.argv.slice(2), { stdio: 'inherit' });
if (run.error) {
  process.stderr.write(`memfs: cannot run ${binary}: ${run.error.message}\n`);
  process.exit(127);
}
if (run.signal) process.kill(process.pid, run.signal);
process.exit(run.status ?? 1);
