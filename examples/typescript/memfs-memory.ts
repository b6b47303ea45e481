/**
 * memfs as the memory of the Anthropic TypeScript SDK's tool runner.
 *
 *   const memory = memfsMemoryTool({ socket: './memory/.memfs/sock' });   // a running `memfs mount`
 *   // or memfsMemoryTool({ spawn: ['memfs', '--data', './memory'] });     // a child `memfs serve --stdio`
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

type Answer = { content: string | Array<any>; is_error: boolean };

/** One line out, one line back, answers in order. */
class LineChannel {
  private waiting: Array<{ resolve: (a: Answer) => void; reject: (e: Error) => void }> = [];

  constructor(private output: Writable, input: Readable, private closer: () => Promise<void>) {
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
    lines.on('close', () => {
      for (const w of this.waiting.splice(0)) w.reject(new Error('memfs closed the connection'));
    });
  }

  call(input: object): Promise<Answer> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.output.write(JSON.stringify(input) + '\n');
    });
  }

  close(): Promise<void> {
    return this.closer();
  }
}

/** `session` names this agent session; memfs records the name with each change. */
export type MemfsOptions = ({ socket: string } | { spawn: string[] }) & { session?: string };

export function memfsMemoryTool(options: MemfsOptions) {
  let channel: LineChannel;
  if ('socket' in options) {
    const conn = net.createConnection(options.socket);
    channel = new LineChannel(conn, conn, () => new Promise<void>((r) => conn.end(r)));
    if (options.session !== undefined) {
      // Answered before any call, in order; a refusal fails the first call's await.
      void channel.call({ type: 'memfs_hello', session: options.session });
    }
  } else {
    const [command, ...args] = options.spawn;
    const named = options.session !== undefined ? ['--as', options.session] : [];
    const child = spawn(command!, [...args, ...named, 'serve', '--stdio'], { stdio: ['pipe', 'pipe', 'inherit'] });
    // Closing ends its input; it then writes everything out and exits.
    const exited = new Promise<void>((r) => child.on('exit', () => r()));
    channel = new LineChannel(child.stdin, child.stdout, () => {
      child.stdin.end();
      return exited;
    });
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
