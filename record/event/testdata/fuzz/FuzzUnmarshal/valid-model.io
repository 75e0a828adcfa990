go test fuzz v1
[]byte("{\"v\":1,\"seq\":161,\"ts\":\"2026-03-14T09:26:53.750793238Z\",\"session_id\":\"s-01JQ7ZK3V9TQ4M2X8C5N6B7D0E\",\"host\":\"worker-3\",\"kind\":\"model.io\",\"source\":\"api\",\"model\":{\"tokens\":1834,\"input_summary\":\"user: add lodash and use debounce in search.ts\",\"output_summary\":\"tool_use bash: npm install lodash@^4.17.0\"}}")
