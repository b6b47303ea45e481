/**
 * memfs as the memory of the Anthropic TypeScript SDK's tool runner.
 *
 *   const memory = memfsMemoryTool({ data: './memory' });                  // the bundled memfs
 *   // or memfsMemoryTool({ socket: './memory/.memfs/sock' });             // a running `memfs mount`
 *   // or memfsMemoryTool({ spawn: ['memfs', '--data', './memory'] });     // any memfs command
 *   const runner = client.beta.messages.toolRunner({ model, max_tokens, messages, tools: [memory.tool] });
 *   const final = await runner;
 *   await memory.close();   // a spawned memfs has written everything out when this resolves
 *
 * Every command is one JSON line to memfs and one line back; an error result
 * becomes the SDK's ToolError, so the runner sends it with `is_error: true`.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import readline from 'node:readline';
import type { Readable, Writable } from 'node:stream';

import { betaMemoryTool } from '@anthropic-ai/sdk/helpers/beta/memory';
import { ToolError } from '@anthropic-ai/sdk/lib/tools/ToolError';

import { MemfsError, findMemfs, warnIfNoBinary } from './binary.js';

export { MemfsError, findMemfs, platformName } from './binary.js';

warnIfNoBinary();

type Answer = { content: string | Array<any>; is_error: boolean };

/** One line out, one line back, answers in order. */
class LineChannel {
  private waiting: Array<{ resolve: (a: Answer) => void; reject: (e: Error) => void }> = [];

  /** `ended`: why the other side stopped answering, once it has (the default: it closed). */
  constructor(
    private output: Writable,
    input: Readable,
    private closer: () => Promise<void>,
    ended: () => Promise<Error> = async () => new MemfsError('memfs closed the connection'),
  ) {
    const lines = readline.createInterface({ input });
    lines.on('line', (line) => {
      const next = this.waiting.shift();
      if (!next) return;
      try {
        next.resolve(JSON.parse(line) as Answer);
      } catch {
        next.reject(new Error(`memfs answered something that is not JSON: ${line.slice(0, 200)}`));
      }
    });
    lines.on('close', () => void ended().then((e) => this.fail(e)));
  }

  /** Every call waiting, and every later one, fails with `error`. */
  fail(error: Error): void {
    this.failed ??= error;
    for (const w of this.waiting.splice(0)) w.reject(this.failed);
  }

  private failed: Error | undefined;

  call(input: object): Promise<Answer> {
    return new Promise((resolve, reject) => {
      if (this.failed) return reject(this.failed);
      this.waiting.push({ resolve, reject });
      this.output.write(JSON.stringify(input) + '\n');
    });
  }

  close(): Promise<void> {
    return this.closer();
  }
}

/**
 * At most one of `data` (a data dir for the bundled memfs; the default,
 * `./memory`), `socket` (a running memfs's socket) and `spawn` (the memfs
 * command to start). `session` names this agent session; memfs records the
 * name with each change.
 */
export type MemfsOptions = ({ data?: string } | { socket: string } | { spawn: string[] }) & { session?: string };

function spawned(argv: string[], session: string | undefined): LineChannel {
  const [command, ...args] = argv;
  const named = session !== undefined ? ['--as', session] : [];
  const child = spawn(command!, [...args, ...named, 'serve', '--stdio'], { stdio: ['pipe', 'pipe', 'pipe'] });
  // memfs' log: drained, the last lines kept to say why it ended if it does.
  const said: string[] = [];
  readline.createInterface({ input: child.stderr }).on('line', (line) => {
    said.push(line);
    if (said.length > 5) said.shift();
  });
  // Closing ends its input; it then writes everything out and exits.
  const exited = new Promise<void>((r) => child.on('close', () => r()));
  const channel = new LineChannel(
    child.stdin,
    child.stdout,
    () => {
      child.stdin.end();
      return exited;
    },
    () => exited.then(() => new MemfsError(`memfs ended${said.length ? ': ' + said.join(' ') : ' without saying why'}`)),
  );
  child.on('error', (e) =>
    channel.fail(new MemfsError(`cannot start memfs (${command}): ${e.message}; reinstall memfs-memory, or set MEMFS_BIN`)),
  );
  child.stdin.on('error', () => {}); // reported by 'close' above
  return channel;
}

export function memfsMemoryTool(options: MemfsOptions = {}) {
  let channel: LineChannel;
  if ('socket' in options) {
    const conn = net.createConnection(options.socket);
    channel = new LineChannel(conn, conn, () => new Promise<void>((r) => conn.end(r)));
    conn.on('error', (e) =>
      channel.fail(new MemfsError(`cannot reach memfs at ${options.socket}: ${e.message}; is memfs running?`)),
    );
    if (options.session !== undefined) {
      // Answered before any call, in order; a refusal fails the first call's await.
      void channel.call({ type: 'memfs_hello', session: options.session }).catch(() => {});
    }
  } else if ('spawn' in options) {
    channel = spawned(options.spawn, options.session);
  } else {
    channel = spawned([findMemfs(), '--data', options.data ?? './memory'], options.session);
  }
  const run = async (command: object) => {
    const answer = await channel.call(command);
    if (answer.is_error) throw new ToolError(answer.content);
    return answer.content;
  };
  const tool = betaMemoryTool({
    view: run,
    create: run,
    str_replace: run,
    insert: run,
    delete: run,
    rename: run,
  });
  // `run` is for programs: any tool input, including memfs' `expected_sha256`
  // precondition (not in the model's schema); an error result throws ToolError.
  return { tool, run, close: () => channel.close() };
}
