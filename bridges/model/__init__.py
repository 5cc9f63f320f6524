"""The model plug-in: any OpenAI-compatible chat-completions server as an agent."""
