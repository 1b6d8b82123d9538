# SPDX-License-Identifier: Apache-2.0
"""A LangChain agent (pip install langchain langchain-mcp-adapters
langchain-openai) whose only tools are cordon's MCP gateway: run it in a
project that has .cordon/mcp.yaml, with OPENAI_API_KEY set."""

import asyncio

from langchain.agents import create_agent
from langchain_mcp_adapters.client import MultiServerMCPClient


async def main():
    client = MultiServerMCPClient(
        {
            "cordon": {
                "transport": "stdio",
                "command": "cordon",
                "args": ["mcp", "--profile", ".cordon/mcp.yaml"],
            }
        }
    )
    tools = await client.get_tools()
    agent = create_agent("openai:gpt-4.1", tools)
    result = await agent.ainvoke({"messages": [{"role": "user", "content": "List the files of the repository, then run its tests."}]})
    print(result["messages"][-1].content)


if __name__ == "__main__":
    asyncio.run(main())
