// The official A2A JavaScript client on its defaults, for either SDK line
// (a2a_client.mjs, a2a_client_1.mjs): sdk is the line's client module.
// Without an API key the factory and the card resolver are as they come;
// with one, only their fetch adds the x-api-key header.
export function defaults(sdk, key) {
	if (!key) {
		return { factory: new sdk.ClientFactory(), resolver: new sdk.DefaultAgentCardResolver() };
	}
	const fetchImpl = (url, init = {}) => {
		const headers = new Headers(init.headers);
		headers.set('x-api-key', key);
		return fetch(url, { ...init, headers });
	};
	return {
		factory: new sdk.ClientFactory(sdk.ClientFactoryOptions.createFrom(sdk.ClientFactoryOptions.default, {
			transports: [new sdk.JsonRpcTransportFactory({ fetchImpl })],
			cardResolver: new sdk.DefaultAgentCardResolver({ fetchImpl }),
		})),
		resolver: new sdk.DefaultAgentCardResolver({ fetchImpl }),
	};
}

// report runs the client's calls, which fill out, and prints out as one
// JSON line; a call that throws ends them, its stack in out.failed.
export async function report(run) {
	const out = {};
	try {
		await run(out);
	} catch (e) {
		out.failed = String(e?.stack ?? e);
	}
	console.log(JSON.stringify(out));
}

// refusal is the message of the error call throws ('no error' if none).
export async function refusal(call) {
	try {
		await call();
		return 'no error';
	} catch (e) {
		return String(e?.message ?? e);
	}
}
