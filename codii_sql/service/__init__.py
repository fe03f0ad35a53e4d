"""The one face of the engine: build, search, status and the rest, for the CLI, the MCP server and any other face."""
