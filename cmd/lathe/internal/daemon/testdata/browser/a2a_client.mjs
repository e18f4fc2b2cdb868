// Drives Lathe's A2A receiver with the official JavaScript SDK's 0.3 line
// on its defaults (a2a_sdk_test.go): the card from
// /.well-known/agent-card.json, message/send, tasks/get, and an error's
// message (a2a_defaults.mjs). Prints one JSON line.
//
//   node a2a_client.mjs BASE_URL [API_KEY]
import * as sdk from '@a2a-js/sdk/client';
import { defaults, refusal, report } from './a2a_defaults.mjs';

const [base, key] = process.argv.slice(2);
const { factory, resolver } = defaults(sdk, key);
await report(async (out) => {
	const client = await factory.createFromUrl(base);
	const card = await resolver.resolve(base);
	out.card = { name: card.name, securitySchemes: Object.keys(card.securitySchemes ?? {}) };
	out.version = card.protocolVersion;
	const task = await client.sendMessage({
		message: { kind: 'message', messageId: 'sdk-1', role: 'user', parts: [{ kind: 'text', text: 'What is six times seven?' }], metadata: { receiver_id: 'helper' } },
	});
	out.sent = { task: task.kind === 'task', state: task.status?.state, answer: task.artifacts?.[0]?.parts?.[0]?.text };
	const got = await client.getTask({ id: task.id });
	out.got = { id: got.id === task.id, state: got.status?.state };
	out.error = await refusal(() => client.sendMessage({ message: { kind: 'message', messageId: 'sdk-2', role: 'user', parts: [{ kind: 'text', text: 'x' }], metadata: { receiver_id: 'nobody' } } }));
});
