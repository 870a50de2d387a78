// The official TypeScript SDK's server 2.4 on stdio (a 2026-07-28 server), for
// tests/test_bridge_peers_legacy.py, launched by mrtr-bridge as its upstream: a plain tool with
// an argument, and a tool answering input_required (a form elicitation and a requestState it
// checks on the retry), on the SDK's own defaults.
import { McpServer, acceptedContent, inputRequired } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import * as z from "zod/v4";

const STATE = "ts-awaiting-confirmation";
const CONFIRM = {
  type: "object",
  properties: { ok: { type: "boolean", description: "Go ahead?" } },
  required: ["ok"],
};

serveStdio(() => {
  const server = new McpServer(
    { name: "bridge-peers-ts", version: "2.4.0-test" },
    { capabilities: { tools: {} } },
  );
  server.registerTool(
    "shout",
    { description: "Answers its text in capitals.", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text: text.toUpperCase() }] }),
  );
  server.registerTool(
    "confirm_with_state",
    { description: "Asks for a confirmation, keeping a requestState, then confirms." },
    async (ctx) => {
      const req = ctx.mcpReq;
      const content = acceptedContent(req.inputResponses, "confirm");
      if (req.requestState() !== STATE || content?.ok !== true) {
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({
              message: "TS server: confirm?",
              requestedSchema: CONFIRM,
            }),
          },
          requestState: STATE,
        });
      }
      return { content: [{ type: "text", text: `Confirmed by TS (${req.requestState()}).` }] };
    },
  );
  return server;
});
