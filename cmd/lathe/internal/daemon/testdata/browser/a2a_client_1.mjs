// Drives Lathe's A2A receiver with the official JavaScript SDK's 1.x line
// (A2A 1.0; npm alias a2a-sdk-1) on its defaults (a2a_sdk_test.go): the
// card from /.well-known/agent-card.json, the interface the factory picks,
// SendMessage, GetTask, and an error's message, on its defaults
// (a2a_defaults.mjs). Prints one JSON line.
//
//   node a2a_client_1.mjs BASE_URL [API_KEY]
import { Role, TaskState, taskStateToJSON } from 'a2a-sdk-1';
import * as sdk from 'a2a-sdk-1/client';
import { defaults, refusal, report } from './a2a_defaults.mjs';

const [base, key] = process.argv.slice(2);
const { factory, resolver } = defaults(sdk, key);
const message = (id, text, receiver) => ({
	messageId: id, contextId: '', taskId: '', role: Role.ROLE_USER, extensions: [], referenceTaskIds: [],
	parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
	metadata: { receiver_id: receiver },
});
const text = (parts) => parts?.[0]?.content?.$case === 'text' ? parts[0].content.value : undefined;
await report(async (out) => {
	const client = await factory.createFromUrl(base);
	const card = await resolver.resolve(base);
	out.card = { name: card.name, securitySchemes: Object.keys(card.securitySchemes ?? {}),
		interfaces: (card.supportedInterfaces ?? []).map((i) => `${i.protocolBinding} ${i.protocolVersion}`) };
	out.version = client.protocolVersion;
	const task = await client.sendMessage({ message: message('sdk-1', 'What is six times seven?', 'helper') });
	out.sent = { task: 'status' in task, state: taskStateToJSON(task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED), answer: text(task.artifacts?.[0]?.parts) };
	const got = await client.getTask({ id: task.id });
	out.got = { id: got.id === task.id, state: taskStateToJSON(got.status?.state) };
	out.error = await refusal(() => client.sendMessage({ message: message('sdk-2', 'x', 'nobody') }));
});
