"""Drives `blockhook mcp` over stdio with the official MCP Python SDK.

Usage: mcp_client.py BLOCKHOOK_BINARY HANDSHAKE TOOL ARGUMENTS_JSON

HANDSHAKE is `initialize` (the handshake of protocol versions up to
2025-11-25) or `discover` (the newer per-request versions). TOOL is a tool
name, or `-` to only list the tools. The server gets this process's
environment (BLOCKHOOK_URL, BLOCKHOOK_API_KEY, BLOCKHOOK_CONVERSATION).

Prints one JSON object: the negotiated protocol version, the tools, and the
tool's result with the progress notifications received during the call.
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    binary, handshake, tool, arguments = sys.argv[1:5]
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    report: dict = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            if handshake == "discover":
                await session.discover()
            else:
                await session.initialize()
            report["protocol_version"] = session.protocol_version
            listed = await session.list_tools()
            report["tools"] = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]
            if tool != "-":
                progress: list[dict] = []

                async def on_progress(value: float, total: float | None, message: str | None) -> None:
                    progress.append({"progress": value, "message": message})

                result = await session.call_tool(
                    tool,
                    json.loads(arguments),
                    read_timeout_seconds=120,
                    progress_callback=on_progress,
                )
                report["result"] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
                report["progress"] = progress
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
