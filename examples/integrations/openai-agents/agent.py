# SPDX-License-Identifier: Apache-2.0
"""An agent of the OpenAI Agents SDK (pip install openai-agents) whose only
tools are cordon's MCP gateway: run it in a project that has
.cordon/mcp.yaml, with OPENAI_API_KEY set."""

import asyncio

from agents import Agent, Runner
from agents.mcp import MCPServerStdio


async def main():
    async with MCPServerStdio(
        name="cordon",
        params={"command": "cordon", "args": ["mcp", "--profile", ".cordon/mcp.yaml"]},
        client_session_timeout_seconds=600,
    ) as cordon:
        agent = Agent(
            name="coder",
            instructions="You work on the repository in the current directory through the cordon tools.",
            mcp_servers=[cordon],
        )
        result = await Runner.run(agent, "List the files of the repository, then run its tests.")
        print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
