// The Preview's listening ports (ui/portrules.js): what GET preview/ports
// answers becomes sorted, unique, valid choices.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { listeningPorts } from '../ui/portrules.js';

test('the listening ports are offered sorted, each once', () => {
  assert.deepEqual(listeningPorts([{ port: 8000 }, { port: 3000 }, { port: 8000 }, { port: 5173 }]), [3000, 5173, 8000]);
});

test('nothing listening, nothing offered', () => {
  assert.deepEqual(listeningPorts([]), []);
  assert.deepEqual(listeningPorts(null), []);
  assert.deepEqual(listeningPorts({ error: 'x' }), []);
});

test('an entry that is not a port is left out', () => {
  assert.deepEqual(listeningPorts([{ port: 0 }, { port: 70000 }, { port: '80' }, { port: 1.5 }, null, {}, { port: 22 }]), [22]);
});
