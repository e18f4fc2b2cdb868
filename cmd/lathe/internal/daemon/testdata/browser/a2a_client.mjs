// Drives Lathe's A2A receiver with the official JavaScript SDK on its
// defaults (a2a_sdk_test.go): the card from /.well-known/agent-card.json,
// message/send, tasks/get, and an error's message. Prints one JSON line.
//
//   node a2a_client.mjs BASE_URL API_KEY
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const [base, key] = process.argv.slice(2);
const fetchImpl = (url, init = {}) => {
	const headers = new Headers(init.headers);
	headers.set('x-api-key', key);
	return fetch(url, { ...init, headers });
};
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
	transports: [new JsonRpcTransportFactory({ fetchImpl })],
	cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
}));
const out = {};
try {
	const client = await factory.createFromUrl(base);
	const card = await new DefaultAgentCardResolver({ fetchImpl }).resolve(base);
	out.card = { name: card.name, protocolVersion: card.protocolVersion, securitySchemes: Object.keys(card.securitySchemes ?? {}) };
	const task = await client.sendMessage({
		message: { kind: 'message', messageId: 'sdk-1', role: 'user', parts: [{ kind: 'text', text: 'What is six times seven?' }], metadata: { receiver_id: 'helper' } },
	});
	out.sent = { kind: task.kind, state: task.status?.state, answer: task.artifacts?.[0]?.parts?.[0]?.text };
	const got = await client.getTask({ id: task.id });
	out.got = { id: got.id === task.id, state: got.status?.state };
	try {
		await client.sendMessage({ message: { kind: 'message', messageId: 'sdk-2', role: 'user', parts: [{ kind: 'text', text: 'x' }], metadata: { receiver_id: 'nobody' } } });
		out.error = 'no error';
	} catch (e) {
		out.error = String(e?.message ?? e);
	}
} catch (e) {
	out.failed = String(e?.stack ?? e);
}
console.log(JSON.stringify(out));
