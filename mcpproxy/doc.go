// Package mcpproxy is a transparent proxy for the Model Context Protocol
// (MCP) that reports every call it carries: each tools/call,
// resources/read and prompts/get request with its response becomes one
// Call (server, method, name, status, start, duration, input and output),
// handed to a Recorder.
//
// It speaks both MCP transports: stdio (Stdio runs the server and relays
// the newline-delimited JSON-RPC of its stdin and stdout) and streamable
// HTTP (NewHTTP is a handler in front of a server's endpoint, for POST,
// GET and DELETE, with JSON and server-sent-event responses).
//
// Transparency: every byte passes unchanged, in both directions, including
// whitespace, unknown fields, notifications, batches and malformed lines
// (reported as Calls with status "malformed", never breaking the stream).
// The one exception is a tools/call of a tool that Options.Refuse refuses:
// it is not forwarded, and the proxy answers it itself with a JSON-RPC
// error carrying the request's id bytes unchanged and code RefusedCode
// (-32001, in the server-error range), message `tool "X" refused by
// policy`. Over stdio, a batch that holds a refused call is forwarded
// without that element (or not at all if nothing else is left), and the
// refused elements are answered by one array of errors. Over HTTP, see
// NewHTTP. Over HTTP, Accept-Encoding is also removed from requests so that
// responses arrive uncompressed and can be read.
//
// Requests and responses are paired by id, per direction (the ids of
// server-to-client requests are a namespace of their own), in a bounded
// table (Options.Pending); what is still pending when the stream ends, or
// is evicted as the oldest, is reported "unanswered". Messages up to
// Options.LineLimit (64 MiB by default) are parsed; a longer one is
// forwarded unparsed and reported malformed.
//
// Recording never slows the stream: calls go to the Recorder through a
// bounded queue, and what does not fit is dropped and counted (Lost).
//
// Trust model: both peers are untrusted. The client is usually the agent
// being recorded and may try to slip a refused call past the proxy: the
// proxy decodes what the peer's JSON parser would (escaped keys and
// strings, the last of duplicate keys, a leading byte-order mark), holds
// the client's lines whole while a refusal policy is in force, and drops
// (rather than forwards unread) a client line too long to parse, or a
// malformed one in which a lenient reading finds a refused call (NaN,
// which Python's parsers accept; a CR, at which universal newlines split). The calls are the proxy's own
// account of the bytes it relayed; the server's name comes from the
// server itself unless Options.Server gives it.
package mcpproxy
