go test fuzz v1
[]byte("{\"v\":1,\"seq\":412,\"ts\":\"2026-03-14T10:03:00.000000001Z\",\"session_id\":\"s-01JQ80A\",\"host\":\"worker-1\",\"kind\":\"model.io\",\"source\":\"api\",\"model\":{\"input_summary\":\"system+user, 3 tool results\",\"output_summary\":\"tool_use: bash\",\"tokens\":9120}}")
