// The official TS client (@modelcontextprotocol/client 2.4.0) pinned to 2026-07-28, against one
// URL (tests/test_bridge_peers.py: mrtr-bridge in front of a legacy-only SDK 1.x server):
//   node driver.mjs URL
// It connects over Streamable HTTP, lists the tools, calls each, and answers the elicitations it
// is asked through its own input_required driver: accepting (name "Ada", then yes), then
// declining and cancelling, and it calls add with an argument of the wrong type: one by one; then
// one that walks away from its question, and three clients at once ask for a name each. It
// prints JSON lines, one per step:
//   {"step": "connected", "protocolVersion", "era", "server": {name, version}}
//   {"step": "tools", "names": [...]}
//   {"step": "call", "label", "name" (it answers with), "tool", "answers", "text", "isError",
//    "asked": [messages, in order]}
//   {"step": "walked away", "error"}
//   {"step": "wire", "received": [{"label", "method", "message"}],
//    "sent": [{"label", "method", "id", "params"}]}
// "wire" holds every JSON-RPC message the client received over HTTP (with the method of the
// request it answers) and every request it posted, read at the fetch the transport uses.
// Any failure prints {"error": ...} and exits 1.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url] = process.argv.slice(2);
const VERSION = "2026-07-28";

const sent = [];
const received = [];
const reading = [];

// The JSON-RPC messages of one HTTP body: a JSON message or batch, or an SSE stream's data.
function messagesOf(contentType, text) {
  if (text.trim() === "") return [];
  if (!contentType.includes("text/event-stream")) {
    const parsed = JSON.parse(text);
    return Array.isArray(parsed) ? parsed : [parsed];
  }
  const out = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).trimStart())
      .join("\n");
    if (data !== "") out.push(JSON.parse(data));
  }
  return out;
}

// The transport's fetch, tapped: what goes up is noted by id, what comes back is parsed from a
// clone once the body ends (a POST's response ends with its answer, and answers only its body's
// requests: ids are matched per POST, as each client counts its own from 0).
const tap = (label) => async (input, init) => {
  const body = typeof init?.body === "string" ? JSON.parse(init.body) : undefined;
  const methodOf = new Map();
  for (const msg of Array.isArray(body) ? body : body === undefined ? [] : [body]) {
    if (msg.method !== undefined && msg.id !== undefined) {
      methodOf.set(msg.id, msg.method);
      sent.push({ label, method: msg.method, id: msg.id, params: msg.params ?? null });
    }
  }
  const response = await fetch(input, init);
  if ((init?.method ?? "GET") === "POST") {
    const contentType = response.headers.get("content-type") ?? "";
    reading.push(
      response
        .clone()
        .text()
        .then((text) => {
          for (const message of messagesOf(contentType, text)) {
            received.push({ label, method: methodOf.get(message.id) ?? null, message });
          }
        }),
    );
  }
  return response;
};

async function run(answers, { label = "one by one", name = "Ada", delayMs = 0 } = {}) {
  const client = new Client(
    { name: "bridge-peers-ts", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: VERSION } } },
  );
  let asked = [];
  client.setRequestHandler("elicitation/create", async (request) => {
    const message = request.params.message;
    asked.push(message);
    const answer = answers[asked.length - 1] ?? "decline";
    if (answer === "walk away") throw new Error("the user walked away");
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    if (answer !== "accept") return { action: answer };
    const props = Object.keys(request.params.requestedSchema?.properties ?? {});
    return { action: "accept", content: props.includes("ok") ? { ok: true } : { name } };
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: tap(label) }));
  return {
    client,
    call: async (tool, args = {}) => {
      asked = [];
      const result = await client.callTool({ name: tool, arguments: args });
      const text = (result.content ?? []).map((c) => c.text).join("");
      const isError = result.isError ?? false;
      const out = { step: "call", label, name, tool, answers, text, isError, asked };
      console.log(JSON.stringify(out));
    },
  };
}

async function main() {
  const accepting = await run(["accept", "accept"]);
  const server = accepting.client.getServerVersion();
  console.log(
    JSON.stringify({
      step: "connected",
      protocolVersion: accepting.client.getNegotiatedProtocolVersion() ?? null,
      era: accepting.client.getProtocolEra() ?? null,
      server: server ? { name: server.name, version: server.version } : null,
    }),
  );
  const { tools } = await accepting.client.listTools();
  console.log(JSON.stringify({ step: "tools", names: tools.map((t) => t.name) }));
  await accepting.call("add", { a: 2, b: 3 });
  await accepting.call("ask_name");
  await accepting.call("ask_twice");
  await accepting.client.close();

  const declining = await run(["decline"]);
  await declining.call("ask_name");
  await declining.client.close();
  const confirmDeclined = await run(["accept", "decline"]);
  await confirmDeclined.call("ask_twice");
  await confirmDeclined.client.close();
  const cancelling = await run(["cancel"]);
  await cancelling.call("ask_name");
  await cancelling.call("add", { a: "two", b: 3 });
  await cancelling.client.close();

  // A client that never answers: its call stays held at the bridge, its question open upstream.
  const away = await run(["walk away"], { label: "walked away" });
  try {
    await away.call("ask_name");
  } catch (error) {
    console.log(JSON.stringify({ step: "walked away", error: String(error?.message ?? error) }));
  }
  await away.client.close();

  // Then three clients at once, each answering with its own name after a while: their calls
  // overlap at the bridge, and none waits for the one that walked away.
  await Promise.all(
    ["Grace", "Linus", "Ada"].map(async (name) => {
      const each = await run(["accept"], { label: "at once", name, delayMs: 200 });
      await each.call("ask_name");
      await each.client.close();
    }),
  );

  await Promise.all(reading);
  console.log(JSON.stringify({ step: "wire", received, sent }));
}

main().catch((error) => {
  console.log(JSON.stringify({ error: String(error?.stack ?? error) }));
  process.exit(1);
});
