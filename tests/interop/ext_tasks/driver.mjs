// The official tasks client (@modelcontextprotocol/ext-tasks on @modelcontextprotocol/client)
// against one of our servers: `node driver.mjs URL SCENARIO`, SCENARIO one of
//   complete  slow_compute becomes a task and settles with its CallToolResult
//   input     confirm_delete becomes a task, asks through tasks/get, is answered by tasks/update
//   cancel    a 60 s slow_compute task is cancelled and then reads as cancelled
// It prints one JSON line: {"scenario", "kind", "taskId", "outcome", "result"?, "status"?,
// "asked"?, "sent": [methods sent through the raw path], "checks": [the Mcp-* headers sent]}.
// Any failure prints {"error": ...} and exits 1.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  createTaskSessionFromClient,
  resultFromTaskOutcome,
} from "@modelcontextprotocol/ext-tasks/client";

const [url, scenario] = process.argv.slice(2);
const VERSION = "2026-07-28";
const CLIENT_INFO = { name: "ext-tasks-interop", version: "1.0.0" };
const CAPABILITIES = {
  elicitation: { form: {} },
  extensions: { "io.modelcontextprotocol/tasks": {} },
};

// What went over the raw path (tools/call and tasks/*), for the test to check.
const sent = [];
const headersSent = [];
let nextId = 1;

// The host's request path for the modern task wire (the SDK client's codecs do not carry
// CreateTaskResult): one POST per request, with the routing headers the spec asks for.
async function rawDispatch(request, options = {}) {
  const id = `raw-${nextId++}`;
  const params = request.params ?? {};
  // The package's own context headers (it names the task in Mcp-Name itself) win; names are
  // case-insensitive, so they are merged lower-cased.
  const own = Object.entries(options.context?.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]);
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": VERSION,
    "mcp-method": request.method,
  };
  const name = request.method === "tools/call" ? params.name : params.taskId;
  if (typeof name === "string") headers["mcp-name"] = name;
  Object.assign(headers, Object.fromEntries(own));
  sent.push(request.method);
  headersSent.push({
    method: request.method,
    name: headers["mcp-name"] ?? null,
    packageSetName: own.some(([k]) => k === "mcp-name"),
  });
  const response = await fetch(url, {
    method: "POST",
    headers,
    body: JSON.stringify({ jsonrpc: "2.0", id, ...request }),
    signal: options.signal,
  });
  const message = await readReply(response, id);
  if (message.error !== undefined) return { kind: "error", error: message.error };
  return { kind: "result", result: message.result };
}

// The response to `id`: the JSON body, or the matching message of an SSE body.
async function readReply(response, id) {
  const text = await response.text();
  if (!(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
    return JSON.parse(text);
  }
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).trimStart())
      .join("\n");
    if (data === "") continue;
    const message = JSON.parse(data);
    if (message.id === id) return message;
  }
  throw new Error(`no response to ${id} in the event stream (HTTP ${response.status})`);
}

const asked = [];
async function onInputRequest(request) {
  asked.push({ kind: request.kind, message: request.params.message ?? null });
  if (request.kind !== "elicitation") throw new Error(`unexpected ${request.kind} request`);
  return { action: "accept", content: { confirm: true } };
}

async function main() {
  const client = new Client(CLIENT_INFO, {
    capabilities: CAPABILITIES,
    versionNegotiation: { mode: { pin: VERSION } },
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const era = client.getProtocolEra();
  const session = createTaskSessionFromClient(client, {
    endpointId: `interop:${url}`,
    rawDispatch,
    v2RequestFraming: {
      protocolVersion: VERSION,
      clientInfo: CLIENT_INFO,
      clientCapabilities: CAPABILITIES,
    },
    onInputRequest,
  });
  const out = { scenario, era };
  try {
    if (scenario === "complete" || scenario === "input") {
      const execution =
        scenario === "complete"
          ? await session.callTool("slow_compute", { seconds: 0.3, label: "ext" })
          : await session.callTool("confirm_delete", { filename: "ext.txt" });
      out.kind = execution.kind;
      out.taskId = execution.handle?.taskId ?? null;
      const { outcome } = await execution.settle();
      out.outcome = outcome.status;
      out.result = resultFromTaskOutcome(outcome);
      out.asked = asked;
    } else if (scenario === "cancel") {
      const execution = await session.callTool("slow_compute", { seconds: 60, label: "ext" });
      out.kind = execution.kind;
      out.taskId = execution.handle?.taskId ?? null;
      await execution.cancel();
      const view = await session.task(out.taskId).snapshot();
      out.status = view.status;
      out.statusMessage = view.statusMessage ?? null;
      const outcome = await session.task(out.taskId).result();
      out.outcome = outcome.status;
    } else {
      throw new Error(`unknown scenario ${scenario}`);
    }
  } finally {
    await session.close();
    await client.close();
  }
  out.sent = sent;
  out.checks = headersSent;
  console.log(JSON.stringify(out));
}

main().catch((error) => {
  console.log(JSON.stringify({ error: String(error?.stack ?? error), sent }));
  process.exit(1);
});
