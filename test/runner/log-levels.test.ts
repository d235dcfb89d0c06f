import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  OutputClassifier,
  prefixLevel,
  type ClassifiedEntry,
} from '../../src/runner/log-levels.js';

/** What a stream's lines become, read at 1 ms apart, with what is held flushed at the end. */
function classify(lines: string[], plain: 'info' | 'erro' = 'info', max = 4000) {
  const entries: ClassifiedEntry[] = [];
  const classifier = new OutputClassifier(plain, (entry) => entries.push(entry), max);
  lines.forEach((line, i) => classifier.line(line, 1000 + i));
  classifier.flush();
  return entries.map(({ level, text, exception, at }) => ({
    level,
    text,
    at,
    ...(exception === undefined ? {} : { exception }),
  }));
}

/** What uAgents 0.25 writes for `logger.exception` in an interval handler. */
const UAGENTS_EXCEPTION = [
  "ERROR:    [raising]: Exception in interval handler: 'x'",
  'Traceback (most recent call last):',
  '  File "/venv/lib/python3.11/site-packages/uagents/agent.py", line 116, in _run_interval',
  '    await asyncio.shield(func(ctx))',
  '  File "/agent/agent.py", line 14, in tick',
  '    print(settings["x"])',
  '          ~~~~~~~~^^^^^',
  "KeyError: 'x'",
];

describe('hosted agents’ output, classified', () => {
  it('gives a line the level its prefix names, in uAgents’ spelling and in Python logging’s', () => {
    assert.equal(prefixLevel('INFO:     [alice]: Starting agent'), 'info');
    assert.equal(prefixLevel('WARNING:  [alice]: No endpoints provided'), 'warn');
    assert.equal(prefixLevel('ERROR:    [alice]: Failed'), 'erro');
    assert.equal(prefixLevel('CRITICAL:root:gone'), 'erro');
    assert.equal(prefixLevel('DEBUG:httpx:load_ssl_context'), 'debg');
    assert.equal(prefixLevel('TRACE:    uvicorn'), 'trce');
    assert.equal(prefixLevel('\u001b[33mWARNING\u001b[0m:  [alice]: coloured'), 'warn');
    assert.equal(prefixLevel('/agent/agent.py:3: DeprecationWarning: old'), 'warn');
    assert.equal(prefixLevel('an ERROR: in the middle is no prefix'), undefined);
    assert.equal(prefixLevel('hello'), undefined);
  });

  it('puts a line without a prefix at its stream’s level', () => {
    assert.deepEqual(
      classify(['hello'], 'erro').map((e) => e.level),
      ['erro'],
    );
    assert.deepEqual(
      classify(['hello', 'INFO:     [a]: hi', 'WARNING:  [a]: careful']).map((e) => e.level),
      ['info', 'info', 'warn'],
    );
  });

  it('makes uAgents’ logged exception one entry at erro, with the exception that ended it', () => {
    const entries = classify(['INFO:     [raising]: before', ...UAGENTS_EXCEPTION, 'after']);
    assert.deepEqual(entries, [
      { level: 'info', text: 'INFO:     [raising]: before', at: 1000 },
      {
        level: 'erro',
        text: UAGENTS_EXCEPTION.join('\n'),
        at: 1001,
        exception: "KeyError: 'x'",
      },
      { level: 'info', text: 'after', at: 1009 },
    ]);
  });

  it('keeps a chain of exceptions in one entry, ending with the last', () => {
    const chain = [
      'Traceback (most recent call last):',
      '  File "/agent/agent.py", line 3, in <module>',
      "    {}['x']",
      "KeyError: 'x'",
      '',
      'During handling of the above exception, another exception occurred:',
      '',
      'Traceback (most recent call last):',
      '  File "/agent/agent.py", line 5, in <module>',
      '    raise ValueError("no x")',
      'ValueError: no x',
    ];
    const entries = classify([...chain, ''], 'erro');
    assert.equal(entries.length, 1);
    assert.equal(entries[0]!.text, chain.join('\n'));
    assert.equal(entries[0]!.exception, 'ValueError: no x');
  });

  it('lets an indented line continue the entry before it, and an error line stand alone', () => {
    assert.deepEqual(
      classify([
        '/agent/agent.py:3: DeprecationWarning: old',
        '  warnings.warn("old", DeprecationWarning)',
        'ERROR:    [a]: it went wrong',
        'INFO:     [a]: and on',
      ]).map((e) => [e.level, e.text]),
      [
        ['warn', '/agent/agent.py:3: DeprecationWarning: old'],
        ['warn', '  warnings.warn("old", DeprecationWarning)'],
        ['erro', 'ERROR:    [a]: it went wrong'],
        ['info', 'INFO:     [a]: and on'],
      ],
    );
  });

  it('cuts a traceback too long to keep in its middle, keeping the exception at its end', () => {
    const frames = Array.from({ length: 400 }, (_, i) => `  File "/agent/deep.py", line ${i}`);
    const lines = ['Traceback (most recent call last):', ...frames, 'RecursionError: too deep'];
    const [entry] = classify(lines, 'erro', 2000);
    assert.ok(entry!.text.length <= 2000, `${entry!.text.length} characters`);
    assert.ok(entry!.text.startsWith('Traceback (most recent call last):\n'));
    assert.ok(entry!.text.endsWith('\nRecursionError: too deep'));
    const left = /… (\d+) characters left out …/.exec(entry!.text);
    assert.ok(left, entry!.text);
    assert.equal(
      entry!.text.length - left[0].length - 2 + Number(left[1]),
      lines.join('\n').length,
    );
    assert.equal(entry!.exception, 'RecursionError: too deep');
  });
});
