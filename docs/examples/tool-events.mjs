// Post one tool invocation to the sandtrail daemon's tool API, with Node's
// standard library only. Run it inside a session (the session is the
// caller's own: "self"), or as root outside every session naming one:
//
//   SANDTRAIL_SESSION=sess-7f3a node tool-events.mjs
//
// The daemon keeps of "input" and "output" what the policy's tool_io says
// (names, summaries, or full I/O sealed to the investigators).
import http from "node:http";

const socketPath = process.env.SANDTRAIL_API_SOCKET ?? "/run/sandtrail/api.sock";
const session = process.env.SANDTRAIL_SESSION ?? "self";

function post(body) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request(
      {
        socketPath,
        method: "POST",
        path: `/v1/sessions/${encodeURIComponent(session)}/events`,
        headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => (res.statusCode === 201 ? resolve(JSON.parse(text)) : reject(new Error(`${res.statusCode}: ${text}`))));
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

const started = Date.now();
const output = "added 1 package in 2s"; // what the tool returned
const posted = await post({
  kind: "tool.invoke",
  ts: new Date(started).toISOString(),
  tool: { name: "bash", status: "ok", duration_ms: Date.now() - started },
  input: JSON.stringify({ command: "npm install lodash@^4.17.0" }),
  output,
});
console.log(JSON.stringify(posted));
