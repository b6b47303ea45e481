// The SDK's tool runner with memfsMemoryTool against a scripted mock of the
// Messages API on loopback: parallel tool calls in one turn and an error case,
// alone and beside a running memfs mount.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import Anthropic from '@anthropic-ai/sdk';

import { memfsMemoryTool } from '../src/index.js';

const SCRIPT: any[][] = [
  [
    { type: 'tool_use', id: 'toolu_01', name: 'memory', input: { command: 'view', path: '/memories' } },
    { type: 'tool_use', id: 'toolu_02', name: 'memory', input: { command: 'create', path: '/memories/acme.md', file_text: '# Acme\n- prefers email\n' } },
  ],
  [
    { type: 'tool_use', id: 'toolu_03', name: 'memory', input: { command: 'str_replace', path: '/memories/acme.md', old_str: 'email', new_str: 'email follow-ups' } },
    { type: 'tool_use', id: 'toolu_04', name: 'memory', input: { command: 'view', path: '/memories/missing.md' } },
  ],
  [{ type: 'text', text: 'Noted.' }],
];

/** Runs the scripted conversation with the adapter spawning memfs on `data`. */
async function converse(data: string, session?: string): Promise<any[]> {
  const requests: any[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      requests.push(JSON.parse(body));
      const content = SCRIPT[requests.length - 1]!;
      const stop = content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({
        id: `msg_${requests.length}`, type: 'message', role: 'assistant', model: 'claude-mock', content,
        stop_reason: stop, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 },
      }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const memory = memfsMemoryTool({ spawn: [process.env.MEMFS_BIN!, '--data', data], session });
  try {
    const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'test-key', maxRetries: 0 });
    const runner = client.beta.messages.toolRunner({
      model: 'claude-mock', max_tokens: 1024, tools: [memory.tool],
      messages: [{ role: 'user', content: 'Remember that Acme prefers email follow-ups.' }],
    });
    const final = await runner;
    assert.equal((final.content[0] as any).text, 'Noted.');
  } finally {
    await memory.close();
    server.close();
  }
  return requests;
}

const ACME = '# Acme\n- prefers email follow-ups\n';

test('tool runner drives memfs through the adapter', async () => {
  const data = path.join(mkdtempSync(path.join(os.tmpdir(), 'memfs-ts-')), 'data');
  const requests = await converse(data);
  assert.equal(requests.length, 3);
  const results = (i: number) => Object.fromEntries(requests[i].messages.at(-1).content.map((b: any) => [b.tool_use_id, b]));
  const first = results(1);
  assert.match(first.toolu_01.content, /^Here're the files and directories up to 2 levels deep in \/memories/);
  assert.equal(first.toolu_02.content, 'File created successfully at: /memories/acme.md');
  const second = results(2);
  assert.match(second.toolu_03.content, /^The memory file has been edited\./);
  assert.equal(second.toolu_04.is_error, true);
  assert.match(JSON.stringify(second.toolu_04.content), /The path \/memories\/missing.md does not exist/);
  assert.equal(readFileSync(path.join(data, 'memories', 'acme.md'), 'utf8'), ACME);
});

test('the adapter works beside a running memfs mount', async (t) => {
  if (!existsSync('/dev/fuse') || process.getuid?.() !== 0) {
    // Under CI=true nothing passes by skipping.
    assert.notEqual(process.env.CI, 'true', 'this test must run under CI=true: needs root and /dev/fuse');
    t.skip('needs root and /dev/fuse');
    return;
  }
  const top = mkdtempSync(path.join(os.tmpdir(), 'memfs-ts-'));
  const data = path.join(top, 'data');
  const mnt = path.join(top, 'mnt');
  mkdirSync(mnt);
  const mount = spawn(process.env.MEMFS_BIN!, ['--data', data, 'mount', mnt], { stdio: 'ignore' });
  try {
    for (let i = 0; i < 200 && !existsSync(path.join(data, '.memfs', 'sock')); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 200));
    // The adapter's memfs attaches to the mount's; the person sees the writes.
    await converse(data, 'ts-session');
    assert.equal(readFileSync(path.join(mnt, 'acme.md'), 'utf8'), ACME);
  } finally {
    const exited = new Promise((r) => mount.on('exit', r));
    mount.kill('SIGTERM');
    await exited;
  }
});
