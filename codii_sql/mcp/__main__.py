"""``python -m codii_sql.mcp``: the MCP server on stdio."""

from . import main

main()
