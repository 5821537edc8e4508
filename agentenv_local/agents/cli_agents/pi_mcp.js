// agentenv's pi extension: the env's MCP servers as pi tools (pi has no MCP client of its own).
//
// The pi agent (pi.py) loads this file with `pi -e` (with --no-extensions: nothing else is discovered) and names a
// JSON file in AGENTENV_PI_MCP: {"servers": {NAME: {"url": ..., "headers": {...}}}}, in the agent's private HOME
// (a bound token in a header stays off argv and the environment). At start it lists each server's tools over MCP
// streamable HTTP (JSON-RPC over POST, answers as JSON or server-sent events) and registers each as a pi tool
// named SERVER_TOOL with the tool's own JSON Schema (pi validates plain JSON Schema too); a call goes to
// tools/call on that server with the same headers. A server that cannot be listed is said on stderr and skipped.

import { readFileSync } from "node:fs";

const PROTOCOL = "2025-06-18";

class McpServer {
	constructor(name, url, headers) {
		this.name = name;
		this.url = url;
		this.headers = headers || {};
		this.session = null;
		this.nextId = 1;
	}

	async post(message, signal) {
		const headers = { ...this.headers, "content-type": "application/json", accept: "application/json, text/event-stream" };
		if (this.session) headers["mcp-session-id"] = this.session;
		if (this.initialized) headers["mcp-protocol-version"] = PROTOCOL;
		const response = await fetch(this.url, { method: "POST", headers, body: JSON.stringify(message), signal });
		const session = response.headers.get("mcp-session-id");
		if (session) this.session = session;
		if (!response.ok) {
			throw new Error(`MCP server ${this.name}: HTTP ${response.status} ${(await response.text()).slice(0, 300)}`);
		}
		return response;
	}

	async request(method, params, signal) {
		const id = this.nextId++;
		const response = await this.post({ jsonrpc: "2.0", id, method, params }, signal);
		const type = response.headers.get("content-type") || "";
		const text = await response.text();
		const messages = type.includes("text/event-stream") ? sseMessages(text) : [JSON.parse(text)];
		const answer = messages.find((m) => m && m.id === id);
		if (!answer) throw new Error(`MCP server ${this.name}: no answer to ${method}`);
		if (answer.error) throw new Error(`MCP server ${this.name}: ${answer.error.message || JSON.stringify(answer.error)}`);
		return answer.result;
	}

	async start() {
		await this.request("initialize", {
			protocolVersion: PROTOCOL,
			capabilities: {},
			clientInfo: { name: "agentenv-pi-mcp", version: "1" },
		});
		this.initialized = true;
		await this.post({ jsonrpc: "2.0", method: "notifications/initialized" });
	}

	async tools() {
		const tools = [];
		let cursor;
		do {
			const page = await this.request("tools/list", cursor ? { cursor } : {});
			tools.push(...(page.tools || []));
			cursor = page.nextCursor;
		} while (cursor);
		return tools;
	}
}

// the JSON-RPC messages of a server-sent-events body (each event's data lines joined)
function sseMessages(text) {
	const out = [];
	for (const block of text.split(/\r?\n\r?\n/)) {
		const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart());
		if (data.length) {
			try {
				out.push(JSON.parse(data.join("\n")));
			} catch {
				// not JSON: a keep-alive or a comment
			}
		}
	}
	return out;
}

function resultText(result) {
	const parts = (result.content || []).map((c) => (c.type === "text" ? c.text : JSON.stringify(c)));
	if (!parts.length && result.structuredContent) parts.push(JSON.stringify(result.structuredContent));
	return parts.join("\n");
}

export default async function (pi) {
	const path = process.env.AGENTENV_PI_MCP;
	if (!path) return;
	const { servers } = JSON.parse(readFileSync(path, "utf8"));
	for (const [name, reg] of Object.entries(servers || {})) {
		const server = new McpServer(name, reg.url, reg.headers);
		let tools;
		try {
			await server.start();
			tools = await server.tools();
		} catch (error) {
			process.stderr.write(`agentenv pi extension: MCP server ${name} not listed: ${error.message}\n`);
			continue;
		}
		for (const tool of tools) {
			pi.registerTool({
				name: `${name}_${tool.name}`,
				label: tool.title || tool.name,
				description: tool.description || tool.name,
				parameters: tool.inputSchema || { type: "object", properties: {} },
				async execute(_toolCallId, params, signal) {
					const result = await server.request("tools/call", { name: tool.name, arguments: params || {} }, signal);
					const text = resultText(result);
					if (result.isError) throw new Error(text || `${tool.name} failed`);
					return { content: [{ type: "text", text }], details: {} };
				},
			});
		}
	}
}
