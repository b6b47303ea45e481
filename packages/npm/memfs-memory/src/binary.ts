/**
 * Finding the memfs binary: `MEMFS_BIN` if set, else the one in this
 * platform's package (`memfs-memory-<platform>-<arch>`, an optional
 * dependency npm installs only where it fits).
 */
import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';

/** The platforms a binary package is built for (scripts/package_npm.sh). */
export const BUILT_FOR = ['linux-x64'];

/** memfs could not be found, started or reached; the message says what to do. */
export class MemfsError extends Error {
  override name = 'MemfsError';
}

export function platformName(): string {
  return `${process.platform}-${process.arch}`;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The memfs binary's path, or a MemfsError saying what to do. */
export function findMemfs(): string {
  const named = process.env.MEMFS_BIN;
  if (named) {
    if (executable(named)) return named;
    throw new MemfsError(`MEMFS_BIN names ${JSON.stringify(named)}, which is not an executable file`);
  }
  const here = platformName();
  const require = createRequire(import.meta.url);
  let path: string | undefined;
  try {
    path = require.resolve(`memfs-memory-${here}/bin/memfs`);
  } catch {
    path = undefined;
  }
  if (path && executable(path)) return path;
  if (!BUILT_FOR.includes(here)) {
    throw new MemfsError(
      `memfs-memory has no memfs binary for ${here} (built for: ${BUILT_FOR.join(', ')}); ` +
        'build memfs from source and set MEMFS_BIN, or pass { socket } to reach a running memfs',
    );
  }
  throw new MemfsError(
    `the memfs binary for ${here} is missing (the optional dependency memfs-memory-${here} was not installed); ` +
      'reinstall memfs-memory without --no-optional / --omit=optional, or set MEMFS_BIN',
  );
}

/** Said once, at import, where no binary can be had. */
export function warnIfNoBinary(): void {
  if (process.env.MEMFS_BIN || BUILT_FOR.includes(platformName())) return;
  process.emitWarning(
    `memfs-memory has no memfs binary for ${platformName()} (built for: ${BUILT_FOR.join(', ')}): ` +
      'set MEMFS_BIN to a memfs built from source, or pass { socket } to reach a running memfs',
    'MemfsWarning',
  );
}
